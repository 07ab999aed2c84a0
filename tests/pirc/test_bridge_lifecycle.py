"""The bridge's own lifecycle: pi that cannot start, and cancels or deadlines around the block.

Fake pi (tests/pirc/fake_pi.py) and the real pi CLI, on asyncio and trio.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mule.pirc import Bridge, BridgeConfig, ExtensionUIRequest, ProcessExited
from mule.testing.fake_openai import FakeOpenAI, chat_text
from tests.pirc.helpers import (
    HERE,
    PI,
    PI_CURRENT,
    PI_SCRIPT,
    assert_reaped,
    config,
    make_home,
)
from tests.pirc.old_node import OLD_NODE


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.pi
@pytest.mark.skipif(
    not OLD_NODE or not os.path.exists(PI_CURRENT), reason="no Node older than 22.19 or no pi"
)
@pytest.mark.parametrize("attempt", range(8))
async def test_pi_160_on_an_old_node_reports_its_exit_and_stderr(
    tmp_path: Path, attempt: int
) -> None:
    """Pi 1.6.0 exits 1 at once on Node 20: the first command says so, with its stderr.

    The write may find pi's stdin open or already closed (a race, once in eight runs before):
    either way the error is pi's exit, never "cannot write to pi".
    """
    assert OLD_NODE is not None
    dirs = make_home(tmp_path, "http://127.0.0.1:9/v1")
    env = {"PATH": str(Path(OLD_NODE).parent)}
    cfg = config(dirs, executable=PI_SCRIPT, env=env, inherit_env=False)
    with anyio.fail_after(60):
        async with Bridge(cfg) as b:
            with pytest.raises(ProcessExited) as info:
                await b.prompt("hi")
    assert "cannot write" not in str(info.value)
    assert "enableCompileCache" in str(info.value)
    assert info.value.returncode == 1
    assert b.returncode == 1
    assert_reaped(b.pid)


# -- one lifecycle: `async with Bridge(...)`, cancels and deadlines around it (issue 28.6) --------

FAKE = str(HERE / "fake_pi.py")


def fake_cfg(scenario: str, **kw: Any) -> BridgeConfig:
    base: dict[str, Any] = {
        "provider": "local",
        "model": "fake",
        "executable": FAKE,
        "env": {"FAKE_PI_SCENARIO": scenario},
        "command_timeout": 10.0,
        "stop_grace": 5.0,
        "abort_grace": 1.0,
    }
    base.update(kw)
    return BridgeConfig(**base)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Return the process and shutdown warnings (the decoder's are another matter)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mule.pirc" and r.levelno >= logging.WARNING
        if r.module in ("_bridge", "_process")
    ]


def test_the_only_way_in_is_async_with() -> None:
    """No public method enters or leaves a task group for the caller."""
    assert not hasattr(Bridge, "start")
    assert not hasattr(Bridge, "aclose")


@pytest.mark.anyio
async def test_a_bridge_is_entered_once() -> None:
    """Entering a used bridge again is a RuntimeError, not a second pi."""
    b = Bridge(fake_cfg("ok"))
    async with b:
        with pytest.raises(RuntimeError, match="entered once"):
            await b.__aenter__()
    with pytest.raises(RuntimeError, match="entered once"):
        async with b:
            pass
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_a_cancel_around_the_block_ends_pi_at_once_without_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A cancel scope around `async with` cancelled inside it: pi gets EOF and exits 0.

    The bridge's readers are not cancelled with the caller, so `stop()` sees pi exit and goes
    no further (no SIGTERM, no "ignored SIGTERM"), and the cancel still ends the block.
    """
    caplog.set_level(logging.INFO, "mule.pirc")
    with anyio.fail_after(60), anyio.CancelScope() as scope:
        async with Bridge(fake_cfg("ok")) as b:
            await b.get_state()  # pi is up
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert b.returncode == 0
    assert warnings_of(caplog) == []
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_a_deadline_around_the_block_ends_a_running_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A deadline passing while a job waits on a dialog: the job is aborted, pi exits 0."""
    caplog.set_level(logging.INFO, "mule.pirc")
    with anyio.fail_after(60), anyio.move_on_after(60) as scope:
        async with Bridge(fake_cfg("ui")) as b:
            with b.subscribe() as sub:
                job = await b.prompt("ask")
                async for ev in sub:
                    if isinstance(ev, ExtensionUIRequest):
                        break
            scope.deadline = anyio.current_time() + 0.1  # the deadline passes in the wait
            await job.wait()
    assert scope.cancelled_caught
    assert job.done.is_set()
    assert b.returncode == 0
    assert warnings_of(caplog) == []
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_a_cancel_in_a_task_group_beside_the_bridge(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The bridge in one task of a group whose sibling fails: pi is stopped cleanly too."""
    caplog.set_level(logging.INFO, "mule.pirc")
    up = anyio.Event()
    bridges: list[Bridge] = []

    async def use_bridge() -> None:
        async with Bridge(fake_cfg("ok")) as b:
            bridges.append(b)
            await b.get_state()
            up.set()
            await anyio.sleep_forever()

    async def fail_once_up() -> None:
        await up.wait()
        raise LookupError("sibling failed")

    with anyio.fail_after(60), pytest.RaisesGroup(LookupError):
        async with anyio.create_task_group() as tg:
            tg.start_soon(use_bridge)
            tg.start_soon(fail_once_up)
    (b,) = bridges
    assert b.returncode == 0
    assert warnings_of(caplog) == []
    assert_reaped(b.pid)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.pi
@pytest.mark.parametrize(
    "pi",
    [
        pytest.param(p, id=name, marks=pytest.mark.skipif(not os.path.exists(p), reason="no pi"))
        for p, name in ((PI, "pi-0.73.1"), (PI_CURRENT, "pi-1.6.0"))
    ],
)
async def test_a_deadline_around_the_block_ends_the_real_pi_without_warnings(
    fake: FakeOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture, pi: str
) -> None:
    """The real pi streaming an answer when the caller's deadline passes: aborted, exit 0."""
    caplog.set_level(logging.INFO, "mule.pirc")
    fake.reset()
    fake.push(chat_text("z" * 400, pieces=400, delay_ms=20))
    dirs = make_home(tmp_path, fake.base_url)
    with anyio.fail_after(90), anyio.move_on_after(90) as scope:
        async with Bridge(config(dirs, executable=pi)) as b:
            job = await b.prompt("ramble")
            for _ in range(1200):  # a bounded poll: the model is streaming once it was asked
                if fake.requests:
                    break
                await anyio.sleep(0.05)
            assert fake.requests
            scope.deadline = anyio.current_time() + 0.2
            await job.wait()
    assert scope.cancelled_caught
    assert job.done.is_set()
    assert b.returncode == 0
    assert warnings_of(caplog) == []
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_the_blocks_own_exception_comes_out_as_it_is() -> None:
    """An exception raised in the block is not wrapped in an ExceptionGroup; pi still stops."""
    b = Bridge(fake_cfg("ok"))

    async def use() -> None:
        async with b:
            await b.get_state()
            raise ProcessExited("mine")

    with pytest.raises(ProcessExited, match="mine"):
        await use()
    assert b.returncode == 0
    assert_reaped(b.pid)
