"""Pi's agent loop as a pure transition: `step(state, fact) -> (state, commands)`.

No clock, randomness or I/O: time arrives inside facts, identity values come from a counter
in the state, and every effect is a command for the interpreter. Commands from one step are
in order; at most the last one asks the world for an answer, so the interpreter can feed
answers back in sequence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mule.effects._batch import _begin_resume, _on_tools
from mule.effects._events import (
    MessageUpdate,
    RunStart,
)
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
    WorkFailed,
)
from mule.effects._state import (
    AwaitingRetryAfter,
    AwaitingStop,
    BackingOff,
    NotStarted,
    Over,
    Polling,
    ResolvingKey,
    RunConfig,
    RunningTools,
    RunState,
    Streaming,
)
from mule.effects._streaming import _on_stream
from mule.effects._turns import _after_stop, _attempt, _call_model, _on_poll, _open_turn, _turn_body
from mule.effects._txn import _cancel, _complete, _fail, _Txn
from mule.pi._events import BLOCK_EVENT_TYPES
from mule.pi._messages import Message

_BLOCK_EVENTS = BLOCK_EVENT_TYPES


def initial_state(cfg: RunConfig, messages: Sequence[Message]) -> RunState:
    """Return the state of a run that has not begun; feed it `Began` first."""
    return RunState(cfg=cfg, phase=NotStarted(), context=tuple(messages))


def step(state: RunState, fact: Fact) -> tuple[RunState, tuple[Command, ...]]:
    """Advance a run by one fact."""
    phase = state.phase
    fact_type = type(fact)
    # The hot path: a streamed block event only becomes a message_update.
    if fact_type in _BLOCK_EVENTS and type(phase) is Streaming and phase.started:
        update = MessageUpdate(
            state.cfg.run,
            phase.turn,
            phase.message,
            fact._partial,  # type: ignore[union-attr]  # the lazy snapshot, not materialised
            fact,  # type: ignore[arg-type]
        )
        return state, (update, PULL_MODEL)
    if type(phase) is Over:
        if isinstance(fact, ListenerFailed):
            # Only `run_end` precedes the Finish of its step: its listener failed, so the run
            # fails with that error instead (the interpreter drops the pending Finish).
            return state, (Finish(None, fact.error),)
        if not isinstance(fact, CancelRequested):
            return state, ()
        # Decided but not delivered: an abort noticed before `run_end` went out still wins.
    t = _Txn(state)
    if isinstance(fact, CancelRequested):
        _cancel(t, fact)
    elif isinstance(fact, ListenerFailed):
        t.phase = Over()
        t.cmds.append(Finish(None, fact.error))
    elif isinstance(fact, Began):
        t.clock = max(t.clock, fact.now_ms)
        _begin(t)
    elif type(phase) is Streaming:
        _on_stream(t, phase, fact)
    elif type(phase) is RunningTools:
        _on_tools(t, phase.batch, fact)
    elif isinstance(fact, WorkFailed):
        _fail(t, fact.error)
    elif isinstance(phase, ResolvingKey) and isinstance(fact, KeyResolved):
        _call_model(t, phase.attempt, fact.key)
    elif isinstance(phase, Polling) and isinstance(fact, MessagesAnswered):
        _on_poll(t, phase, fact.messages)
    elif isinstance(phase, AwaitingStop) and isinstance(fact, StopAnswered):
        if fact.stop:
            _complete(t)
        else:
            _after_stop(t, phase.more)
    elif isinstance(phase, AwaitingRetryAfter) and isinstance(fact, RetryAfterAnswered):
        ms = fact.ms
        delay = phase.backoff_ms
        if ms is not None and math.isfinite(ms) and ms >= 0:
            delay = max(delay, ms)
        t.phase = BackingOff(phase.attempt)
        t.cmds.append(Sleep(delay))
    elif type(phase) is BackingOff and fact_type is Slept:
        _attempt(t, phase.attempt + 1)
    else:
        raise AssertionError(f"fact {fact_type.__name__} is not expected in {phase!r}")
    return t.commit()


def _begin(t: _Txn) -> None:
    t.cmds.append(RunStart(run=t.cfg.run))
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


__all__ = ["initial_state", "step"]
