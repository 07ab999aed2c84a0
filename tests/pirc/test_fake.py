"""The bridge against a fake pi that misbehaves; no zombie is ever left behind.

Bad and huge lines, id-less responses, early exit, a process that ignores SIGTERM, unanswered
dialogs.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from mule.effects import MessageUpdate, RunEnd
from mule.pirc import (
    Bridge,
    BridgeConfig,
    BridgeEvent,
    CommandFailed,
    CommandTimeout,
    ExtensionUIRequest,
    JobTimeout,
    OtherPiEvent,
    ProcessExited,
)
from tests.pirc.helpers import assert_reaped

FAKE = str(Path(__file__).parent / "fake_pi.py")


def cfg(scenario: str, **kw: Any) -> BridgeConfig:
    env = {"FAKE_PI_SCENARIO": scenario, "FAKE_PI_HUGE": "5000"}
    base: dict[str, Any] = {
        "provider": "local",
        "model": "fake",
        "executable": FAKE,
        "api_key_env": "MULE_TEST_PI_KEY",
        "api_key": "sk-secret",
        "env": env,
        "max_line_bytes": 4096,
        "command_timeout": 5.0,
        "stop_grace": 1.0,
    }
    base.update(kw)
    return BridgeConfig(**base)


@pytest.mark.anyio
async def test_faulty_lines_are_skipped_and_the_job_still_completes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Bad, huge and non-object lines are counted and skipped; U+2028 text arrives intact."""
    seen: list[BridgeEvent] = []
    with caplog.at_level(logging.WARNING, logger="mule.pirc"):
        async with Bridge(cfg("faults")) as b:
            result = await b.run("go", on_event=seen.append)
            stats = b.stats
            pid = b.pid
    assert result.outcome == "completed"
    assert result.text == "line\u2028sep\u2029end"
    assert stats.frames.oversize_lines == 1
    assert stats.frames.bad_lines == 2
    assert stats.unmatched_responses == 2
    assert isinstance(seen[-1], RunEnd)
    assert any(isinstance(e, MessageUpdate) for e in seen)
    assert "skipped a 5034-byte line" in caplog.text
    assert_reaped(pid)


@pytest.mark.anyio
async def test_argv_and_env_carry_config_but_never_the_key() -> None:
    """The key travels only in the child's env; PI_OFFLINE and loopback NO_PROXY are set."""
    config = cfg("ok", tools=("ls", "read"), extensions=("/x/ext.ts",), thinking="low")
    async with Bridge(config) as b:
        state = await b.get_state()
    argv = state["argv"]
    assert "sk-secret" not in " ".join(argv)
    assert argv[1:] == config.argv()[1:]
    for flag in ("--mode", "rpc", "--no-session", "--tools", "ls,read", "-e", "--thinking"):
        assert flag in argv
    assert state["keySet"] is True
    assert state["offline"] == "1"
    assert "127.0.0.1" in state["noProxy"]
    assert "sk-secret" not in repr(config)


@pytest.mark.anyio
async def test_id_less_response_matched_by_command() -> None:
    """Pi answers unknown commands without an id; the bridge matches them by command name."""
    async with Bridge(cfg("ok")) as b:
        with pytest.raises(CommandFailed, match="Unknown command: mystery") as info:
            await b.command("mystery")
        assert info.value.error == "Unknown command: mystery"
        with pytest.raises(CommandFailed, match="Model not found"):
            await b.set_model("x", "y")
        msgs = await b.get_messages()
    assert type(msgs[0]).__name__ == "AssistantMessage"
    assert msgs[1] == {"role": "custom", "customType": "c"}


@pytest.mark.anyio
async def test_early_exit_is_a_typed_failure_with_stderr() -> None:
    """Pi exiting at once: commands raise ProcessExited with the code and stderr tail."""
    b = Bridge(cfg("exit"))
    async with b:
        with pytest.raises(ProcessExited, match="scripted early exit") as info:
            await b.get_state()
        assert info.value.returncode == 3
        with pytest.raises(ProcessExited):
            await b.get_state()
    assert b.returncode == 3
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_a_write_racing_pis_exit_reports_the_exit_not_the_broken_pipe() -> None:
    """A write that finds pi's stdin closed reports pi's exit, not "cannot write to pi".

    pi closed its stdin and is exiting (a Node it cannot run on): ProcessExited carries pi's exit
    code and stderr.
    """
    b = Bridge(cfg("nostart"))
    async with b:
        for _ in range(3000):  # a bounded poll: stdin is closed once stderr has spoken
            if b.stats.stderr_lines:
                break
            await anyio.sleep(0.01)
        assert b.stats.stderr_lines
        with pytest.raises(ProcessExited) as info:
            await b.prompt("hi")
        assert "cannot write" not in str(info.value)
        assert "enableCompileCache" in str(info.value)
        assert info.value.returncode == 1
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_missing_executable_is_process_exited() -> None:
    """A pi that cannot be started raises ProcessExited from start()."""
    with pytest.raises(ProcessExited, match="could not start pi"):
        async with Bridge(cfg("ok", executable="/nonexistent/pi")):
            pass


