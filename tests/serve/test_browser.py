"""The browser page of mule.serve in headless Chromium (Playwright), against real pi.

Chromium is Debian's (/usr/bin/chromium): Playwright's own browser download is never used.
Each key moment is kept as a screenshot under tests/artifacts/serve/ (gitignored), for a person
to look at after a run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect, sync_playwright

from mule.pirc import BridgeConfig
from mule.serve import AgentProfile, ServerConfig
from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, chat_usage, tool_call
from tests.pirc.helpers import KEY_ENV, MODEL, PI, pi_available
from tests.serve.fixtures import TOKEN, running

# pi (with a TypeScript extension to load) can take longer than expect()'s 5 s default to answer
# on a loaded machine; the same bound as the browser context's own timeout.
expect.set_options(timeout=30_000)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
EXT = str(Path(__file__).parent / "survey_ext.ts")
ARTIFACTS = Path(__file__).parents[1] / "artifacts" / "serve"

_RECORD_TEXTS = """() => {
  window.__texts = [];
  new MutationObserver(() => {
    const t = document.querySelector(".msg.assistant .text");
    if (t && window.__texts.at(-1) !== t.textContent) window.__texts.push(t.textContent);
  }).observe(document.getElementById("transcript"),
             {childList: true, subtree: true, characterData: true});
}"""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.pi,
    pytest.mark.skipif(not pi_available(), reason="pi CLI not installed"),
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason=f"{CHROMIUM} is missing (apt-get install -y chromium)",
    ),
]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    profile = tmp_path / "chromium-profile"  # a fresh user-data dir per test
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 860},
        )
        ctx.set_default_timeout(30_000)
        try:
            yield ctx
        finally:
            ctx.close()


def shot(page: Page, name: str) -> None:
    """Keep a screenshot of this moment as a test artefact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def bridge(tmp_path: Path, base_url: str) -> BridgeConfig:
    """Return a pi on the fake server, with prices (USD per million tokens) to show cost."""
    dirs = {d: tmp_path / d for d in ("agent", "home", "tmp", "work")}
    for d in dirs.values():
        d.mkdir()
    cost = {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}
    model = {"id": MODEL, "contextWindow": 128000, "maxTokens": 4096, "cost": cost}
    provider = {
        "baseUrl": base_url,
        "api": "openai-completions",
        "apiKey": KEY_ENV,
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [model],
    }
    (dirs["agent"] / "models.json").write_text(json.dumps({"providers": {"local": provider}}))
    settings = {"retry": {"enabled": False}, "compaction": {"enabled": False}}
    (dirs["agent"] / "settings.json").write_text(json.dumps(settings))
    return BridgeConfig(
        provider="local",
        model=MODEL,
        api_key_env=KEY_ENV,
        api_key="sk-test",
        executable=PI,
        cwd=str(dirs["work"]),
        agent_dir=str(dirs["agent"]),
        home=str(dirs["home"]),
        tmpdir=str(dirs["tmp"]),
        system_prompt="You are a test.",
        tools=("survey", "flaky"),
        extensions=(EXT,),
    )


USAGE = chat_usage(prompt=1000, completion=200)  # $0.003 + $0.003 per model call


