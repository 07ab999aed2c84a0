"""Dialog-aware waits (issue 13 item 2).

A /command's answer waits on its dialogs, not on `command_timeout`; a late answer never
attaches to another job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from mule.pirc import (
    Bridge,
    BridgeConfig,
    BridgeEvent,
    CommandTimeout,
    ExtensionUIRequest,
    OtherPiEvent,
)
from tests.pirc.helpers import assert_reaped

FAKE = str(Path(__file__).parent / "fake_pi.py")


def cfg(**kw: Any) -> BridgeConfig:
    base: dict[str, Any] = {
        "provider": "local",
        "model": "fake",
        "executable": FAKE,
        "env": {"FAKE_PI_SCENARIO": "command", "FAKE_PI_LATE": "1.0"},
        "command_timeout": 0.3,
        "stop_grace": 0.5,
        "abort_grace": 0.5,
    }
    base.update(kw)
    return BridgeConfig(**base)


@pytest.mark.anyio
async def test_a_slow_person_at_a_dialog_does_not_fail_the_command() -> None:
    """The answer comes 0.8 s after the prompt, past command_timeout (0.3 s): no CommandTimeout."""
    answers: list[Any] = []
    with anyio.fail_after(20):
        async with Bridge(cfg()) as b:
            await b.command("get_state", time_limit=5)  # the fake has started: time from here
            with b.subscribe() as sub:
                async with anyio.create_task_group() as tg:

                    async def person() -> None:
                        async for ev in sub:
                            if isinstance(ev, ExtensionUIRequest):
                                await anyio.sleep(0.8)
                                await b.respond_ui(ev.id, confirmed=True)
                            if isinstance(ev, OtherPiEvent) and "answer" in ev.data:
                                answers.append(ev.data["answer"])
                                return

                    tg.start_soon(person)
                    job = await b.prompt("/dialog")
                result = await job.wait(5)
            assert result.outcome == "completed"
            r = await b.run("after")  # the next prompt gets its own job
            assert r.text == "echo:after"
    assert answers == [{"type": "extension_ui_response", "id": "dlg-c", "confirmed": True}]
    assert_reaped(b.pid)


@pytest.mark.anyio
async def test_an_unanswered_dialog_is_bounded_by_the_ui_timeout() -> None:
    """Nobody answers: the bridge cancels the dialog at ui_timeout, then pi answers the prompt."""
    seen: list[BridgeEvent] = []
    with anyio.fail_after(20):
        async with Bridge(cfg(ui_timeout=0.6)) as b:
            await b.command("get_state", time_limit=5)
            with b.subscribe() as sub:
                job = await b.prompt("/dialog")
                await job.wait(5)
                sub.close()
                seen += [ev async for ev in sub]
            assert b.stats.ui_timeouts == 1
    answer = next(ev.data["answer"] for ev in seen if isinstance(ev, OtherPiEvent))
    assert answer == {"type": "extension_ui_response", "id": "dlg-c", "cancelled": True}


@pytest.mark.anyio
async def test_a_late_answer_never_attaches_to_the_next_job() -> None:
    """The prompt times out (typed), its job fails; pi's late answer and run are their own job."""
    with anyio.fail_after(20):
        async with Bridge(cfg()) as b:
            await b.command("get_state", time_limit=5)
            with pytest.raises(CommandTimeout):
                await b.prompt("/late")
            stale = b.job
            assert stale is not None
            assert stale.done.is_set()
            assert stale.outcome().outcome == "failed"
            job = await b.prompt("next", time_limit=5)  # pi is still busy with the late one
            r = await job.wait(5)
            assert (r.outcome, r.text) == ("completed", "echo:next")
            assert r.run != stale.run
            assert b.stats.unmatched_responses == 1
