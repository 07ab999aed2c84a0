"""`mule.stream` / `mule.effects.stream` (async iteration) and `mule.run_sync`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from returns.result import Failure, Success

import mule
import mule.effects
from mule.effects import CONSUMER_LEFT, MuleEvent, event_to_wire
from mule.pi import AbortController, AbortError, AbortSignal, Model, UserMessage
from mule.pi.scripted import Call, Reply, ScriptedModel, Text, error_reply, reply
from mule.promise import core_input

MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")


@mule.tool(replay="safe")
def word_count(text: str) -> int:
    """Count words."""
    return len(text.split())


def _replies() -> list[Reply]:
    return [
        reply(Text.of("Let me count. ", 3), Call("c1", "word_count", {"text": "an honest loop"})),
        reply(Text.of("It has 3 words.", 4)),
    ]


def _inp(replies: list[Reply] | None = None, **kw: Any) -> mule.MuleRunInput:
    return mule.MuleRunInput(
        model=MODEL,
        system_prompt="sys",
        messages=(UserMessage("hi", 1),),
        stream=ScriptedModel(_replies() if replies is None else replies, clock=lambda: 1000),
        tools=[word_count],
        **kw,
    )


class Tap:
    """Records every event the run emitted (the stream's optional listener)."""

    def __init__(self) -> None:
        self.events: list[MuleEvent] = []

    def __call__(self, event: MuleEvent, signal: AbortSignal) -> None:
        self.events.append(event)

    def terminals(self) -> list[str]:
        return [e.outcome for e in self.events if e.type == "run_end"]


async def _consume(
    run: mule.MuleStream,
    into: list[MuleEvent] | None = None,
    on_event: Callable[[MuleEvent], None] | None = None,
) -> None:
    """Iterate the whole stream in its block, handing each event to `on_event`."""
    async with run:
        async for event in run:
            if into is not None:
                into.append(event)
            if on_event is not None:
                on_event(event)


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in ("timestamp", "durationMs")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _wire(events: list[MuleEvent]) -> list[Any]:
    """Return the events' wire forms without clock readings (timestamps, tool durations)."""
    return [_untimed(event_to_wire(e)) for e in events]


@pytest.mark.anyio
async def test_async_for_sees_what_a_listener_sees() -> None:
    seen: list[MuleEvent] = []
    expected = await mule.run(_inp(), lambda e, s: seen.append(e))
    async with mule.stream(_inp()) as run:
        events = [event async for event in run]
    assert _wire(events) == _wire(seen)
    assert events[-1].type == "run_end"
    assert _untimed(mule.effects.to_wire(run.outcome)) == _untimed(mule.effects.to_wire(expected))
    assert run.outcome.status == "completed"


@pytest.mark.anyio
async def test_the_run_waits_for_the_loop_body() -> None:
    """Back-pressure as with a listener: while the body holds an event, the run is parked."""
    tap = Tap()
    count = 0
    async with mule.stream(_inp(), listener=tap) as run:
        async for event in run:
            count += 1
            for _ in range(20):
                await anyio.lowlevel.checkpoint()
            assert len(tap.events) == count, event.type
    assert tap.terminals() == ["completed"]


@pytest.mark.anyio
@pytest.mark.parametrize("at", ["run_start", "message_update", "tool_execution_start", "run_end"])
async def test_breaking_out_cancels_the_run_with_one_terminal(at: str) -> None:
    tap = Tap()
    async with mule.stream(_inp(), listener=tap) as run:
        async for event in run:
            if event.type == at:
                break
    assert tap.terminals() == (["completed"] if at == "run_end" else ["cancelled"])
    assert tap.events[-1].type == "run_end"
    assert run.outcome.status == tap.terminals()[0]
    if at != "run_end":
        assert run.signal.aborted
        assert run.signal.reason == CONSUMER_LEFT


@pytest.mark.anyio
async def test_leaving_the_block_without_iterating_cancels() -> None:
    tap = Tap()
    async with mule.stream(_inp(), listener=tap) as run:
        await anyio.sleep(0.01)  # the run starts and waits on its first event
    assert [e.type for e in tap.events] == ["run_start", "run_end"]
    assert tap.terminals() == ["cancelled"]
    assert run.outcome.status == "cancelled"
    assert [e async for e in run] == []  # iterating after the block: nothing more


@pytest.mark.anyio
async def test_leaving_before_the_run_started_emits_nothing() -> None:
    """As `mule.run` with an aborted signal: a run that never started has no events."""
    tap = Tap()
    async with mule.stream(_inp(), listener=tap) as run:
        pass
    assert tap.events == []
    assert run.outcome.status == "cancelled"


@pytest.mark.anyio
async def test_an_exception_in_the_body_propagates_unchanged() -> None:
    tap = Tap()
    run = mule.stream(_inp(), listener=tap)

    def body(event: MuleEvent) -> None:
        if event.type == "message_update":
            raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        await _consume(run, on_event=body)
    assert tap.terminals() == ["cancelled"]
    assert run.outcome.status == "cancelled"


@pytest.mark.anyio
async def test_a_cancelled_caller_cancels_the_run_once() -> None:
    tap = Tap()
    with anyio.move_on_after(0.05) as scope:
        async with mule.stream(_inp(), listener=tap) as run:
            async for _ in run:
                await anyio.sleep(10)
    assert scope.cancelled_caught
    assert tap.terminals() == ["cancelled"]
    assert run.outcome.status == "cancelled"


@pytest.mark.anyio
async def test_a_failed_run_raises_from_the_iteration() -> None:
    events: list[MuleEvent] = []
    run = mule.stream(_inp([error_reply("boom")]))
    with pytest.raises(mule.MuleRunFailed) as caught:
        await _consume(run, events)
    assert caught.value.error.phase == "model"
    assert events[-1].type == "run_end"
    assert [e.outcome for e in events if e.type == "run_end"] == ["failed"]
    with pytest.raises(mule.MuleRunFailed):
        _ = run.outcome


@pytest.mark.anyio
async def test_the_callers_signal_raises_its_reason_after_the_terminal() -> None:
    controller = AbortController()
    events: list[MuleEvent] = []
    run = mule.stream(_inp(), controller.signal)

    def body(event: MuleEvent) -> None:
        if event.type == "message_update":
            controller.abort()

    with pytest.raises(AbortError):
        await _consume(run, events, body)
    assert [e.outcome for e in events if e.type == "run_end"] == ["cancelled"]
    assert events[-1].type == "run_end"
    assert run.outcome.status == "cancelled"


@pytest.mark.anyio
async def test_a_raising_listener_fails_the_run() -> None:
    def bad(event: MuleEvent, signal: AbortSignal) -> None:
        if event.type == "turn_start":
            raise ValueError("tap broke")

    with pytest.raises(mule.MuleRunFailed, match="tap broke"):
        await _consume(mule.stream(_inp(), listener=bad))


@pytest.mark.anyio
async def test_misuse_is_a_clear_error() -> None:
    run = mule.stream(_inp())
    with pytest.raises(mule.StreamNotEnded, match="async with"):
        await run.__anext__()
    with pytest.raises(mule.StreamNotEnded, match="has not ended"):
        _ = run.outcome
    async with run:
        with pytest.raises(mule.StreamNotEnded, match="has not ended"):
            _ = run.outcome
    with pytest.raises(mule.StreamNotEnded, match="runs once"):
        async with run:
            pass


@pytest.mark.anyio
async def test_the_effects_root_streams_a_result() -> None:
    async with mule.effects.stream(core_input(_inp())) as run:
        types = [event.type async for event in run]
    assert types[0] == "run_start"
    assert isinstance(run.outcome, Success)
    assert run.outcome.unwrap().status == "completed"
    async with mule.effects.stream(core_input(_inp([error_reply("boom")]))) as failed:
        ends = [e.outcome async for e in failed if e.type == "run_end"]
    assert ends == ["failed"]
    assert isinstance(failed.outcome, Failure)
    assert failed.outcome.failure().phase == "model"


@pytest.mark.anyio
@pytest.mark.parametrize("at", ["run_start", "message_update", "tool_execution_start"])
async def test_breaking_out_of_the_effects_stream_cancels_with_one_terminal(at: str) -> None:
    tap = Tap()
    async with mule.effects.stream(core_input(_inp(), tap)) as run:
        async for event in run:
            if event.type == at:
                break
    assert tap.terminals() == ["cancelled"]
    assert tap.events[-1].type == "run_end"
    assert isinstance(run.outcome, Success)
    assert run.outcome.unwrap().status == "cancelled"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_sync_in_a_plain_thread(backend: str) -> None:
    seen: list[str] = []
    outcome = mule.run_sync(_inp(), lambda e, s: seen.append(e.type), backend=backend)  # type: ignore[arg-type]
    assert outcome.status == "completed"
    assert seen[-1] == "run_end"


@pytest.mark.anyio
@pytest.mark.parametrize("inner", ["asyncio", "trio"])
async def test_run_sync_inside_a_running_loop(inner: str) -> None:
    """As in a notebook cell: a loop already runs in this thread (the run's loop is `inner`)."""
    seen: list[str] = []
    outcome = mule.run_sync(_inp(), lambda e, s: seen.append(e.type), backend=inner)  # type: ignore[arg-type]
    assert outcome.status == "completed"
    assert seen.count("run_end") == 1


def test_run_sync_raises_as_run_does() -> None:
    with pytest.raises(mule.MuleRunFailed):
        mule.run_sync(_inp([error_reply("boom")]))
    controller = AbortController()
    controller.abort("stop")
    with pytest.raises(AbortError):
        mule.run_sync(_inp(), signal=controller.signal)