def test_the_live_view_from_start_to_finish(browser: BrowserContext, tmp_path: Path) -> None:
    """Stream, thinking, tool cards, every dialog by keyboard, a failed tool, cost, replay."""
    survey = tool_call("c1", "survey", {"topic": "colours"})
    flaky = tool_call("c2", "flaky", {"steps": 3})
    with FakeOpenAI() as fake:
        fake.push(
            chat_stream(
                reasoning="The user wants a survey; I will ask with the survey tool.",
                text="Let me ask you a few things.",
                pieces=8,
                delay_ms=40,
                calls=[survey],
                usage=USAGE,
            )
        )
        fake.push(chat_stream(text="Now the flaky step.", calls=[flaky], usage=USAGE))
        fake.push(chat_text("All done: green, Ada.", pieces=6, delay_ms=30, usage=USAGE))
        with running(ServerConfig(bridge=bridge(tmp_path, fake.base_url), token=TOKEN)) as srv:
            page = browser.new_page()
            errors: list[Any] = []
            polls: list[str] = []
            page.on("pageerror", lambda exc: errors.append(exc))
            page.on(
                "request",
                lambda r: polls.append(r.url) if r.method == "GET" and "/jobs" in r.url else None,
            )
            page.goto(f"{srv.base_url}/#token={TOKEN}")
            assert "token" not in page.url  # the page moved it out of the address bar
            expect(page.locator("#conn")).to_have_text("live")
            expect(page.locator("#no-jobs")).to_be_visible()
            shot(page, "01-ready")

            page.evaluate(_RECORD_TEXTS)
            page.fill("#prompt", "run a survey")
            page.click("#start")
            # the job list arrives over the socket, not by polling
            expect(page.locator("#jobs li")).to_have_count(1)
            first = page.locator(".msg.assistant").first
            expect(first.locator(".text")).to_have_text("Let me ask you a few things.")
            shown: list[str] = page.evaluate("window.__texts")
            partial = [t for t in shown if t and t != "Let me ask you a few things."]
            assert partial, f"no partial text was ever shown: {shown}"
            assert all("Let me ask you a few things.".startswith(t) for t in partial)
            thinking = first.locator("details.thinking")
            expect(thinking).to_contain_text("I will ask with the survey tool")
            expect(page.locator(".msg.user").first).to_have_text("run a survey")
            expect(page.locator("#status")).to_have_text("running")

            # every dialog is a real modal <dialog>, answered from the keyboard alone
            dialog = page.locator("#ui-dialog")
            expect(dialog).to_have_attribute("data-method", "confirm")
            expect(dialog).to_contain_text("Survey about colours")
            assert page.evaluate("document.getElementById('ui-dialog').matches(':modal')")
            card = page.locator(".tool[data-tool-call-id=c1]")
            expect(card).to_have_attribute("data-state", "running")
            expect(card.locator("pre.args")).to_contain_text('"topic": "colours"')
            expect(page.locator("#jobs .pending")).to_have_text("⚑ 1 waiting")
            shot(page, "02-confirm-modal")
            expect(dialog.locator("button.yes")).to_be_focused()
            page.keyboard.press("Enter")

            expect(dialog).to_have_attribute("data-method", "select")
            expect(dialog.locator("button.option")).to_have_text(["red", "green", "blue"])
            expect(dialog.locator("button.option").first).to_be_focused()
            page.keyboard.press("ArrowDown")
            expect(dialog.locator("button.option[data-value=green]")).to_be_focused()
            shot(page, "03-select-modal")
            page.keyboard.press("Enter")

            expect(dialog).to_have_attribute("data-method", "input")
            field = dialog.locator("#ui-input")
            expect(field).to_be_focused()
            expect(field).to_have_attribute("placeholder", "name here")
            page.keyboard.type("Ada")
            shot(page, "04-input-modal")
            page.keyboard.press("Enter")

            expect(dialog).to_have_attribute("data-method", "editor")
            editor = dialog.locator("textarea#ui-input")
            expect(editor).to_have_value("line one")
            editor.press("End")
            page.keyboard.press("Enter")  # a newline in the editor, not a submit
            page.keyboard.type("line two")
            shot(page, "05-editor-modal")
            page.keyboard.press("Control+Enter")

            expect(card).to_have_attribute("data-state", "done")
            expect(card.locator("pre.output")).to_have_text(
                'ok=true colour=green name=Ada notes="line one\\nline two"'
            )
            failed = page.locator(".tool[data-tool-call-id=c2]")
            expect(failed.locator("pre.output")).to_contain_text(re.compile(r"step \d of 3"))
            expect(failed).to_have_attribute("data-state", "failed")
            expect(failed.locator(".state")).to_have_text("✗ failed: disk quota exceeded on /data")
            shot(page, "06-failed-tool")

            expect(page.locator("#status")).to_have_text("completed")
            expect(page.locator("#answer")).to_contain_text("All done: green, Ada.")
            expect(page.locator("#usage")).to_be_visible()
            expect(page.locator("#usage [data-k=input]")).to_have_text("3,000")
            expect(page.locator("#usage [data-k=output]")).to_have_text("600")
            expect(page.locator("#usage [data-k=cost]")).to_have_text("$0.0180")
            assert thinking.get_attribute("open") is None  # folded once the message ended
            thinking.locator("summary").click()
            assert thinking.get_attribute("open") is not None
            expect(page.locator("#jobs li [data-status=completed]")).to_have_count(1)
            expect(dialog).not_to_be_visible()
            shot(page, "07-completed")

            # a dropped socket: the page reconnects and rebuilds the job from the replay
            page.evaluate("state.ws.close()")
            expect(page.locator("#conn")).not_to_have_text("live")
            expect(page.locator("#conn")).to_have_text("live")
            expect(page.locator(".tool[data-state=failed] .state")).to_have_text(
                "✗ failed: disk quota exceeded on /data"
            )
            expect(page.locator("#answer")).to_contain_text("All done: green, Ada.")
            expect(page.locator("#usage [data-k=cost]")).to_have_text("$0.0180")
            shot(page, "08-reconnected")

            # a reload comes back to the same job, replayed
            page.reload()
            expect(page.locator("#status")).to_have_text("completed")
            expect(page.locator(".msg.assistant .text").last).to_have_text("All done: green, Ada.")
            assert polls == [], f"the page polled: {polls}"
            assert errors == []


