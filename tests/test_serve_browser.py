"""The browser page of mule.serve in headless Chromium (Playwright), against real pi.

Chromium is Debian's (/usr/bin/chromium): Playwright's own browser download is never used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, expect, sync_playwright

from mule.serve import ServerConfig
from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, tool_call
from tests.pirc.helpers import HERE, config, make_home, pi_available
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
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        ctx.set_default_timeout(30_000)
        try:
            yield ctx
        finally:
            ctx.close()


def test_page_starts_a_job_streams_it_and_answers_dialogs(
    browser: BrowserContext, tmp_path: Path
) -> None:
    """Start from the form, watch the text stream, click Yes and "green", see the answer."""
    ask = tool_call("c1", "ask_user", {"question": "may I?"})
    with FakeOpenAI() as fake:
        fake.push(chat_stream(text="Let me ask you first.", pieces=8, delay_ms=40, calls=[ask]))
        fake.push(chat_text("All done: you picked green.", pieces=10, delay_ms=30))
        dirs = make_home(tmp_path, fake.base_url)
        bridge = config(dirs, tools=("ask_user",), extensions=(str(HERE / "ui_ext.ts"),))
        with running(ServerConfig(bridge=bridge, token=TOKEN)) as srv, srv.http() as h:
            page = browser.new_page()
            errors: list[Any] = []
            page.on("pageerror", lambda exc: errors.append(exc))
            page.goto(f"{srv.base_url}/#token={TOKEN}")
            assert "token" not in page.url  # the page moved it out of the address bar

            # record every text the first assistant block shows, to see it grow
            page.evaluate(_RECORD_TEXTS)
            page.fill("#prompt", "ask me something")
            page.click("#start")
            # the first answer streams in before the dialog blocks the tool
            expect(page.locator(".msg.assistant .text").first).to_have_text("Let me ask you first.")
            shown: list[str] = page.evaluate("window.__texts")
            partial = [t for t in shown if t and t != "Let me ask you first."]
            assert partial, f"no partial text was ever shown: {shown}"
            assert all("Let me ask you first.".startswith(t) for t in partial)
            expect(page.locator(".msg.user").first).to_have_text("ask me something")
            expect(page.locator("#status")).to_have_text("running")

            confirm = page.locator(".dialog[data-method=confirm]")
            expect(confirm).to_contain_text("may I?")
            confirm.locator("button.yes").click()
            select = page.locator(".dialog[data-method=select]")
            expect(select.locator("button.option")).to_have_text(["red", "green"])
            select.locator("button.option", has_text="green").click()

            expect(page.locator("#status")).to_have_text("completed")
            expect(page.locator("#answer")).to_contain_text("All done: you picked green.")
            expect(page.locator(".dialog")).to_have_count(0)
            expect(page.locator("#jobs li")).to_have_count(1)
            job = page.locator("#jobs li").first.get_attribute("data-job-id")
            assert job is not None
            result = h.get(f"/jobs/{job}").json()["result"]
            tool = [m for m in result["messages"] if m["role"] == "toolResult"]
            assert tool[0]["content"][0]["text"] == "confirmed=true pick=green"
            assert errors == []

            # the page survives a reload: the job is listed and replayed on selection
            page.reload()
            page.locator("#jobs li").first.click()
            expect(page.locator("#status")).to_have_text("completed")
            expect(page.locator(".msg.assistant .text").last).to_have_text(
                "All done: you picked green."
            )


def test_page_asks_for_a_token_when_refused(browser: BrowserContext) -> None:
    """A wrong token: the socket is refused (4401) and the page shows the token form."""
    bridge = config({"work": "/", "agent": "/", "home": "/", "tmp": "/"})
    with running(ServerConfig(bridge=bridge, token=TOKEN)) as srv:
        page = browser.new_page()
        page.goto(f"{srv.base_url}/#token=not-the-token")
        expect(page.locator("#auth")).to_be_visible()
        expect(page.locator("#start-error")).to_contain_text("refused")
        page.fill("#token", TOKEN)
        page.click("#save-token")
        expect(page.locator("#auth")).to_be_hidden()
        expect(page.locator("#conn")).to_have_text("")