@pytest.mark.anyio
async def test_hung_pi_times_out_then_is_killed_and_reaped() -> None:
    """No answer → CommandTimeout; stop() escalates past an ignored SIGTERM to SIGKILL."""
    b = Bridge(cfg("hang", stop_grace=0.3))
    async with b:
        # Under load the fake may start slower than the timeouts below; let it ignore SIGTERM first.
        for _ in range(3000):  # a bounded poll: no event tells when a stderr line arrived
            if b.stats.stderr_lines:
                break
            await anyio.sleep(0.01)
        with pytest.raises(CommandTimeout):
            await b.command("get_state", time_limit=0.3)
    assert b.returncode == -9
    assert_reaped(b.pid)


def slow_start(delay: float, **kw: Any) -> BridgeConfig:
    base = cfg("ok", command_timeout=0.3, **kw)
    return attrs.evolve(base, env={**base.env, "FAKE_PI_START_DELAY": str(delay)})


@pytest.mark.anyio
async def test_a_slow_start_is_bounded_by_start_timeout_not_command_timeout() -> None:
    """A pi booting for longer than command_timeout: the first prompt waits (start_timeout)."""
    async with Bridge(slow_start(1.0, start_timeout=30)) as b:
        result = await b.run("go")
        assert result.outcome == "completed"
        with anyio.fail_after(5):  # up now: a default command is bounded by command_timeout again
            assert isinstance(await b.command("get_state"), dict)


@pytest.mark.anyio
async def test_start_timeout_bounds_a_pi_that_never_comes_up() -> None:
    """Past start_timeout the first command times out (typed), and soon."""
    async with Bridge(slow_start(30.0, start_timeout=0.8)) as b:
        t0 = anyio.current_time()
        with pytest.raises(CommandTimeout) as info:
            await b.command("get_state")
        waited = anyio.current_time() - t0
        assert 0.3 < waited < 5, waited  # the start bound (0.8 s from spawn), not command_timeout
        assert info.value.timeout <= 0.8


@pytest.mark.anyio
async def test_an_explicit_time_limit_is_kept_while_pi_starts() -> None:
    """A caller's own time_limit is its bound even before pi is up."""
    async with Bridge(slow_start(3.0, start_timeout=30)) as b:
        t0 = anyio.current_time()
        with pytest.raises(CommandTimeout):
            await b.command("get_state", time_limit=0.3)
        assert anyio.current_time() - t0 < 2.5


@pytest.mark.anyio
async def test_job_timeout_aborts_and_tears_down() -> None:
    """A job past its time limit raises JobTimeout and the child is gone."""
    b = Bridge(cfg("hang", stop_grace=0.2, abort_grace=0.2))
    async with b:
        with pytest.raises(JobTimeout):
            await b.run("go", time_limit=0.5)
        assert b.process_done.is_set()
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_cancelling_a_run_tears_down_and_reaps() -> None:
    """Cancelling the caller's scope stops pi; no zombie remains."""
    b = Bridge(cfg("ui", ui_timeout=None, abort_grace=0.3))
    async with b:
        with anyio.move_on_after(0.5) as scope:
            await b.run("go")
        assert scope.cancelled_caught
        assert b.process_done.is_set()
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_ui_dialog_answered() -> None:
    """An extension_ui_request reaches the stream; respond_ui writes the answer."""
    answers: list[Any] = []
    async with Bridge(cfg("ui")) as b:

        async def on_event(ev: BridgeEvent) -> None:
            if isinstance(ev, ExtensionUIRequest):
                assert ev.expects_answer
                await b.respond_ui(ev.id, confirmed=True)
            if isinstance(ev, OtherPiEvent):
                answers.append(ev.data["answer"])

        result = await b.run("go", on_event=on_event)
    assert result.outcome == "completed"
    assert answers == [{"type": "extension_ui_response", "id": "dlg-1", "confirmed": True}]


@pytest.mark.anyio
async def test_unanswered_ui_dialog_is_cancelled_by_the_bridge() -> None:
    """Nobody answers: after ui_timeout the bridge sends cancelled:true."""
    answers: list[Any] = []

    def on_event(ev: BridgeEvent) -> None:
        if isinstance(ev, OtherPiEvent):
            answers.append(ev.data["answer"])

    async with Bridge(cfg("ui", ui_timeout=0.2)) as b:
        await b.run("go", on_event=on_event)
        assert b.stats.ui_timeouts == 1
    assert answers == [{"type": "extension_ui_response", "id": "dlg-1", "cancelled": True}]


def test_respond_ui_needs_exactly_one_answer() -> None:
    """value= and confirmed= are exclusive."""
    b = Bridge(cfg("ok"))
    with pytest.raises(ValueError, match="exactly one"):
        anyio.run(lambda: b.respond_ui("x"))


def test_fake_is_executable() -> None:
    """The fake pi runs as a script (its shebang finds python3)."""
    assert os.access(FAKE, os.X_OK)
    assert sys.executable
