"""`mule` setup and network bounds: the idle timeout, URL checks, `--api`, `--version`, extras."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from mule.cli import build_parser
from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, openai_error, tool_call
from tests.cli import support as cli_support

pytestmark = pytest.mark.slow

env = cli_support.env
project = cli_support.project
fake = cli_support.fake
mule = cli_support.mule
run_args = cli_support.run_args


# -- never hang: the model stream's idle timeout ----------------------------------------------


def test_a_stalled_stream_times_out_and_is_retried(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """One chunk, then silence: the attempt fails as an idle timeout and the retry completes."""
    fake.push(chat_stream(text="Partial", pieces=1, then="stall"))
    fake.push(chat_text("Recovered."))
    args = run_args(fake, "hi", "--idle-timeout", "0.5", "--retry-base-ms", "10")
    started = time.monotonic()
    done = mule([*args, "--provider-retries", "0"], env, project)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
    assert "✗ model error (attempt 1): Model stream idle timeout" in done.stderr
    assert "retrying in 10 ms (retry 1 of 3)" in done.stderr
    assert "the failed attempt's text stays on stdout" in done.stderr
    assert done.stdout == "Partial\nRecovered.\n"
    assert fake.requests[0]["outcome"] == "client_gone"


def test_a_stalled_stream_without_retries_fails_with_exit_1_and_says_what_to_change(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """With no retries left the run fails (exit 1), naming the timeout and the flag."""
    fake.push(chat_stream(text="Partial", pieces=1, then="stall"))
    args = run_args(fake, "hi", "--idle-timeout", "0.4", "--retries", "0")
    done = mule(args, env, project)
    assert done.returncode == 1, done.stderr
    assert "run failed (model): Model stream idle timeout" in done.stderr
    assert "--idle-timeout" in done.stderr


def test_response_headers_that_never_come_are_bounded_too(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """A server that accepts the request and never answers is the same idle timeout."""
    fake.push({**chat_text("late"), "head_delay_ms": 60_000})
    args = run_args(fake, "hi", "--idle-timeout", "0.4", "--retries", "0")
    started = time.monotonic()
    done = mule([*args, "--provider-retries", "0"], env, project)
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 30
    assert "idle timeout" in done.stderr


def test_idle_timeout_defaults_to_120_s_and_rejects_nonsense(
    project: Path, env: dict[str, str]
) -> None:
    """The default is 120 s, 0 is accepted (no timeout), a negative value is a usage error."""
    parse = build_parser().parse_args
    assert parse(["run", "hi", "-m", "a/b"]).idle_timeout == 120.0
    assert parse(["run", "hi", "-m", "a/b", "--idle-timeout", "0"]).idle_timeout == 0.0
    bad = mule(["run", "hi", "-m", "a/b", "--idle-timeout", "-1"], env, project)
    assert bad.returncode == 2
    assert "must be 0 or more seconds" in bad.stderr


# -- URLs are checked before anything connects --------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--base-url", "127.0.0.1:18999", "did you mean 'http://127.0.0.1:18999'"),
        ("--base-url", "ftp://example.com/v1", "is not an http(s) URL"),
        ("--base-url", "http://:80/v1", "is not an http(s) URL with a host"),
        ("--base-url", "http://127.0.0.1:99999/v1", "is not a URL"),
        ("--mcp-url", "localhost:8000/mcp", "did you mean 'http://localhost:8000/mcp'"),
    ],
)
def test_bad_urls_are_usage_errors(
    flag: str, value: str, said: str, project: Path, env: dict[str, str]
) -> None:
    """A URL without a scheme or host exits 2 at once, with the likely fix."""
    done = mule(["run", "hi", "-m", "local/m", flag, value], env, project)
    assert done.returncode == 2
    assert said in done.stderr


# -- --api ------------------------------------------------------------------------------------


def test_api_chooses_the_wire_api_for_a_custom_base_url(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """openai/* speaks Responses by default; `--api openai-completions` talks to a chat server."""
    keyed = {**env, "OPENAI_API_KEY": "sk-test"}
    base = ["run", "hi", "-m", "openai/gpt-4o-mini", "--base-url", fake.base_url, "--tools", ""]
    fake.push(chat_text("over chat completions"))
    done = mule([*base, "--api", "openai-completions"], keyed, project)
    assert done.returncode == 0, done.stderr
    assert "over chat completions" in done.stdout
    assert fake.requests[0]["path"] == "/v1/chat/completions"
    unknown = mule([*base, "--api", "carrier-pigeon"], keyed, project)
    assert unknown.returncode == 2
    assert "openai-completions" in unknown.stderr


# -- --version and missing extras -------------------------------------------------------------


def test_version(project: Path, env: dict[str, str]) -> None:
    """`mule --version` prints the installed distribution's version."""
    done = mule(["--version"], env, project)
    assert done.returncode == 0
    assert done.stdout == f"mule {version('mule')}\n"


@pytest.mark.parametrize(
    ("blocked", "argv", "line"),
    [
        (
            "starlette",
            ["serve"],
            "mule serve needs the 'server' extra: pip install 'mule[server]' (missing: starlette)",
        ),
        (
            "uvicorn",
            ["serve", "--port", "0", "--model", "a/b"],
            "mule serve needs the 'server' extra: pip install 'mule[server]' (missing: uvicorn)",
        ),
        (
            "rich",
            ["run", "hi", "-m", "a/b"],
            "mule run needs the 'cli' extra: pip install 'mule[cli]' (missing: rich)",
        ),
        (
            "rich",
            ["demo"],
            "mule demo needs the 'cli' extra: pip install 'mule[cli]' (missing: rich)",
        ),
        (
            "rich",
            ["models"],
            "mule models needs the 'cli' extra: pip install 'mule[cli]' (missing: rich)",
        ),
        (
            "rich",
            ["journal", "list", "--journal", "x.db"],
            "mule journal needs the 'cli' extra: pip install 'mule[cli]' (missing: rich)",
        ),
    ],
)
def test_a_missing_extra_prints_the_install_line(
    blocked: str, argv: list[str], line: str, project: Path, env: dict[str, str]
) -> None:
    """Without an extra's package, each subcommand names the extra instead of a traceback."""
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from mule.cli import main\n"
        f"raise SystemExit(main({argv!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == f"mule: {line}"


def test_a_404_from_a_custom_server_suggests_api_and_the_suggestion_works(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """Against a chat-only server openai/* gets a 404; the advice names a flag that fixes it.

    Adding exactly the advised `--api openai-completions` makes the same command work.
    """
    keyed = {**env, "OPENAI_API_KEY": "sk-test"}
    base = ["run", "hi", "-m", "openai/gpt-4o-mini", "--base-url", fake.base_url, "--tools", ""]
    fake.push(openai_error(404, "fake: no route POST /v1/responses", type="not_found"))
    failed = mule([*base, "--provider-retries", "0"], keyed, project)
    assert failed.returncode == 1
    lead = "the server at --base-url may not speak openai-responses"
    advice = next((r for r in failed.stderr.splitlines() if r.startswith(lead)), None)
    assert advice is not None, failed.stderr
    flag = advice.split("e.g. ")[1].split()
    fake.push(chat_text("chat works"))
    fixed = mule([*base, "--provider-retries", "0", *flag], keyed, project)
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout == "chat works\n"


def test_a_tool_argument_error_shows_pis_own_text(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """A call missing `path` shows pi-ai 1.6.0's words, the same text the model is sent.

    Pi validates with pi-schema, whose text is `path: missing`.
    """
    fake.push(chat_stream(calls=[tool_call("c1", "read", {})]))
    fake.push(chat_text("Sorry."))
    done = mule(run_args(fake, "read it"), env, project)
    assert done.returncode == 0, done.stderr
    assert '  Validation failed for tool "read":' in done.stderr.splitlines()
    assert "    - path: missing" in done.stderr.splitlines()
    sent = fake.requests[1]["body"]["messages"][-1]["content"]
    assert "  - path: missing" in json.dumps(sent)
