"""Pi's agent loop as a pure transition: `step(state, fact) -> (state, commands)`.

No clock, randomness or I/O: time arrives inside facts, identity values come from a counter
in the state, and every effect is a command for the interpreter. Commands from one step are
in order; at most the last one asks the world for an answer, so the interpreter can feed
answers back in sequence. `RULES` maps each (phase type, fact type) the machine accepts to
its handler: it is the dispatch, and `expects(phase)` is read from it.

`step` is total: whatever is raised inside it (a tool's schema gate on hostile arguments,
say) ends the run as a typed `MuleError(control)` with its one `run_end(failed)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeAlias

from attrs import evolve
from returns.result import Failure

from mule.effects._batch import begin_resume, on_tools
from mule.effects._errors import MuleError, describe
from mule.effects._identity import MuleIdentity
from mule.effects._lifecycle import RunEnd, RunStart
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
    StreamBatch,
    StreamExhausted,
    StreamIdled,
    StreamOpened,
    ToolExhausted,
    ToolFact,
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
from mule.effects._streaming import on_stream, stream_updates
from mule.effects._turns import (
    call_model,
    on_poll,
    open_turn,
    start_attempt,
    turn_body,
    turn_ended,
)
from mule.effects._txn import Txn, cancel_run, fail_run
from mule.pi import (
    BLOCK_EVENT_TYPES,
    DoneEvent,
    ErrorEvent,
    Message,
    StartEvent,
    SystemMessage,
    create_initial_system_message,
)

_BLOCK_EVENTS = BLOCK_EVENT_TYPES


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


def step(state: RunState, fact: Fact) -> tuple[RunState, tuple[Command, ...]]:
    """Advance a run by one fact; never raises (a failure inside ends the run typed).

    The rule for `(type(state.phase), type(fact))` in `RULES` decides; a fact no rule
    expects ends the run as `MuleError(control)`, except once it is `Over` (ignored).
    """
    try:
        phase = state.phase
        # The hot path, the rules' own answer for a read of deltas (block events of a started
        # attempt): their message_updates and the next pull, the state unchanged.
        kind = type(fact)
        if kind is StreamBatch or kind in _BLOCK_EVENTS:
            events = fact.events if kind is StreamBatch else (fact,)  # type: ignore[union-attr]
            updates = stream_updates(state.cfg.run, phase, events)
            if updates is not None:
                return state, (*updates, PULL_MODEL)
        rule = RULES.get((type(phase), type(fact)))
        if rule is None:
            if type(phase) is Over:
                return state, ()
            raise AssertionError(f"fact {type(fact).__name__} is not expected in {phase!r}")
        t = Txn(state)
        rule(t, phase, fact)
        return t.commit()
    except Exception as exc:
        return _crashed(state, fact, exc)


# -- the rules: (phase, fact) -> handler ----------------------------------------------------
# A handler changes the step's transaction `t`; its `phase` is the rule's phase type.
Handler: TypeAlias = Callable[[Txn, Any, Any], None]


def _on_began(t: Txn, phase: NotStarted, fact: Began) -> None:
    t.clock = max(t.clock, fact.now_ms)
    _begin(t)


def _on_key(t: Txn, phase: ResolvingKey, fact: KeyResolved) -> None:
    call_model(t, phase.attempt, fact.key)


def _on_messages(t: Txn, phase: Polling, fact: MessagesAnswered) -> None:
    on_poll(t, phase, fact.messages)


def _on_stop(t: Txn, phase: AwaitingStop, fact: StopAnswered) -> None:
    turn_ended(t, phase.message, phase.results, phase.more, stop=fact.stop)


def _on_retry_after(t: Txn, phase: AwaitingRetryAfter, fact: RetryAfterAnswered) -> None:
    ms = fact.ms
    delay = phase.backoff_ms
    if ms is not None and math.isfinite(ms) and ms >= 0:
        delay = max(delay, ms)
    if t.cfg.retry is not None:  # Pi's maxAgentDelayMs bounds every wait, this one too
        delay = min(delay, t.cfg.retry.max_agent_delay_ms)
    t.phase = BackingOff(phase.attempt)
    t.cmds.append(Sleep(delay))


def _on_slept(t: Txn, phase: BackingOff, fact: Slept) -> None:
    start_attempt(t, phase.attempt + 1)


def _on_tool_fact(t: Txn, phase: RunningTools, fact: ToolFact) -> None:
    on_tools(t, phase, fact)


def _on_cancel(t: Txn, phase: Phase, fact: CancelRequested) -> None:
    cancel_run(t, fact)


def _on_listener_failed(t: Txn, phase: Phase, fact: ListenerFailed) -> None:
    # In `Over` only `run_end` precedes the Finish of its step: its listener failed, so the
    # run fails with that error instead (the interpreter drops the pending Finish).
    t.phase = Over()
    t.cmds.append(Finish(Failure(fact.error)))


def _on_work_failed(t: Txn, phase: Phase, fact: WorkFailed) -> None:
    fail_run(t, fact.error)


EVENT_FACTS: tuple[type[Fact], ...] = (StartEvent, DoneEvent, ErrorEvent, *BLOCK_EVENT_TYPES)
STREAM_FACTS: tuple[type[Fact], ...] = (
    StreamOpened,
    StreamBatch,
    StreamExhausted,
    StreamIdled,
    *EVENT_FACTS,
)
TOOL_FACTS: tuple[type[Fact], ...] = (ToolPrepared, ToolPartArrived, ToolExhausted)
PHASES: tuple[type[Phase], ...] = (
    NotStarted,
    Polling,
    ResolvingKey,
    Streaming,
    AwaitingRetryAfter,
    BackingOff,
    RunningTools,
    AwaitingStop,
    Over,
)
# Facts any running phase takes; `Over` takes a listener failure (of `run_end`) and a cancel
# decided before `run_end` went out (it still wins). Anything else in `Over` is ignored.
_ANY_PHASE: dict[type[Fact], Handler] = {
    CancelRequested: _on_cancel,
    ListenerFailed: _on_listener_failed,
    WorkFailed: _on_work_failed,
}

RULES: Mapping[tuple[type[Phase], type[Fact]], Handler] = MappingProxyType(
    {
        (NotStarted, Began): _on_began,
        (Polling, MessagesAnswered): _on_messages,
        (ResolvingKey, KeyResolved): _on_key,
        **{(Streaming, f): on_stream for f in STREAM_FACTS},
        (AwaitingRetryAfter, RetryAfterAnswered): _on_retry_after,
        (BackingOff, Slept): _on_slept,
        **{(RunningTools, f): _on_tool_fact for f in TOOL_FACTS},
        (AwaitingStop, StopAnswered): _on_stop,
        **{(p, f): h for p in PHASES if p is not Over for f, h in _ANY_PHASE.items()},
        (Over, ListenerFailed): _on_listener_failed,
        (Over, CancelRequested): _on_cancel,
    }
)
"""The machine's dispatch: the handler of each fact a phase takes (the phase diagram)."""


def expects(phase: type[Phase]) -> frozenset[type[Fact]]:
    """Return the facts `phase` takes (derived from `RULES`)."""
    return frozenset(f for p, f in RULES if p is phase)


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


def _begin(t: Txn) -> None:
    t.cmds.append(RunStart(run=t.cfg.run, messages=t.context[t.state.lead :]))
    open_turn(t)
    resume = t.cfg.resume
    if resume is not None:
        t.first_turn = False
        begin_resume(t)
    elif t.cfg.has_steering:
        t.phase = Polling("steering")
        t.cmds.append(ASK_STEERING)
    else:
        turn_body(t, ())


__all__ = [
    "EVENT_FACTS",
    "PHASES",
    "RULES",
    "expects",
    "initial_state",
    "step",
]
