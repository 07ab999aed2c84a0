"""Pi's agent loop as a pure transition: `step(state, fact) -> (state, commands)`.

No clock, randomness or I/O: time arrives inside facts, identity values come from a counter
in the state, and every effect is a command for the interpreter. Commands from one step are
in order; at most the last one asks the world for an answer, so the interpreter can feed
answers back in sequence. The phases and the facts each one waits for are drawn in
`mule.effects._state`; `expects(phase)` states them as code.

`step` is total: whatever is raised inside it (a tool's schema gate on hostile arguments,
say) ends the run as a typed `MuleError(control)` with its one `run_end(failed)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar, assert_never

from attrs import evolve
from returns.result import Failure

from mule.effects._batch import _begin_resume, _on_tools
from mule.effects._errors import MuleError, describe
from mule.effects._events import MessageUpdate, RunEnd, RunStart
from mule.effects._identity import MuleIdentity
from mule.effects._protocol import (
    ASK_STEERING,
    PULL_MODEL,
    Began,
    CancelRequested,
    Command,
    Fact,
    Finish,
    KeyResolved,
    ListenerFailed,
    MessagesAnswered,
    RetryAfterAnswered,
    Sleep,
    Slept,
    StopAnswered,
    StreamExhausted,
    StreamIdled,
    StreamOpened,
    ToolExhausted,
    ToolPartArrived,
    ToolPrepared,
    WorkFailed,
)
from mule.effects._state import (
    AwaitingRetryAfter,
    AwaitingStop,
    BackingOff,
    NotStarted,
    Over,
    Phase,
    Polling,
    ResolvingKey,
    RunConfig,
    RunningTools,
    RunState,
    Streaming,
)
from mule.effects._streaming import _on_stream
from mule.effects._turns import (
    _attempt,
    _call_model,
    _on_poll,
    _open_turn,
    _turn_body,
    _turn_ended,
)
from mule.effects._txn import _cancel, _fail, _Txn
from mule.pi import (
    BLOCK_EVENT_TYPES,
    DoneEvent,
    ErrorEvent,
    Message,
    StartEvent,
    SystemMessage,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    create_initial_system_message,
)

_BLOCK_EVENTS = BLOCK_EVENT_TYPES
P = TypeVar("P")


def initial_state(cfg: RunConfig, messages: Sequence[Message]) -> RunState:
    """Return the state of a run that has not begun; feed it `Began` first.

    The transcript opens with the initial system message (the system prompt and the tools'
    declarations) unless `messages` opens with a system message, as Pi 1.6.0's Agent makes it.
    """
    context = tuple(messages)
    if not context or type(context[0]) is not SystemMessage:
        initial = create_initial_system_message(cfg.system_prompt, cfg.descriptors)
        if initial is not None:
            return RunState(cfg=cfg, phase=NotStarted(), context=(initial, *context), lead=1)
    return RunState(cfg=cfg, phase=NotStarted(), context=context)


def expects(phase: Phase) -> tuple[type[Fact], ...]:
    """Return the facts `phase` waits for, besides cancellation and failures (any time)."""
    match phase:
        case NotStarted():
            return (Began,)
        case Polling():
            return (MessagesAnswered,)
        case ResolvingKey():
            return (KeyResolved,)
        case Streaming():
            return (StreamOpened, StreamExhausted, StreamIdled, *EVENT_FACTS)
        case RunningTools():
            return (ToolPrepared, ToolPartArrived, ToolExhausted)
        case AwaitingStop():
            return (StopAnswered,)
        case AwaitingRetryAfter():
            return (RetryAfterAnswered,)
        case BackingOff():
            return (Slept,)
        case Over():
            return ()
        case _:
            assert_never(phase)


EVENT_FACTS: tuple[type[Fact], ...] = (StartEvent, DoneEvent, ErrorEvent, *BLOCK_EVENT_TYPES)


def step(state: RunState, fact: Fact) -> tuple[RunState, tuple[Command, ...]]:
    """Advance a run by one fact; never raises (a failure inside ends the run typed)."""
    try:
        # The hot path: a streamed block event only becomes a message_update.
        update = stream_update(state, fact)
        if update is not None:
            return state, (update, PULL_MODEL)
        phase = state.phase
        if type(phase) is Over:
            return _after_over(state, fact)
        t = _Txn(state)
        _dispatch(t, phase, fact)
        return t.commit()
    except Exception as exc:
        return _crashed(state, fact, exc)


def stream_update(state: RunState, fact: Fact) -> MessageUpdate | None:
    """Return the message_update a streamed block event makes, if that is all it does.

    This is `step`'s hot path on its own: for such a fact `step` returns the state unchanged
    with `(update, PULL_MODEL)`, so the interpreter may emit it and pull again without a step.
    """
    if type(fact) in _BLOCK_EVENTS:
        ids = update_ids(state)
        if ids is not None:
            run, turn, message = ids
            # `_partial`: the lazy snapshot as it is (the `partial` property would build it).
            return MessageUpdate(run, turn, message, fact._partial, fact)  # type: ignore[union-attr, arg-type]
    return None


def update_ids(state: RunState) -> tuple[MuleIdentity, MuleIdentity, MuleIdentity] | None:
    """Return the run, turn and message of the updates block events make in `state`, or None.

    None when a streamed block event is more than a message_update in `state`. The state does
    not change while block events stream, so the interpreter asks once per run of them and
    makes each `stream_update` itself: `MessageUpdate(run, turn, message, event._partial,
    event)`.
    """
    phase = state.phase
    if type(phase) is Streaming and phase.started:
        return state.cfg.run, phase.turn, phase.message
    return None


def _after_over(state: RunState, fact: Fact) -> tuple[RunState, tuple[Command, ...]]:
    if isinstance(fact, ListenerFailed):
        # Only `run_end` precedes the Finish of its step: its listener failed, so the run
        # fails with that error instead (the interpreter drops the pending Finish).
        return state, (Finish(Failure(fact.error)),)
    if isinstance(fact, CancelRequested):
        # Decided but not delivered: an abort noticed before `run_end` went out still wins.
        t = _Txn(state)
        _cancel(t, fact)
        return t.commit()
    return state, ()


def _stream_fact(t: _Txn, phase: Phase, fact: Fact) -> None:
    _on_stream(t, _expect(phase, Streaming, fact), fact)  # type: ignore[arg-type]


def _tool_fact(t: _Txn, phase: Phase, fact: Fact) -> None:
    _on_tools(t, _expect(phase, RunningTools, fact).batch, fact)  # type: ignore[arg-type]


# The facts of every turn, by exact type: what `_dispatch`'s match does for them, without
# walking its cases (a class pattern is an isinstance check; the stream's facts came tenth).
_BY_TYPE: dict[type, Callable[[_Txn, Phase, Fact], None]] = {
    **dict.fromkeys(
        (StreamOpened, StreamExhausted, StreamIdled, StartEvent, DoneEvent, ErrorEvent),
        _stream_fact,
    ),
    **dict.fromkeys(_BLOCK_EVENTS, _stream_fact),
    **dict.fromkeys((ToolPrepared, ToolPartArrived, ToolExhausted), _tool_fact),
}


def _dispatch(t: _Txn, phase: Phase, fact: Fact) -> None:
    by_type = _BY_TYPE.get(type(fact))
    if by_type is not None:
        by_type(t, phase, fact)
        return
    match fact:
        case CancelRequested():
            _cancel(t, fact)
        case ListenerFailed():
            t.phase = Over()
            t.cmds.append(Finish(Failure(fact.error)))
        case WorkFailed():
            _fail(t, fact.error)
        case Began():
            _expect(phase, NotStarted, fact)
            t.clock = max(t.clock, fact.now_ms)
            _begin(t)
        case KeyResolved():
            _call_model(t, _expect(phase, ResolvingKey, fact).attempt, fact.key)
        case MessagesAnswered():
            _on_poll(t, _expect(phase, Polling, fact), fact.messages)
        case StopAnswered():
            w = _expect(phase, AwaitingStop, fact)
            _turn_ended(t, w.message, w.results, w.more, stop=fact.stop)
        case RetryAfterAnswered():
            failed = _expect(phase, AwaitingRetryAfter, fact)
            ms = fact.ms
            delay = failed.backoff_ms
            if ms is not None and math.isfinite(ms) and ms >= 0:
                delay = max(delay, ms)
            if t.cfg.retry is not None:  # Pi's maxAgentDelayMs bounds every wait, this one too
                delay = min(delay, t.cfg.retry.max_agent_delay_ms)
            t.phase = BackingOff(failed.attempt)
            t.cmds.append(Sleep(delay))
        case Slept():
            _attempt(t, _expect(phase, BackingOff, fact).attempt + 1)
        # The stream's and the tools' facts arrive through `_BY_TYPE` above (their classes are
        # final); these cases keep the match exhaustive for `assert_never`.
        case (
            StreamOpened()
            | StreamExhausted()
            | StreamIdled()
            | StartEvent()
            | TextStartEvent()
            | TextDeltaEvent()
            | TextEndEvent()
            | ThinkingStartEvent()
            | ThinkingDeltaEvent()
            | ThinkingEndEvent()
            | ToolCallStartEvent()
            | ToolCallDeltaEvent()
            | ToolCallEndEvent()
            | DoneEvent()
            | ErrorEvent()
        ):
            _on_stream(t, _expect(phase, Streaming, fact), fact)
        case ToolPrepared() | ToolPartArrived() | ToolExhausted():
            _on_tools(t, _expect(phase, RunningTools, fact).batch, fact)
        case _:
            assert_never(fact)


def _expect(phase: Phase, kind: type[P], fact: Fact) -> P:
    if isinstance(phase, kind):
        return phase
    raise AssertionError(f"fact {type(fact).__name__} is not expected in {phase!r}")


def _crashed(state: RunState, fact: Fact, exc: Exception) -> tuple[RunState, tuple[Command, ...]]:
    """End the run for an exception raised inside `step`: one `run_end(failed)`, then Finish.

    Built directly from the state before the failed step (its half-made commands are dropped),
    with nothing that could raise again.
    """
    if type(state.phase) is Over:
        return state, ()
    error = MuleError(
        "control", f"the run's loop failed on {type(fact).__name__}: {describe(exc)}", exc
    )
    run = state.cfg.run
    n = state.next_id
    terminal = MuleIdentity("terminal", f"terminal:{n}", run)
    return (
        evolve(state, phase=Over(), next_id=n + 1),
        (RunEnd(run=run, terminal=terminal, outcome="failed"), Finish(Failure(error))),
    )


def _begin(t: _Txn) -> None:
    t.cmds.append(RunStart(run=t.cfg.run, messages=t.context[t.state.lead :]))
    _open_turn(t)
    resume = t.cfg.resume
    if resume is not None:
        t.first_turn = False
        _begin_resume(t)
    elif t.cfg.has_steering:
        t.phase = Polling("steering")
        t.cmds.append(ASK_STEERING)
    else:
        _turn_body(t, ())


__all__ = ["EVENT_FACTS", "expects", "initial_state", "step", "stream_update", "update_ids"]
