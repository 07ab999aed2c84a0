"""A run whose model stream never suspends can still be cancelled and shares the loop (issue 30.2).

The stream function here yields text deltas that are always ready (as a scripted, cached or
in-memory model's are) and never ends: without the interpreter's periodic checkpoint the run
would never give the event loop a turn, so no deadline could fire and no other task could run,
and each test would hang (pytest's timeout fails it). Both roots, asyncio and trio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import pytest
from returns.result import Result, Success

from mule.effects import MuleError, MuleEvent
from mule.pi import (
    AbortSignal,
    AssistantMessageEvent,
    AssistantMessageEventStream,
    Context,
    Model,
    PartialBuilder,
    StartEvent,
    StreamOptions,
    TextDeltaEvent,
    TextStartEvent,
)
from tests.effects.kit import Recorder, Root, make_input, run_root

pytestmark = pytest.mark.anyio


def endless(
    model: Model, context: Context, options: StreamOptions | None = None
) -> AssistantMessageEventStream:
    """Return a stream of empty text deltas, each ready at once, without end."""

    async def events() -> AsyncIterator[AssistantMessageEvent]:
        b = PartialBuilder(api=model.api, provider=model.provider, model=model.id, timestamp=0)
        yield StartEvent(partial=b.snapshot())
        index = b.open_text()
        yield TextStartEvent(content_index=index, partial=b.snapshot())
        snapshot = b.snapshot()  # nothing is appended: memory stays flat however long it runs
        while True:
            yield TextDeltaEvent(content_index=index, delta="", partial=snapshot)

    return AssistantMessageEventStream.from_source(events())


class Counting(Recorder):
    """A listener that keeps only the last few events (the run emits without end)."""

    seen: int = 0

    async def __call__(self, event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
        self.seen += 1
        self.events[:] = [*self.events[-3:], event]
        return Success(None)


@pytest.mark.parametrize("listening", [True, False])
async def test_a_host_deadline_ends_a_run_whose_stream_never_suspends(
    root: Root, listening: bool
) -> None:
    rec = Counting()
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.2):
            await run_root(root, make_input(None, stream=endless), rec if listening else None)
    if listening:
        assert rec.seen > 3
        assert rec.events[-1].type == "run_end"


async def test_other_tasks_run_while_a_stream_never_suspends(root: Root) -> None:
    rec = Counting()
    turns = 0

    async def other(scope: anyio.CancelScope) -> None:
        nonlocal turns
        for _ in range(5):  # five turns of the loop: the run must have yielded five times
            await anyio.lowlevel.checkpoint()
            turns += 1
        scope.cancel()

    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(other, scope)
            await run_root(root, make_input(None, stream=endless), rec)
    assert scope.cancelled_caught
    assert turns == 5
    assert rec.events[-1].type == "run_end"
