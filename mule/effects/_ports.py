"""The core's ports: the one interface through which a run reaches its host.

Every port returns a `Result`; a port that raises anyway is turned into a `MuleError` by the
interpreter, the one place where a callback's failure becomes a value. A missing port means
the host does not take part in that step (no key hook, no steering, ...), exactly as Pi's
optional callbacks. The model stream is a setting (`MuleRunSettings.stream`, the same plain
function on both roots), opened by the interpreter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias, final

from attrs import frozen
from returns.result import Result

from mule._fields_repr import fields_repr
from mule.effects._errors import MuleError
from mule.effects._lifecycle import MuleEvent
from mule.effects._outcome import MuleCompletedTurn
from mule.effects._tools import MuleCallPreparation
from mule.pi import AbortSignal, Message, ToolCall

# An emit port answers a Result, or an awaitable of one: a listener that never awaits (most
# do not) answers at once, and the run makes no coroutine for each of its events.
EmitPort: TypeAlias = Callable[
    [MuleEvent, AbortSignal], Result[None, MuleError] | Awaitable[Result[None, MuleError]]
]
ResolveKeyPort: TypeAlias = Callable[[str, AbortSignal], Awaitable[Result[str | None, MuleError]]]
PollPort: TypeAlias = Callable[[AbortSignal], Awaitable[Result[tuple[Message, ...], MuleError]]]
StopPort: TypeAlias = Callable[[MuleCompletedTurn, AbortSignal], Awaitable[Result[bool, MuleError]]]
PreparePort: TypeAlias = Callable[
    [ToolCall, AbortSignal], Awaitable[Result[MuleCallPreparation, MuleError]]
]


@final
@frozen(kw_only=True)
class Ports:
    """A run's doors to its host, each Result-returning (build them with `mule.promise.ports`).

    `emit` receives every event (back-pressure: the run waits for its answer); `resolve_key`
    answers before each model call; `steering` and `follow_up` are Pi's message polls;
    `should_stop` is asked after each turn; `prepare_tool` decodes and authorises one call of a
    declared tool (only calls that passed the tool's schema gate reach it, carrying the gate's
    coerced arguments).

    Attributes:
        emit: Receives every event and answers a `Result`, at once or as an awaitable
            (awaited: back-pressure). A listener that never awaits can answer at once, and
            saves the run a coroutine per event.
        resolve_key: Answers the API key before each model call.
        steering: Pi's steering poll: messages to inject before the next model call.
        follow_up: Pi's follow-up poll: messages that start another turn when the run would
            end.
        should_stop: The retained stop hook: asked after each completed turn's tool results,
            before its `turn_end`; True ends the run (not asked for a failed turn).
        prepare_tool: Decodes and authorises one call of a declared tool.

    """

    emit: EmitPort | None = None
    resolve_key: ResolveKeyPort | None = None
    steering: PollPort | None = None
    follow_up: PollPort | None = None
    should_stop: StopPort | None = None
    prepare_tool: PreparePort | None = None

    __repr__ = fields_repr


async def emit_to(port: EmitPort, event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
    """Give `event` to an emit port and return its answer, awaited when it answers later."""
    answer = port(event, signal)
    return answer if isinstance(answer, Result) else await answer


__all__ = [
    "EmitPort",
    "PollPort",
    "Ports",
    "PreparePort",
    "ResolveKeyPort",
    "StopPort",
    "emit_to",
]
