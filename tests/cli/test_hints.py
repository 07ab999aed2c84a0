"""Every hint `mule` prints runs as printed; tables fit 80 columns without cutting ids.

Private rules tested here: the table layout `mule.cli._columns.columns`, the listings
`mule.cli._journal.print_runs` and `mule.cli._models.models_lines` (with `load_registry` and
`human_tokens`), and the saved settings `mule.cli._settings.settings_of`: what a hint or a table
prints, checked without a terminal.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mule.cli import build_parser
from mule.cli._columns import columns
from mule.cli._journal import print_runs
from mule.cli._models import human_tokens, load_registry, models_lines
from mule.cli._settings import settings_of
from mule.journal import Journal
from mule.pi import UserMessage
from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, tool_call
from tests.cli import support as cli_support

env = cli_support.env
project = cli_support.project
fake = cli_support.fake
mule = cli_support.mule
events = cli_support.events
run_args = cli_support.run_args


def run_hint(hint: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a printed `mule ...` command line literally (the installed `mule` is this module)."""
    argv = shlex.split(hint)
    assert argv[0] == "mule", hint
    return mule(argv[1:], env, cwd)


def _hint(stderr: str, lead: str) -> str:
    found = re.search(rf"^{re.escape(lead)}(.+)$", stderr, re.MULTILINE)
    assert found is not None, stderr
    return found.group(1).strip()


# -- tables ------------------------------------------------------------------------------------


def test_human_token_sizes() -> None:
    """Sizes read as people say them: no `8.192K` or `1047.58K`."""
    sizes = [4095, 8192, 16385, 131072, 200000, 1047576, 1048576, 2000000]
    assert [human_tokens(n) for n in sizes] == [
        "4.1K", "8K", "16.4K", "128K", "200K", "1.0M", "1M", "2M"
    ]  # fmt: skip


def test_columns_keep_ids_whole_and_never_pad() -> None:
    """A row too wide for the width puts its id on a line of its own; no line ends in spaces."""
    lines = columns(["id", "n"], [["short", "1"], ["x" * 30, "2"]], width=20, right=[False, True])
    assert lines == ["id     n", "short  1", "x" * 30, "       2"]


@pytest.mark.parametrize("width", [80, 200])
def test_models_fit_the_terminal_with_every_id_whole(width: int) -> None:
    """On a terminal, `mule models` fits its width; every model id is there in full."""
    registry = load_registry({}).unwrap()
    lines = models_lines(registry, width=width, environ={})
    assert max(len(line) for line in lines) <= width
    ids = {line.split()[0] for line in lines if line.startswith("  ") and line.strip()}
    assert {m.id for m in registry.models} <= ids


def test_models_piped_is_one_full_line_per_model(project: Path, env: dict[str, str]) -> None:
    """Piped, each line starts with the `--model` value and has every column filled in."""
    done = mule(["models", "--provider", "anthropic"], env, project)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == [
        "provider/id", "api", "context", "max", "out", "thinking", "images", "$", "in", "$",
        "out", "key",
    ]  # fmt: skip
    row = next(line for line in lines if line.startswith("anthropic/claude-sonnet-4-5 "))
    assert row.split()[1:4] == ["anthropic-messages", "200K", "64K"]
    assert all(line == line.rstrip() for line in lines)


def test_journal_list_fits_80_columns_with_whole_ids(tmp_path: Path) -> None:
    """Run ids (what --resume takes) are printed whole, at 80 columns."""
    with Journal(tmp_path / "runs.db") as journal:
        for run_id in ("0123456789ab", "ba9876543210"):
            journal.begin(run_id, (UserMessage("hi", 0),))
        out = io.StringIO()
        print_runs(Console(file=out, width=80, force_terminal=True), journal)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[2].startswith("0123456789ab  running")
    assert lines[3].startswith("ba9876543210  running")


# -- hints ---------------------------------------------------------------------------------------


def _cancel_after_first_tool(
    args: list[str], env: dict[str, str], cwd: Path
) -> tuple[int, str, list[dict[str, Any]]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mule.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=cwd,
    )
    seen: list[dict[str, Any]] = []
    try:
        assert proc.stdout is not None
        prompts = 0
        for line in proc.stdout:
            seen.extend(events(line))
            prompts += seen[-1]["type"] == "model_prompt"
            if prompts == 2 and seen[-1]["type"] == "message_update":
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err, seen


