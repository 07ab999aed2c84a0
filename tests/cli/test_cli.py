"""The `mule` command end to end: real subprocesses against the fake OpenAI server."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, openai_error, tool_call
from tests.cli import support as cli_support

pytestmark = pytest.mark.slow


env = cli_support.env
project = cli_support.project
fake = cli_support.fake
mule = cli_support.mule
events = cli_support.events
run_args = cli_support.run_args


# -- demo -------------------------------------------------------------------------------------


def test_demo_reads_the_real_readme(project: Path, env: dict[str, str]) -> None:
    """`mule demo` lists the directory, reads README.md and summarises both, labelled scripted."""
    done = mule(["demo", "--delay-ms", "0"], env, project)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "demo: scripted model, no LLM" in out
    for name in ("README.md", "factory.py", "data/"):
        assert name in out
    assert "Widget Factory" in out
    assert "Builds widgets out of sprockets." in out


def test_demo_without_readme_greps_for_definitions(tmp_path: Path, env: dict[str, str]) -> None:
    """Without a README the demo greps, and its answer quotes the real definitions found."""
    (tmp_path / "engine.py").write_text("class Engine:\n    def start(self):\n        pass\n")
    done = mule(["demo", "--delay-ms", "0", "--json"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = events(done.stdout)
    calls = [e["call"]["name"] for e in lines if e["type"] == "tool_execution_start"]
    assert calls == ["ls", "grep"]
    final = [e for e in lines if e["type"] == "message_end"][-1]["value"]
    answer = final["content"][0]["text"]
    assert "class Engine:" in answer
    assert "engine.py" in answer
    assert lines[-1]["type"] == "run_end"
    assert lines[-1]["outcome"] == "completed"


# -- run against the fake OpenAI server -------------------------------------------------------


def test_run_with_a_tool_call_in_json_mode(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """--json writes one event per line; the real ls result reaches the model's next request."""
    fake.push(
        chat_stream(text="Looking.", calls=[tool_call("call_1", "ls", {"path": "."})], pieces=2)
    )
    fake.push(chat_text("You have a README and a factory.", pieces=3))
    done = mule(run_args(fake, "what is here?", "--json"), env, project)
    assert done.returncode == 0, done.stderr
    lines = events(done.stdout)
    kinds = [e["type"] for e in lines]
    assert kinds[:3] == ["run_start", "turn_start", "model_prompt"]
    assert kinds.count("model_prompt") == 2
    assert "message_update" in kinds
    end = next(e for e in lines if e["type"] == "tool_execution_end")
    assert end["result"]["isError"] is False
    assert end["result"]["content"][0]["text"] == "data/\nfactory.py\nREADME.md"
    assert lines[-1]["outcome"] == "completed"
    second = fake.requests[1]["body"]["messages"]
    assert second[-1]["role"] == "tool"
    assert "factory.py" in json.dumps(second[-1])