def test_cancel_and_escape_from_the_page(browser: BrowserContext, tmp_path: Path) -> None:
    """Escape dismisses a dialog (pi gets a cancel); Cancel job ends a streaming job."""
    with FakeOpenAI() as fake:
        fake.push(chat_stream(calls=[tool_call("c1", "survey", {"topic": "x"})]))
        fake.set_default(chat_stream(text="this never finishes", pieces=3, then="stall"))
        with running(ServerConfig(bridge=bridge(tmp_path, fake.base_url), token=TOKEN)) as srv:
            page = browser.new_page()
            page.goto(f"{srv.base_url}/#token={TOKEN}")
            page.fill("#prompt", "survey, then stall")
            page.click("#start")
            dialog = page.locator("#ui-dialog")
            expect(dialog).to_have_attribute("data-method", "confirm")
            page.keyboard.press("Escape")  # dismissed: confirm answers false, and so on
            for method in ("select", "input", "editor"):
                expect(dialog).to_have_attribute("data-method", method)
                page.keyboard.press("Escape")
            card = page.locator(".tool[data-tool-call-id=c1]")
            expect(card.locator("pre.output")).to_have_text(
                "ok=false colour=undefined name=undefined notes=undefined"
            )
            expect(page.locator(".msg.assistant .text").last).to_have_text("this never finishes")
            expect(page.locator("#cancel")).to_be_visible()
            shot(page, "09-before-cancel")
            page.click("#cancel")
            expect(page.locator("#status")).to_have_text("cancelled")
            expect(page.locator(".msg.assistant .error").last).to_have_text("aborted")
            expect(page.locator("#cancel")).to_be_hidden()
            expect(page.locator("#jobs li [data-status=cancelled]")).to_have_count(1)
            shot(page, "10-cancelled")


def test_page_asks_for_a_token_when_refused(browser: BrowserContext) -> None:
    """A wrong token: the socket is refused (4401) and the page shows the token form."""
    cfg = BridgeConfig(provider="local", model="m", executable=PI)
    with running(ServerConfig(bridge=cfg, token=TOKEN)) as srv:
        page = browser.new_page()
        page.goto(f"{srv.base_url}/#token=not-the-token")
        expect(page.locator("#auth")).to_be_visible()
        expect(page.locator("#start-error")).to_contain_text("refused")
        expect(page.locator("#conn")).to_have_text("token refused")
        shot(page, "11-token-refused")
        page.fill("#token", TOKEN)
        page.click("#save-token")
        expect(page.locator("#auth")).to_be_hidden()
        expect(page.locator("#conn")).to_have_text("live")


def test_the_page_offers_the_agents_and_starts_a_job_with_one(browser: BrowserContext) -> None:
    """With agent profiles, the form shows them by name; the chosen one runs the job."""
    cfg = BridgeConfig(provider="local", model="m", executable=PI)
    agents = {
        "reviewer": AgentProfile(description="Reviews code"),
        "scratch": AgentProfile(),
    }
    with running(ServerConfig(bridge=cfg, token=TOKEN, agents=agents)) as srv:
        page = browser.new_page()
        page.goto(f"{srv.base_url}/#token={TOKEN}")
        expect(page.locator("#agent-row")).to_be_visible()
        options = page.locator("#agent option")
        expect(options).to_have_text(["(server default)", "reviewer — Reviews code", "scratch"])
        page.select_option("#agent", "reviewer")
        page.fill("#prompt", "review this")
        page.click("#start")
        expect(page.locator("#jobs li")).to_have_count(1)
        with srv.http() as h:
            (job,) = h.get("/jobs").json()["jobs"]
        assert (job["agent"], job["prompt"]) == ("reviewer", "review this")
    with running(ServerConfig(bridge=cfg, token=TOKEN)) as srv:  # no agents: no row
        page = browser.new_page()
        page.goto(f"{srv.base_url}/#token={TOKEN}")
        expect(page.locator("#conn")).to_have_text("live")
        expect(page.locator("#agent-row")).to_be_hidden()
