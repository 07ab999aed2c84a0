"""Hypothesis strategies for mule's own values (`mule.effects`), events included.

Identities, tool results and their checkpoints, resume points, outcomes, and every run event.

Pi's values inside them come from `mule.testing.strategies`. Identities are run-local chains
(a message's parent is its turn, whose parent is the run), as the machine makes them.
Example::

    from hypothesis import given
    from mule.effects import event_from_wire, event_to_wire
    from mule.testing import effects_strategies as es

    @given(es.mule_events())
    def test_round_trip(event):
        assert event_from_wire(event_to_wire(event)) == event
"""

from __future__ import annotations

from typing import Any

from mule.effects import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelPrompt,
    MuleEvent,
    MuleIdentity,
    MuleIdentityKind,
    MuleResume,
    MuleRunOutcome,
    MuleToolCheckpoint,
    MuleToolExecutionPart,
    MuleToolResult,
    RunEnd,
    RunStart,
    ToolCompleted,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolPending,
    ToolStarted,
    TurnEnd,
    TurnStart,
)
from mule.pi import DoneEvent, ErrorEvent, needs_extra
from mule.testing import strategies as ms

with needs_extra("testing", "mule.testing's strategies"):
    from hypothesis import strategies as st

Strategy = st.SearchStrategy

_KINDS: tuple[MuleIdentityKind, ...] = ("message", "tool_call", "tool_result", "terminal")


def _value(kind: str) -> Strategy[str]:
    return st.integers(min_value=0, max_value=10_000).map(lambda n: f"{kind}:{n}")


def runs() -> Strategy[MuleIdentity]:
    """Draw a run identity."""
    return st.builds(MuleIdentity, st.just("run"), _value("run"))


def turns() -> Strategy[MuleIdentity]:
    """Draw a turn identity, caused by a run."""
    return st.builds(MuleIdentity, st.just("turn"), _value("turn"), runs())


@st.composite
def identities(draw: st.DrawFn, kind: MuleIdentityKind | None = None) -> MuleIdentity:
    """Draw an identity of `kind` (any kind if None) with its chain of causes."""
    chosen: MuleIdentityKind = (
        kind if kind is not None else draw(st.sampled_from(("run", "turn", *_KINDS)))
    )
    if chosen == "run":
        return draw(runs())
    if chosen == "turn":
        return draw(turns())
    parent = draw(turns()) if chosen != "terminal" else draw(runs())
    if chosen == "tool_result":
        parent = MuleIdentity("tool_call", draw(_value("tool_call")), parent)
    return MuleIdentity(chosen, draw(_value(chosen)), parent)


def tool_results() -> Strategy[MuleToolResult]:
    """Draw what a tool produced; optionals are drawn unset as often as set."""
    return st.builds(
        MuleToolResult,
        content=st.lists(ms.user_contents(), max_size=3).map(tuple),
        is_error=st.booleans(),
        details=st.none() | ms.json_values(),
        structured_content=st.none() | ms.json_values(),
        usage=st.none() | ms.usages(),
        terminate=st.none() | st.booleans(),
    )


def tool_execution_parts() -> Strategy[MuleToolExecutionPart]:
    """Draw a progress update or a final result of a tool execution."""
    return st.builds(MuleToolExecutionPart, st.sampled_from(("update", "result")), tool_results())


def tool_checkpoints() -> Strategy[MuleToolCheckpoint]:
    """Draw a tool call's checkpoint: pending, started, or completed (with or without message)."""
    replay = st.sampled_from(("safe", "unsafe"))
    message = st.none() | ms.tool_result_messages()
    return st.one_of(
        st.builds(ToolPending, ms.tool_calls()),
        st.builds(ToolStarted, ms.tool_calls(), replay),
        st.builds(ToolCompleted, ms.tool_calls(), tool_results(), message),
    )


def resumes() -> Strategy[MuleResume]:
    """Draw a recovered turn: its assistant message and a checkpoint per call."""
    tools = st.lists(tool_checkpoints(), max_size=3).map(tuple)
    return st.builds(MuleResume, ms.assistant_messages(), tools)


def outcomes() -> Strategy[MuleRunOutcome]:
    """Draw a run's terminal outcome."""
    return st.builds(
        MuleRunOutcome,
        status=st.sampled_from(("completed", "cancelled", "failed")),
        run=runs(),
        terminal=identities("terminal"),
        message=ms.assistant_messages(),
        messages=st.lists(ms.messages(), max_size=3).map(tuple),
        all_messages=st.lists(ms.messages(), max_size=3).map(tuple),
    )


@st.composite
def message_updates(draw: st.DrawFn) -> MessageUpdate:
    """Draw a streamed update: a Pi stream event and the response so far (its partial)."""
    event = draw(ms.assistant_message_events())
    if isinstance(event, DoneEvent):
        value = event.message
    elif isinstance(event, ErrorEvent):
        value = event.error
    else:
        value = event.partial
    return MessageUpdate(draw(runs()), draw(turns()), draw(identities("message")), value, event)


EVENT_STRATEGIES: dict[type[Any], Strategy[Any]] = {
    RunStart: st.builds(
        RunStart, run=runs(), messages=st.lists(ms.messages(), max_size=2).map(tuple)
    ),
    ModelPrompt: st.builds(
        ModelPrompt,
        run=runs(),
        turn=turns(),
        attempt=st.integers(min_value=1, max_value=10),
        system_prompt=st.text(max_size=24),
    ),
    TurnStart: st.builds(TurnStart, run=runs(), turn=turns()),
    MessageStart: st.builds(
        MessageStart, run=runs(), turn=turns(), message=identities("message"), value=ms.messages()
    ),
    MessageUpdate: message_updates(),
    MessageEnd: st.builds(
        MessageEnd, run=runs(), turn=turns(), message=identities("message"), value=ms.messages()
    ),
    ToolExecutionStart: st.builds(
        ToolExecutionStart,
        run=runs(),
        turn=turns(),
        tool_call=identities("tool_call"),
        call=ms.tool_calls(),
        replay=st.sampled_from(("safe", "unsafe")),
    ),
    **{
        cls: st.builds(
            cls,
            run=runs(),
            turn=turns(),
            tool_call=identities("tool_call"),
            call=ms.tool_calls(),
            result=tool_results(),
        )
        for cls in (ToolExecutionUpdate,)
    },
    ToolExecutionEnd: st.builds(
        ToolExecutionEnd,
        run=runs(),
        turn=turns(),
        tool_call=identities("tool_call"),
        call=ms.tool_calls(),
        result=tool_results(),
        duration_ms=st.none() | st.integers(min_value=0, max_value=10_000_000),
    ),
    TurnEnd: st.builds(
        TurnEnd,
        run=runs(),
        turn=turns(),
        message=ms.assistant_messages(),
        tool_results=st.lists(ms.tool_result_messages(), max_size=3).map(tuple),
    ),
    RunEnd: st.builds(
        RunEnd,
        run=runs(),
        terminal=identities("terminal"),
        outcome=st.sampled_from(("completed", "cancelled", "failed")),
    ),
}
"""A strategy per event class, in the order the run emits them."""


def mule_events() -> Strategy[MuleEvent]:
    """Draw any run event."""
    return st.one_of(*EVENT_STRATEGIES.values())


__all__ = [
    "EVENT_STRATEGIES",
    "identities",
    "message_updates",
    "mule_events",
    "outcomes",
    "resumes",
    "runs",
    "tool_checkpoints",
    "tool_execution_parts",
    "tool_results",
    "turns",
]