def test_live_view_shows_text_tools_and_summary(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """Piped, stdout holds the answer; stderr has thinking, the tool call and result, a summary."""
    fake.push(
        chat_stream(
            reasoning="I should read it.",
            calls=[tool_call("call_1", "read", {"path": "README.md"})],
        )
    )
    fake.push(chat_text("It builds widgets."))
    done = mule(run_args(fake, "what is this?"), env, project)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It builds widgets.\n"
    err = done.stderr
    assert "I should read it." in err
    assert "read README.md" in err
    assert "# Widget Factory" in err
    assert "2 turns" in err


def test_retry_after_a_500_is_visible_then_succeeds(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """A 500 shows the error and "retrying in"; the retried attempt completes the run."""
    fake.push(openai_error(500, "Internal server error", type="server_error"))
    fake.push(chat_text("Recovered."))
    args = run_args(fake, "hi", "--provider-retries", "0", "--retry-base-ms", "20")
    done = mule(args, env, project)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Recovered.\n"
    assert '500: {"message":"Internal server error"' in done.stderr
    assert "retrying in 20 ms (retry 1 of 3)" in done.stderr
    assert len(fake.requests) == 2


def test_retry_in_json_mode_is_an_error_end_then_the_next_prompt(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """The event stream shows the failed attempt's message_end(error), then model_prompt(2)."""
    fake.push(openai_error(503, "Service Unavailable", type="server_error"))
    fake.push(chat_text("ok"))
    args = run_args(fake, "hi", "--provider-retries", "0", "--retry-base-ms", "1", "--json")
    lines = events(mule(args, env, project).stdout)
    trail = [
        (e["type"], e.get("attempt"), e.get("value", {}).get("stopReason"))
        for e in lines
        if e["type"] in ("model_prompt", "message_end")
    ]
    assert trail == [
        ("model_prompt", 1, None),
        ("message_end", None, "error"),
        ("model_prompt", 2, None),
        ("message_end", None, "stop"),
    ]


def test_a_non_retryable_failure_exits_1_with_phase_and_message(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """A 400 is not retried: exit code 1, and stderr names the phase and the message."""
    fake.push(openai_error(400, "Bad request: unknown parameter"))
    done = mule(run_args(fake, "hi", "--provider-retries", "0"), env, project)
    assert done.returncode == 1
    assert "run failed (model)" in done.stderr
    assert "unknown parameter" in done.stderr
    assert len(fake.requests) == 1


def test_bash_declined_on_stdin_gives_the_model_an_error_result(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """Answering "n" to the confirmation: the command does not run, the model sees is_error."""
    fake.push(chat_stream(calls=[tool_call("call_1", "bash", {"command": "touch ran.txt"})]))
    fake.push(chat_text("Understood."))
    done = mule(run_args(fake, "make a file", "--json"), env, project, stdin="n\n")
    assert done.returncode == 0, done.stderr
    assert "touch ran.txt" in done.stderr
    assert "Run it? [y/N]" in done.stderr
    end = next(e for e in events(done.stdout) if e["type"] == "tool_execution_end")
    assert end["result"]["isError"] is True
    assert "declined" in end["result"]["content"][0]["text"]
    assert not (project / "ran.txt").exists()


def test_bash_with_yes_runs_without_asking(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """--yes skips the confirmation; the command's output reaches the model."""
    fake.push(chat_stream(calls=[tool_call("call_1", "bash", {"command": "echo made > f.txt"})]))
    fake.push(chat_text("Done."))
    done = mule(run_args(fake, "make a file", "--json", "--yes"), env, project)
    assert done.returncode == 0, done.stderr
    assert (project / "f.txt").read_text() == "made\n"
    assert "Run it?" not in done.stderr


def test_ctrl_c_mid_stream_cancels_with_130_and_run_end(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """SIGINT while the model stalls: exit 130, the last line is run_end(cancelled)."""
    fake.push(chat_stream(text="Partial answer that never", pieces=3, then="stall"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mule.cli", *run_args(fake, "hi", "--json")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=project,
    )
    try:
        assert proc.stdout is not None
        seen: list[dict[str, Any]] = []
        for line in proc.stdout:
            seen.append(json.loads(line))
            if seen[-1]["type"] == "message_update":
                break
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seen.extend(events(rest))
    assert proc.returncode == 130, err
    assert seen[-1]["type"] == "run_end"
    assert seen[-1]["outcome"] == "cancelled"
    assert "message_end" not in [e["type"] for e in seen]
    assert "cancelled" in err


def test_models_json_custom_provider_is_honoured(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """A provider defined in Pi's models.json is usable by name, with its apiKey sent."""
    config = {
        "providers": {
            "mine": {
                "baseUrl": fake.base_url,
                "api": "openai-completions",
                "apiKey": "sk-from-models-json",
                "models": [{"id": "house-model"}],
            }
        }
    }
    Path(env["PI_CODING_AGENT_DIR"], "models.json").write_text(json.dumps(config))
    fake.push(chat_text("hello from the house model"))
    done = mule(["run", "hi", "--model", "mine/house-model", "--tools", ""], env, project)
    assert done.returncode == 0, done.stderr
    assert "hello from the house model" in done.stdout
    assert fake.requests[0]["headers"]["authorization"] == "Bearer sk-from-models-json"
    assert "tools" not in fake.requests[0]["body"]
    listed = mule(["models", "--provider", "mine"], env, project)
    assert "mine/house-model" in listed.stdout


# -- setup errors and `mule models` -----------------------------------------------------------


def test_setup_errors_exit_2(project: Path, env: dict[str, str]) -> None:
    """Unknown providers, a missing key and journal flags without support are usage errors."""
    unknown = mule(["run", "hi", "--model", "nosuch/model"], env, project)
    assert unknown.returncode == 2
    assert "--base-url" in unknown.stderr
    no_key = mule(["run", "hi", "--model", "openai/gpt-4o"], env, project)
    assert no_key.returncode == 2
    assert "OPENAI_API_KEY" in no_key.stderr


def test_models_lists_the_registry(project: Path, env: dict[str, str]) -> None:
    """`mule models --provider anthropic` prints its models; an unknown provider exits 2."""
    done = mule(["models", "--provider", "anthropic"], env, project)
    assert done.returncode == 0, done.stderr
    assert "anthropic/claude-sonnet-4-5" in done.stdout
    assert "openai/" not in done.stdout
    bad = mule(["models", "--provider", "nosuch"], env, project)
    assert bad.returncode == 2


# -- journal ----------------------------------------------------------------------------------


def _cancel_when(proc: subprocess.Popen[str], ready: Callable[[dict[str, Any]], bool]) -> str:
    """Read JSON lines until `ready(event)`, send SIGINT, and return stderr after exit."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if ready(json.loads(line)):
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    return err


def _popen(args: Sequence[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mule.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=cwd,
    )


def resume_args(fake: FakeOpenAI, db: str, run_id: str, *extra: str) -> list[str]:
    journal = ("--journal", db, "--resume", run_id)
    return ["run", "--model", "local/gpt-fake", "--base-url", fake.base_url, *extra, *journal]


def _run_id(stderr: str) -> str:
    match = re.search(r"journal: recording run (\w+)", stderr)
    assert match is not None, stderr
    return match.group(1)


def test_cancelled_run_resumes_from_the_journal_without_rerunning_tools(
    fake: FakeOpenAI, project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """Ctrl-C during the second model call, then --resume: the bash result is reused, not rerun."""
    db = str(tmp_path / "runs.db")
    fake.push(chat_stream(calls=[tool_call("call_1", "bash", {"command": "echo x >> log.txt"})]))
    fake.push(chat_stream(text="Partial", then="stall"))
    prompts = 0

    def second_stream(event: dict[str, Any]) -> bool:
        nonlocal prompts
        prompts += event["type"] == "model_prompt"
        return bool(prompts == 2 and event["type"] == "message_update")

    proc = _popen([*run_args(fake, "log it", "--json", "--yes", "--journal", db)], env, project)
    err = _cancel_when(proc, second_stream)
    assert proc.returncode == 130, err
    run_id = _run_id(err)
    assert f"--resume {run_id}" in err
    listed = mule(["journal", "list", "--journal", db], env, project)
    assert run_id in listed.stdout
    assert "cancelled" in listed.stdout

    fake.push(chat_text("Logged."))
    resumed = mule(
        resume_args(fake, db, run_id, "--yes"),
        env,
        project,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "Logged." in resumed.stdout
    assert (project / "log.txt").read_text() == "x\n"
    sent = fake.requests[-1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    shown = mule(["journal", "show", run_id, "--journal", db], env, project)
    assert "completed" in shown.stdout
    assert "Logged." in shown.stdout
    again = mule(
        resume_args(fake, db, run_id),
        env,
        project,
    )
    assert again.returncode == 2
    assert "already completed" in again.stderr


def test_a_command_cut_by_ctrl_c_is_never_replayed_on_resume(
    fake: FakeOpenAI, project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """Bash is replay-unsafe: after Ctrl-C mid-command, resume reports it interrupted instead."""
    db = str(tmp_path / "runs.db")
    command = "echo started >> count.txt; sleep 30"
    fake.push(chat_stream(calls=[tool_call("call_1", "bash", {"command": command})]))
    proc = _popen([*run_args(fake, "go", "--json", "--yes", "--journal", db)], env, project)
    marker = project / "count.txt"

    def started(event: dict[str, Any]) -> bool:
        if event["type"] != "tool_execution_start":
            return False
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return True

    err = _cancel_when(proc, started)
    assert proc.returncode == 130, err
    run_id = _run_id(err)
    shown = mule(["journal", "show", run_id, "--journal", db], env, project)
    assert "started, unsafe to replay" in shown.stdout

    fake.push(chat_text("I see it was interrupted."))
    resumed = mule(
        resume_args(fake, db, run_id, "--yes", "--json"),
        env,
        project,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert marker.read_text() == "started\n"
    kinds = [e["type"] for e in events(resumed.stdout)]
    assert "tool_execution_start" not in kinds
    tool_msg = fake.requests[-1]["body"]["messages"][-1]
    assert tool_msg["role"] == "tool"
    assert "not safe to replay" in json.dumps(tool_msg)


def test_journal_usage_errors(project: Path, env: dict[str, str], tmp_path: Path) -> None:
    """--resume needs --journal and no prompt; unknown runs and journals are reported."""
    base = ["run", "--model", "x/y", "--base-url", "http://127.0.0.1:9/v1"]
    assert "--resume needs --journal" in mule([*base, "--resume", "r1"], env, project).stderr
    db = str(tmp_path / "runs.db")
    with_prompt = mule([*base, "hi", "--journal", db, "--resume", "r1"], env, project)
    assert with_prompt.returncode == 2
    assert "leave out the prompt" in with_prompt.stderr
    unknown = mule([*base, "--journal", db, "--resume", "nosuch"], env, project)
    assert unknown.returncode == 2
    assert "no run 'nosuch'" in unknown.stderr
    missing = mule(["journal", "list", "--journal", str(tmp_path / "none.db")], env, project)
    assert missing.returncode == 2
