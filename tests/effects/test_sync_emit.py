"""An emit port may answer at once: the same run, event for event, as with an async port.

Each run is made twice, once with the kit's async recorder as the port and once with a port
that answers its `Result` synchronously, and the two must agree on every event and on the
result: on a plain and a tool run, on a listener that fails or raises at each kind of event,
on a cancel from inside the listener, through `mule.effects.stream`'s tap and through an
`output_type` run (whose ports wrap the emit port).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from attrs import evolve
from returns.result import Failure, Result, Success

import mule.effects as fx
from mule.effects import MuleError, MuleEvent, MulePortsInput
from mule.pi import AbortController, AbortSignal
from mule.pi.scripted import Call, reply
from mule.promise import emit_port
from tests.effects.kit import Recorder, make_input, model_of, project, to_core, tool

pytestmark = pytest.mark.anyio

SyncPort = Callable[[MuleEvent, AbortSignal], Result[None, MuleError]]


def sync_recorder(rec: Recorder) -> SyncPort:
    """Return a port doing what `rec` does, answering at once (`rec` must not sleep)."""

    def port(event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
        rec.events.append(event)
        rec.aborted_at.append(signal.aborted)
        if rec.on_event is not None:
            rec.on_event(event)
        if event.type == rec.fail_on:
            if rec.fail_mode == "raise":
                raise rec.error
            return Failure(MuleError("listener", "listener refused", rec.error))
        return Success(None)

    return port


def _inp(tools: bool) -> Any:
    if not tools:
        return make_input(model_of(reply("hello there")))
    model = model_of(reply(Call("c1", "A", {}), Call("c2", "B", {})), reply("done"))
    # (B ends later, so the ends come in one order on every backend: trio shuffles its tasks)
    return make_input(model, tools=(tool("A"), tool("B", delay_ms=30)))


async def _both(
    core: Callable[[Recorder], MulePortsInput],
    make: Callable[[], Recorder],
    signal: Callable[[Recorder], AbortSignal | None] = lambda rec: None,
) -> tuple[tuple[list[str], Any], tuple[list[str], Any]]:
    async_rec, sync_rec = make(), make()
    a = await fx.run(core(async_rec), signal(async_rec))
    inp = core(sync_rec)
    s = await fx.run(
        evolve(inp, ports=evolve(inp.ports, emit=sync_recorder(sync_rec))), signal(sync_rec)
    )
    return (project(async_rec.events), _verdict(a)), (project(sync_rec.events), _verdict(s))


def _verdict(res: Result[Any, MuleError]) -> Any:
    if isinstance(res, Failure):
        err = res.failure()
        return ("failed", err.phase, err.message)
    return ("ok", res.unwrap().status)


@pytest.mark.parametrize("tools", [False, True])
async def test_same_run(tools: bool) -> None:
    a, s = await _both(lambda rec: to_core(_inp(tools), rec), Recorder)
    assert a == s
    assert a[1] == ("ok", "completed")
    assert "MU" in a[0]  # the streamed deltas went through the port too


@pytest.mark.parametrize("mode", ["failure", "raise"])
@pytest.mark.parametrize(
    "at",
    ["run_start", "turn_start", "message_update", "tool_execution_start", "turn_end", "run_end"],
)
async def test_same_listener_failure(mode: str, at: str) -> None:
    a, s = await _both(
        lambda rec: to_core(_inp(True), rec),
        lambda: Recorder(fail_on=at, fail_mode=mode),  # type: ignore[arg-type]
    )
    assert a == s
    assert a[1][:2] == ("failed", "listener")


async def test_same_cancel_from_the_listener() -> None:
    """A listener that aborts the run: the cancel's own `run_end` also goes to the port."""
    controllers: dict[int, AbortController] = {}

    def make() -> Recorder:
        controller = AbortController()

        def on_event(event: MuleEvent) -> None:
            if event.type == "message_update":
                controller.abort()

        rec = Recorder(on_event=on_event)
        controllers[id(rec)] = controller
        return rec

    def signal(rec: Recorder) -> AbortSignal:
        return controllers[id(rec)].signal

    a, s = await _both(lambda rec: to_core(_inp(True), rec), make, signal)
    assert a == s
    assert a[1] == ("ok", "cancelled")
    assert a[0][-1] == "RE(cancelled)"


async def test_stream_tap_answers_at_once() -> None:
    rec = Recorder()
    inp = to_core(_inp(True), rec)
    inp = evolve(inp, ports=evolve(inp.ports, emit=sync_recorder(rec)))
    seen: list[MuleEvent] = []
    async with fx.stream(inp) as events:
        async for event in events:
            seen.append(event)
    assert isinstance(events.outcome, Success)
    assert project(seen) == project(rec.events)
    assert project(seen)[-1] == "RE(completed)"


async def test_output_type_wraps_a_sync_port() -> None:
    rec = Recorder()
    model = model_of(reply(Call("o1", "final_result", {"response": 7})))
    inp = to_core(make_input(model, output_type=int), rec)
    inp = evolve(inp, ports=evolve(inp.ports, emit=sync_recorder(rec)))
    res = await fx.run(inp)
    assert res.unwrap().output == 7
    assert project(rec.events)[-1] == "RE(completed)"


async def test_promise_port_of_a_plain_function_answers_at_once() -> None:
    seen: list[str] = []
    port = emit_port(lambda event, signal: seen.append(event.type))
    assert port is not None
    event = fx.RunStart(run=fx.MuleIdentity(kind="run", value="run:0"))
    answer = port(event, AbortController().signal)
    assert answer == Success(None)  # a Result, not a coroutine
    assert seen == ["run_start"]


async def test_promise_port_awaits_what_a_plain_function_returns() -> None:
    seen: list[str] = []

    async def later(event: MuleEvent) -> None:
        seen.append(event.type)

    port = emit_port(lambda event, signal: later(event))
    assert port is not None
    answer = port(
        fx.RunStart(run=fx.MuleIdentity(kind="run", value="run:0")), AbortController().signal
    )
    assert not isinstance(answer, Result)
    assert seen == []
    assert await answer == Success(None)
    assert seen == ["run_start"]


async def test_a_raising_sync_port_keeps_its_traceback_as_text() -> None:
    """Its frames would link back to the interpreter's (a cycle): their text is a note."""
    rec = Recorder(fail_on="turn_start", fail_mode="raise")
    inp = to_core(_inp(False), rec)
    res = await fx.run(evolve(inp, ports=evolve(inp.ports, emit=sync_recorder(rec))))
    assert isinstance(res, Failure)
    cause = res.failure().cause
    assert cause is rec.error
    assert cause.__traceback__ is None
    (note,) = cause.__notes__
    assert "in port" in note
    assert "raise rec.error" in note
