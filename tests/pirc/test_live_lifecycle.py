"""The job contract and dialog-aware waits against the REAL pi (issue 13 items 1 and 2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mule.effects import MessageUpdate, RunEnd
from mule.pirc import Bridge, BridgeEvent, ExtensionUIRequest
from mule.testing.fake_openai import FakeOpenAI, chat_text, openai_error
from tests.pirc.helpers import HERE, assert_reaped, both_pis, config, make_home, pi_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.pi,
    pytest.mark.skipif(not pi_available(), reason="pi CLI not installed"),
]

EXT = str(HERE / "ui_ext.ts")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.mark.anyio
@pytest.mark.parametrize("pi", both_pis())
async def test_abort_then_prompt_gets_the_new_answer(
    fake: FakeOpenAI, tmp_path: Path, pi: str
) -> None:
    """`await b.abort(); await b.run("Try again")` returns the new answer, not the aborted one."""
    fake.reset()
    dirs = make_home(tmp_path, fake.base_url)
    with anyio.fail_after(60):
        async with Bridge(config(dirs, executable=pi)) as b:
            fake.push(chat_text("z" * 400, pieces=200, delay_ms=20), chat_text("fresh answer"))
            with b.subscribe() as sub:
                first = await b.prompt("ramble")
                async for ev in sub:
                    if isinstance(ev, MessageUpdate):
                        break
            await b.abort()
            assert first.done.is_set()
            assert first.outcome().outcome == "cancelled"
            r = await b.run("Try again")
            assert (r.outcome, r.text) == ("completed", "fresh answer")
            assert r.run != first.run
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_a_dialog_slower_than_command_timeout(fake: FakeOpenAI, tmp_path: Path) -> None:
    """A /command whose dialog is answered after command_timeout still succeeds."""
    fake.reset()
    dirs = make_home(tmp_path, fake.base_url)
    cfg = config(dirs, extensions=(EXT,), command_timeout=1.0)
    notes: list[str] = []
    with anyio.fail_after(60):
        async with Bridge(cfg) as b:
            await b.command("get_state", time_limit=30)  # pi has started (cold start ~2 s)
            with b.subscribe() as sub:
                async with anyio.create_task_group() as tg:

                    async def person() -> None:
                        async for ev in sub:
                            if isinstance(ev, ExtensionUIRequest) and ev.method == "confirm":
                                await anyio.sleep(2.0)  # twice the command timeout
                                await b.respond_ui(ev.id, confirmed=True)
                            elif isinstance(ev, ExtensionUIRequest) and ev.method == "notify":
                                notes.append(str(ev.data.get("message")))
                                return

                    tg.start_soon(person)
                    job = await b.prompt("/askme please")
                    result = await job.wait(10)
            assert result.outcome == "completed"
    assert notes == ["askme confirmed=true"]


LONG_BACKOFF = {
    "enabled": True,
    "maxRetries": 2,
    "baseDelayMs": 20_000,
    "provider": {"maxRetries": 0},
}


@pytest.mark.anyio
@pytest.mark.parametrize("pi", both_pis())
async def test_abort_retry_in_the_backoff_cancels_the_job(
    fake: FakeOpenAI, tmp_path: Path, pi: str
) -> None:
    """abort_retry during pi's backoff: the job ends `cancelled`, the next prompt is new."""
    fake.reset()
    dirs = make_home(tmp_path, fake.base_url, retry=LONG_BACKOFF)
    fake.push(openai_error(503, "overloaded"), chat_text("fresh answer"))
    with anyio.fail_after(60):
        async with Bridge(config(dirs, executable=pi)) as b:
            job = await b.prompt("flaky")
            while job.state.phase != "retrying":
                await job.changed.wait()
            await b.abort_retry()
            assert job.done.is_set()
            r = job.outcome()
            assert (r.outcome, r.error) == ("cancelled", "Retry cancelled")
            nxt = await b.run("again")
            assert (nxt.outcome, nxt.text) == ("completed", "fresh answer")
            assert len(fake.requests) == 2  # the cancelled retry never reached the model
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_abort_retry_read_by_pi_in_a_backoff_the_bridge_has_not_read(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    """The race the random search found, made exact against the real pi.

    A consumer that does not read holds the bridge's reader back (lifecycle events are never
    dropped), so the bridge still sees the job waiting while pi has failed its attempt and
    sleeps in its backoff; `abort_retry` then reaches pi in that backoff. Once the consumer
    reads again, the job ends `cancelled` and `abort_retry` returns after it.
    """
    fake.reset()
    dirs = make_home(tmp_path, fake.base_url, retry=LONG_BACKOFF)
    fake.push(openai_error(503, "overloaded"))
    with anyio.fail_after(60):
        async with Bridge(config(dirs)) as b:
            stalled = b.subscribe(capacity=1)
            job = await b.prompt("flaky")
            while not fake.requests:  # noqa: ASYNC110 (another thread's list: no event to wait on)
                await anyio.sleep(0.05)
            await anyio.sleep(1.5)  # pi reads the 503 and starts its 20 s backoff
            assert job.state.phase in ("waiting", "running")  # what the bridge has read
            seen: list[BridgeEvent] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(b.abort_retry)
                await anyio.sleep(1.0)  # pi reads and answers it, unread behind the stall
                assert not job.done.is_set()
                async for ev in stalled:  # the consumer reads again
                    seen.append(ev)
                    if isinstance(ev, RunEnd) and ev.run == job.run:
                        break
            assert job.done.is_set()
            r = job.outcome()
            assert (r.outcome, r.error, r.attempts) == ("cancelled", "Retry cancelled", 1)
            assert seen
            assert len(fake.requests) == 1
    assert_reaped(b.pid)
