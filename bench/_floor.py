"""The true floor: the least an agent loop in CPython can cost on the workload.

A plain loop over tuples: the model stream yields `("text", delta)` and `("call", id, name,
arguments)` (one yield to the event loop before each), the loop keeps the transcript as
tuples, awaits each tool inline and calls the listener for every delta, call and result. No
validation, no identities, no snapshots.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from bench._workload import Record, Turn, echo_text

TEXT = "text"
CALL = "call"
RESULT = "result"

FloorEvent = tuple[Any, ...]


async def _stream(
    turn: Turn, yield_now: Callable[[], Awaitable[None]]
) -> AsyncIterator[FloorEvent]:
    for delta in turn.deltas:
        await yield_now()
        yield (TEXT, delta)
    for call_id, name, arguments in turn.calls:
        await yield_now()
        yield (CALL, call_id, name, arguments)


async def _echo(arguments: dict[str, Any]) -> str:
    return echo_text(arguments)


TOOLS = {"echo": _echo}


def listener_for(rec: Record) -> Callable[[FloorEvent], None]:
    """Return a listener that records what it sees into `rec`."""
    deltas, calls, results = rec.deltas.append, rec.calls.append, rec.results.append

    def listener(ev: FloorEvent) -> None:
        kind = ev[0]
        if kind is TEXT:
            deltas(ev[1])
        elif kind is CALL:
            calls((ev[1], ev[2], ev[3]))
        else:
            results((ev[1], ev[2]))

    return listener


async def run_floor(script: tuple[Turn, ...], yield_now: Callable[[], Awaitable[None]]) -> Record:
    """One floor run of `script`; return what its listener saw."""
    rec = Record()
    listener = listener_for(rec)
    messages: list[tuple[Any, ...]] = [("user", "go")]
    turn_no = 0
    while True:
        parts: list[str] = []
        calls: list[FloorEvent] = []
        async for ev in _stream(script[turn_no], yield_now):
            if ev[0] is TEXT:
                parts.append(ev[1])
            else:
                calls.append(ev)
            listener(ev)
        turn_no += 1
        text = "".join(parts)
        messages.append(("assistant", text, tuple(calls)))
        if not calls:
            rec.final_text = text
            return rec
        for _, call_id, name, arguments in calls:
            result = (RESULT, call_id, await TOOLS[name](arguments))
            listener(result)
            messages.append(result)


__all__ = ["listener_for", "run_floor"]
