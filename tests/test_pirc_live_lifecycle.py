"""The job contract and dialog-aware waits against the REAL pi (issue 13 items 1 and 2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mule.effects import MessageUpdate
from mule.pirc import Bridge, ExtensionUIRequest
from mule.testing.fake_openai import FakeOpenAI, chat_text
from tests.pirc.helpers import HERE, assert_reaped, config, make_home, pi_available

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
async def test_abort_then_prompt_gets_the_new_answer(fake: FakeOpenAI, tmp_path: Path) -> None:
    """`await b.abort(); await b.run("Try again")` returns the new answer, not the aborted one."""
    fake.reset()
    dirs = make_home(tmp_path, fake.base_url)
    with anyio.fail_after(60):
        async with Bridge(config(dirs)) as b:
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