@pytest.mark.slow
def test_the_resume_hint_runs_as_printed_with_the_runs_settings(
    fake: FakeOpenAI, project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """Cancelled mid-run, the printed `resume with:` line alone continues it.

    Same server, model, tools, system prompt and options; `journal list` then shows it completed.
    """
    db = tmp_path / "my runs.db"  # a space: the hint must quote it
    fake.push(chat_stream(calls=[tool_call("c1", "ls", {"path": "."})]))
    fake.push(chat_stream(text="Partial", then="stall"))
    args = run_args(
        fake, "look", "--json", "--journal", str(db), "--tools", "ls,read", "--system", "Be brief."
    )
    code, err, _ = _cancel_after_first_tool([*args, "--thinking", "low"], env, project)
    assert code == 130, err
    hint = _hint(err, "resume with: ")
    assert "--model" not in hint
    fake.push(chat_text("Done looking."))
    resumed = run_hint(hint, env, tmp_path)  # from another directory: cwd is kept too
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "Done looking.\n"
    body = fake.requests[-1]["body"]
    assert body["model"] == "gpt-fake"
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [t["function"]["name"] for t in body["tools"]] == ["ls", "read"]
    run_id = hint.split("--resume ")[1].split()[0]
    with Journal(db) as journal:
        kept = json.loads(journal.meta(run_id)["cli.settings"])
    assert kept["thinking"] == "low"
    assert kept["cwd"] == str(project)
    assert not [k for k in kept if "key" in k.lower()]
    listed = mule(["journal", "list", "--journal", str(db)], env, project)
    row = next(line for line in listed.stdout.splitlines() if line.startswith(run_id))
    assert row.split()[1] == "completed"
    assert row.split()[-1] == "local/gpt-fake"
    shown = mule(["journal", "show", run_id[:5], "--journal", str(db)], env, project)
    assert shown.returncode == 0, shown.stderr
    assert "Done looking." in shown.stdout
    settings = f"settings: --model local/gpt-fake --base-url {fake.base_url} --cwd {project}"
    assert f"{settings} --tools ls,read" in shown.stdout.splitlines()


@pytest.mark.slow
def test_resume_by_unique_prefix_and_options_given_win(
    fake: FakeOpenAI, project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """`--resume` takes a unique prefix; an option given when resuming replaces the stored one."""
    db = str(tmp_path / "runs.db")
    fake.push(chat_stream(calls=[tool_call("c1", "ls", {"path": "."})]))
    fake.push(chat_stream(text="Partial", then="stall"))
    code, err, _ = _cancel_after_first_tool(
        run_args(fake, "look", "--json", "--journal", db, "--tools", "ls"), env, project
    )
    assert code == 130, err
    run_id = _hint(err, "resume with: ").split("--resume ")[1].split()[0]
    fake.push(chat_text("ok"))
    again = ["run", "--journal", db, "--resume", run_id[:4], "--tools", "ls,grep"]
    resumed = mule(again, env, project)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming run {run_id}" in resumed.stderr
    assert [t["function"]["name"] for t in fake.requests[-1]["body"]["tools"]] == ["ls", "grep"]


@pytest.mark.slow
def test_the_models_hint_runs_as_printed(project: Path, env: dict[str, str]) -> None:
    """`provider has no model` names a `mule models --provider` command that works."""
    done = mule(["run", "hi", "-m", "anthropic/no-such-model"], env, project)
    assert done.returncode == 2
    hint = _hint(done.stderr, "").split("(see `")[1].split("`")[0]
    listed = run_hint(hint, env, project)
    assert listed.returncode == 0, listed.stderr
    assert "anthropic/claude-sonnet-4-5" in listed.stdout


def test_settings_never_keep_a_password() -> None:
    """A password in --base-url or --mcp-url is not written to the journal; the user name is."""
    args = build_parser().parse_args(
        [
            "run",
            "hi",
            "-m",
            "local/m",
            "--base-url",
            "http://me:s3cret@127.0.0.1:8080/v1",
            "--mcp-url",
            "https://bot:t0ken@example.com/mcp?x=1",
        ]
    )
    kept = json.dumps(settings_of(args))
    assert "s3cret" not in kept
    assert "t0ken" not in kept
    assert settings_of(args)["base_url"] == "http://me@127.0.0.1:8080/v1"
    assert settings_of(args)["mcp_url"] == ["https://bot@example.com/mcp?x=1"]
