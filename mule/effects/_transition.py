"""Pi's agent loop as a pure transition: `step(state, fact) -> (state, commands)`.

No clock, randomness or I/O: time arrives inside facts, identity values come from a counter
in the state, and every effect is a command for the interpreter. Commands from one step are
in order; at most the last one asks the world for an answer, so the interpreter can feed
answers back in sequence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from attrs import evolve

from mule.effects._errors import MuleError
from mule.effects._events import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelPrompt,
    RunEnd,
    RunStart,
    RunStatus,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from mule.effects._identity import MuleIdentity, MuleIdentityKind
from mule.effects._protocol import (
    ASK_FOLLOW_UP,
    ASK_STEERING,
    CLOSE_MODEL,
    PULL_MODEL,
    AskRetryAfter,
    AskStop,
    Began,
    CallModel,
    CancelRequested,
    CloseTool,
    Command,
    Fact,
    Finish,
    KeyResolved,
    ListenerFailed,
    MessagesAnswered,
    PrepareTool,
    PullTool,
    ResolveKey,
    RetryAfterAnswered,
    Sleep,
    Slept,
    StartTools,
    StopAnswered,
    StreamExhausted,
    StreamIdled,
    StreamOpened,
    ToolExhausted,
    ToolPartArrived,
    ToolPrepared,
    WorkFailed,
)
from mule.effects._settings import MuleCompletedTurn, MuleRunOutcome
from mule.effects._state import (
    AwaitingRetryAfter,
    AwaitingStop,
    BackingOff,
    Batch,
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
from mule.effects._tools import (
    MuleToolPrepared,
    MuleToolResult,
    ToolCompleted,
    ToolStarted,
)
from mule.pi import ToolArgumentsError, ToolSchemaError, validate_tool_arguments
from mule.pi._content import TextContent, ToolCall
from mule.pi._context import Context
from mule.pi._events import BLOCK_EVENT_TYPES, DoneEvent, ErrorEvent, StartEvent
from mule.pi._messages import ZERO_USAGE, AssistantMessage, Message, ToolResultMessage
from mule.pi._retry import is_retryable_assistant_error, retry_delay_ms

_BLOCK_EVENTS = BLOCK_EVENT_TYPES
INTERRUPTED_UNSAFE = "Tool call was interrupted and is not safe to replay"


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


class _Txn:
    """The changes of one step, applied to a copy of the state at the end (local mutation only)."""

    __slots__ = (
        "clock",
        "cmds",
        "context",
        "first_turn",
        "last_assistant",
        "more",
        "new",
        "next_id",
        "phase",
        "state",
        "turn",
    )

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.phase: Phase = state.phase
        self.next_id = state.next_id
        self.clock = state.clock
        self.context = state.context
        self.new = state.new
        self.turn = state.turn
        self.first_turn = state.first_turn
        self.more = state.more
        self.last_assistant = state.last_assistant
        self.cmds: list[Command] = []

    @property
    def cfg(self) -> RunConfig:
        return self.state.cfg

    def ident(self, kind: MuleIdentityKind, parent: MuleIdentity | None) -> MuleIdentity:
        n = self.next_id
        self.next_id = n + 1
        return MuleIdentity(kind, f"{kind}:{n}", parent)

    def current_turn(self) -> MuleIdentity:
        assert self.turn is not None
        return self.turn

    def commit(self) -> tuple[RunState, tuple[Command, ...]]:
        s = self.state
        return (
            RunState(
                cfg=s.cfg,
                phase=self.phase,
                next_id=self.next_id,
                clock=self.clock,
                context=self.context,
                new=self.new,
                turn=self.turn,
                first_turn=self.first_turn,
                more=self.more,
                last_assistant=self.last_assistant,
            ),
            tuple(self.cmds),
        )


# -- run and turn lifecycle -------------------------------------------------------------------


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


def _open_turn(t: _Txn) -> None:
    t.turn = t.ident("turn", t.cfg.run)
    t.cmds.append(TurnStart(run=t.cfg.run, turn=t.turn))


def _turn_body(t: _Txn, pending: Sequence[Message]) -> None:
    """One pass of Pi's inner loop: open a turn (after the first), inject, call the model."""
    if not t.first_turn:
        _open_turn(t)
    t.first_turn = False
    turn = t.current_turn()
    for m in pending:
        mid = t.ident("message", turn)
        t.cmds.append(MessageStart(run=t.cfg.run, turn=turn, message=mid, value=m))
        t.cmds.append(MessageEnd(run=t.cfg.run, turn=turn, message=mid, value=m))
    if pending:
        t.context += tuple(pending)
        t.new += tuple(pending)
    _attempt(t, 1)


def _on_poll(t: _Txn, phase: Polling, messages: tuple[Message, ...]) -> None:
    if phase.kind == "steering":
        if t.first_turn or messages or t.more:
            _turn_body(t, messages)
        elif t.cfg.has_follow_up:
            t.phase = Polling("follow_up")
            t.cmds.append(ASK_FOLLOW_UP)
        else:
            _complete(t)
    elif messages:
        _turn_body(t, messages)
    else:
        _complete(t)


def _end_turn(
    t: _Txn, message: AssistantMessage, results: tuple[ToolResultMessage, ...], more: bool
) -> None:
    t.cmds.append(
        TurnEnd(run=t.cfg.run, turn=t.current_turn(), message=message, tool_results=results)
    )
    if t.cfg.has_stop:
        t.phase = AwaitingStop(more)
        turn = MuleCompletedTurn(message, results, t.context, t.new)
        t.cmds.append(AskStop(turn))
    else:
        _after_stop(t, more)


def _after_stop(t: _Txn, more: bool) -> None:
    t.more = more
    if t.cfg.has_steering:
        t.phase = Polling("steering")
        t.cmds.append(ASK_STEERING)
    elif more:
        _turn_body(t, ())
    elif t.cfg.has_follow_up:
        t.phase = Polling("follow_up")
        t.cmds.append(ASK_FOLLOW_UP)
    else:
        _complete(t)


def _finish(t: _Txn, outcome: MuleRunOutcome | None, error: MuleError | None) -> None:
    t.phase = Over()
    t.cmds.append(Finish(outcome, error))


def _terminal(t: _Txn, status: RunStatus) -> MuleIdentity:
    terminal = t.ident("terminal", t.cfg.run)
    t.cmds.append(RunEnd(run=t.cfg.run, terminal=terminal, outcome=status))
    return terminal


def _complete(t: _Txn) -> None:
    terminal = _terminal(t, "completed")
    message = t.last_assistant  # a resumed run sets it to resume.message before its turn ends
    assert message is not None
    outcome = MuleRunOutcome(
        status="completed", run=t.cfg.run, terminal=terminal, message=message, messages=t.new
    )
    _finish(t, outcome, None)


def _fail(t: _Txn, error: MuleError) -> None:
    _terminal(t, "failed")
    _finish(t, None, error)


def _cancel(t: _Txn, fact: CancelRequested) -> None:
    t.clock = max(t.clock, fact.now_ms)
    terminal = _terminal(t, "cancelled")
    outcome = MuleRunOutcome(
        status="cancelled",
        run=t.cfg.run,
        terminal=terminal,
        message=_synthetic(t, "aborted", fact.reason),
        messages=t.new,
    )
    _finish(t, outcome, None)


def _synthetic(t: _Txn, stop: str, reason: str) -> AssistantMessage:
    """Pi's Agent-style stand-in message for a run that ended without one."""
    m = t.cfg.model
    return AssistantMessage(
        content=(TextContent(""),),
        api=m.api,
        provider=m.provider,
        model=m.id,
        usage=ZERO_USAGE,
        stop_reason="aborted" if stop == "aborted" else "error",
        timestamp=t.clock,
        error_message=reason,
    )


# -- the model attempt ------------------------------------------------------------------------


def _attempt(t: _Txn, attempt: int) -> None:
    if t.cfg.has_key_hook:
        t.phase = ResolvingKey(attempt)
        t.cmds.append(ResolveKey(t.cfg.model.provider))
    else:
        _call_model(t, attempt, None)


def _call_model(t: _Txn, attempt: int, key: str | None) -> None:
    cfg = t.cfg
    turn = t.current_turn()
    t.cmds.append(
        ModelPrompt(run=cfg.run, turn=turn, attempt=attempt, system_prompt=cfg.system_prompt)
    )
    options = cfg.stream_options
    if key:
        options = evolve(options, api_key=key)
    context = Context(messages=t.context, system_prompt=cfg.system_prompt, tools=cfg.descriptors)
    t.phase = Streaming(attempt, turn, t.ident("message", turn), opened=False, started=False)
    t.cmds.append(CallModel(context, options))


def _on_stream(t: _Txn, phase: Streaming, fact: Fact) -> None:
    run, turn, mid = t.cfg.run, phase.turn, phase.message
    kind = type(fact)
    if kind is StreamOpened:
        t.phase = evolve(phase, opened=True)
        t.cmds.append(PULL_MODEL)
    elif isinstance(fact, StartEvent):
        if not phase.started:
            t.phase = evolve(phase, started=True)
            value = fact.partial
            t.cmds.append(MessageStart(run=run, turn=turn, message=mid, value=value))
        t.cmds.append(PULL_MODEL)
    elif kind in _BLOCK_EVENTS:
        t.cmds.append(PULL_MODEL)  # a block event before `start` is ignored, as in Pi
    elif isinstance(fact, DoneEvent | ErrorEvent):
        final = fact.message if isinstance(fact, DoneEvent) else fact.error
        given: object = final  # a hand-written stream may push anything
        if type(given) is not AssistantMessage:
            t.cmds.append(CLOSE_MODEL)
            _fail(
                t,
                MuleError(
                    "model",
                    "model stream ended with a terminal that is not an assistant message",
                    final,
                ),
            )
            return
        _attempt_settled(t, phase, final)
    elif isinstance(fact, StreamIdled):
        t.clock = max(t.clock, fact.now_ms)
        text = f"Model stream idle timeout: no provider event for {_ms(t.cfg.idle_timeout_ms)} ms"
        last = fact.last
        if last is None:
            m = t.cfg.model
            final = AssistantMessage(
                content=(),
                api=m.api,
                provider=m.provider,
                model=m.id,
                usage=ZERO_USAGE,
                stop_reason="error",
                timestamp=t.clock,
                error_message=text,
            )
        else:
            final = evolve(last, stop_reason="error", error_message=text, timestamp=t.clock)
        _attempt_settled(t, phase, final)
    elif kind is StreamExhausted:
        t.cmds.append(CLOSE_MODEL)
        _fail(t, MuleError("model", "model stream ended without a done or error event"))
    elif isinstance(fact, WorkFailed):
        _fail(t, fact.error)
    else:
        raise AssertionError(f"fact {kind.__name__} is not expected while streaming")


def _ms(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if float(value).is_integer() else str(value)


def _attempt_settled(t: _Txn, phase: Streaming, final: AssistantMessage) -> None:
    run, turn, mid = t.cfg.run, phase.turn, phase.message
    if not phase.started:
        t.cmds.append(MessageStart(run=run, turn=turn, message=mid, value=final))
    t.cmds.append(MessageEnd(run=run, turn=turn, message=mid, value=final))
    t.cmds.append(CLOSE_MODEL)
    stop = final.stop_reason
    policy = t.cfg.retry
    if stop == "error" and policy is not None and policy.enabled:
        retries_done = phase.attempt - 1
        if retries_done < policy.max_retries and is_retryable_assistant_error(final, policy):
            backoff = retry_delay_ms(policy, retries_done + 1)
            if t.cfg.has_retry_after:
                t.phase = AwaitingRetryAfter(phase.attempt, backoff)
                t.cmds.append(AskRetryAfter(final))
            else:
                t.phase = BackingOff(phase.attempt)
                t.cmds.append(Sleep(backoff))
            return
    t.context += (final,)
    t.new += (final,)
    t.last_assistant = final
    if stop == "error" or stop == "aborted":
        t.cmds.append(TurnEnd(run=run, turn=turn, message=final, tool_results=()))
        text = final.error_message or f"model response ended with stopReason {stop}"
        _fail(t, MuleError("model", text, final))
        return
    calls = tuple(b for b in final.content if type(b) is ToolCall)
    if calls:
        _start_batch(t, final, mid, calls)
    else:
        _end_turn(t, final, (), more=False)


# -- tools ------------------------------------------------------------------------------------


def _error_result(text: str, terminate: bool | None = None) -> MuleToolResult:
    return MuleToolResult(
        content=(TextContent(text),), details={}, is_error=True, terminate=terminate
    )


def _start_batch(
    t: _Txn, message: AssistantMessage, message_id: MuleIdentity, calls: tuple[ToolCall, ...]
) -> None:
    n = len(calls)
    batch = Batch(
        message=message,
        calls=calls,
        ids=tuple(t.ident("tool_call", message_id) for _ in calls),
        todo=tuple(range(n)),
        results=(None,) * n,
        messages=(None,) * n,
        sequential=_any_sequential(t, calls),
        cursor=0,
        prepared=(),
        running=0,
    )
    _advance(t, batch)


def _begin_resume(t: _Txn) -> None:
    resume = t.cfg.resume
    assert resume is not None
    message = resume.message
    mid = t.ident("message", t.current_turn())
    t.context += (message,)
    t.last_assistant = message
    calls = tuple(b for b in message.content if type(b) is ToolCall)
    if not calls:
        _end_turn(t, message, (), more=False)
        return
    checkpoints = {c.call.id: c for c in resume.tools}
    results: list[MuleToolResult | None] = []
    messages: list[ToolResultMessage | None] = []
    todo: list[int] = []
    for i, call in enumerate(calls):
        cp = checkpoints.get(call.id)
        if type(cp) is ToolCompleted:
            results.append(cp.result)
            messages.append(cp.message)
        elif type(cp) is ToolStarted and cp.replay == "unsafe":
            results.append(_error_result(INTERRUPTED_UNSAFE))
            messages.append(None)
        else:
            results.append(None)
            messages.append(None)
            todo.append(i)
    batch = Batch(
        message=message,
        calls=calls,
        ids=tuple(t.ident("tool_call", mid) for _ in calls),
        todo=tuple(todo),
        results=tuple(results),
        messages=tuple(messages),
        sequential=_any_sequential(t, calls),
        cursor=0,
        prepared=(),
        running=0,
    )
    _advance(t, batch)


def _advance(t: _Txn, batch: Batch) -> None:
    """Move a batch forward until it must wait for the world, or it is complete."""
    if batch.sequential:
        _advance_sequential(t, batch)
        return
    # Parallel pass 1: start and prepare each call in source order.
    while batch.cursor < len(batch.todo):
        i = batch.todo[batch.cursor]
        immediate = _start_call(t, batch, i)
        if immediate is None:
            t.phase = RunningTools(batch)
            t.cmds.append(PrepareTool(i, batch.calls[i]))
            return
        batch = _settle(t, batch, i, immediate)
        batch = evolve(batch, cursor=batch.cursor + 1)
    # Pass 2: only now do the prepared calls execute, all at once.
    if batch.prepared:
        batch = evolve(batch, running=len(batch.prepared))
        t.phase = RunningTools(batch)
        t.cmds.append(StartTools(batch.prepared))
        return
    _result_phase(t, batch)


def _any_sequential(t: _Txn, calls: tuple[ToolCall, ...]) -> bool:
    """Pi's rule: the whole batch is sequential if the run says so or any called tool does."""
    if t.cfg.sequential:
        return True
    tools = t.cfg.tools
    for call in calls:
        tool = tools.get(call.name)
        if tool is not None and tool.execution_mode == "sequential":
            return True
    return False


def _advance_sequential(t: _Txn, batch: Batch) -> None:
    n = len(batch.calls)
    while batch.cursor < n:
        i = batch.cursor
        if i not in batch.todo:
            if batch.messages[i] is None:
                batch = _emit_result_message(t, batch, i)
            batch = evolve(batch, cursor=i + 1)
            continue
        immediate = _start_call(t, batch, i)
        if immediate is None:
            t.phase = RunningTools(batch)
            t.cmds.append(PrepareTool(i, batch.calls[i]))
            return
        batch = _settle(t, batch, i, immediate)
        batch = _emit_result_message(t, batch, i)
        batch = evolve(batch, cursor=i + 1)
    _finish_batch(t, batch)


def _start_call(t: _Txn, batch: Batch, i: int) -> MuleToolResult | None:
    """Emit the call's start; return an immediate error result, or None when it needs prepare."""
    call = batch.calls[i]
    tool = t.cfg.tools.get(call.name)
    t.cmds.append(
        ToolExecutionStart(
            run=t.cfg.run,
            turn=t.current_turn(),
            tool_call=batch.ids[i],
            call=call,
            replay=tool.replay if tool is not None else "unsafe",
        )
    )
    if tool is None:
        return _error_result(f"Tool {call.name} not found")
    try:
        validate_tool_arguments(tool.descriptor, call)
    except ToolArgumentsError as exc:
        return _error_result(exc.text)
    except ToolSchemaError as exc:  # checked before run_start; a schema can still fail on a value
        return _error_result(str(exc))
    return None


def _settle(t: _Txn, batch: Batch, i: int, result: MuleToolResult) -> Batch:
    """Record a call's final result and emit its end."""
    t.cmds.append(
        ToolExecutionEnd(
            run=t.cfg.run,
            turn=t.current_turn(),
            tool_call=batch.ids[i],
            call=batch.calls[i],
            result=result,
        )
    )
    results = list(batch.results)
    results[i] = result
    return evolve(batch, results=tuple(results))


def _on_tools(t: _Txn, batch: Batch, fact: Fact) -> None:
    kind = type(fact)
    sequential = batch.sequential
    if isinstance(fact, ToolPrepared):
        t.clock = max(t.clock, fact.now_ms)
        i = fact.index
        prep = fact.preparation
        if isinstance(prep, MuleToolPrepared):
            if sequential:
                t.phase = RunningTools(evolve(batch, running=1))
                t.cmds.append(StartTools((i,)))
                return
            batch = evolve(batch, prepared=(*batch.prepared, i), cursor=batch.cursor + 1)
        else:
            result = _error_result(prep.message, prep.terminate)
            batch = _settle(t, batch, i, result)
            if sequential:
                batch = _emit_result_message(t, batch, i)
            batch = evolve(batch, cursor=batch.cursor + 1)
        _advance(t, batch)
    elif isinstance(fact, ToolPartArrived):
        t.clock = max(t.clock, fact.now_ms)
        i = fact.index
        part = fact.part
        if part.type == "update":
            t.cmds.append(
                ToolExecutionUpdate(
                    run=t.cfg.run,
                    turn=t.current_turn(),
                    tool_call=batch.ids[i],
                    call=batch.calls[i],
                    result=part.result,
                )
            )
            t.cmds.append(PullTool(i))
            t.phase = RunningTools(batch)
            return
        batch = _settle(t, batch, i, part.result)
        t.cmds.append(CloseTool(i))
        batch = evolve(batch, running=batch.running - 1)
        if sequential:
            batch = _emit_result_message(t, batch, i)
            batch = evolve(batch, cursor=batch.cursor + 1)
            _advance(t, batch)
        elif batch.running == 0:
            _result_phase(t, batch)
        else:
            t.phase = RunningTools(batch)
    elif isinstance(fact, ToolExhausted):
        name = batch.calls[fact.index].name
        _fail(t, MuleError("tool", f"tool {name} finished without a result part"))
    elif isinstance(fact, WorkFailed):
        _fail(t, fact.error)
    else:
        raise AssertionError(f"fact {kind.__name__} is not expected while tools run")


def _emit_result_message(t: _Txn, batch: Batch, i: int) -> Batch:
    call, result = batch.calls[i], batch.results[i]
    assert result is not None
    message = ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=result.content,
        is_error=result.is_error,
        timestamp=t.clock,
        details=result.details,
        usage=result.usage,
    )
    rid = t.ident("tool_result", batch.ids[i])
    turn = t.current_turn()
    t.cmds.append(MessageStart(run=t.cfg.run, turn=turn, message=rid, value=message))
    t.cmds.append(MessageEnd(run=t.cfg.run, turn=turn, message=rid, value=message))
    t.new += (message,)
    messages = list(batch.messages)
    messages[i] = message
    return evolve(batch, messages=tuple(messages))


def _result_phase(t: _Txn, batch: Batch) -> None:
    for i in range(len(batch.calls)):
        if batch.messages[i] is None:
            batch = _emit_result_message(t, batch, i)
    _finish_batch(t, batch)


def _finish_batch(t: _Txn, batch: Batch) -> None:
    messages = tuple(m for m in batch.messages if m is not None)
    t.context += messages
    terminate = bool(batch.results) and all(
        r is not None and r.terminate is True for r in batch.results
    )
    _end_turn(t, batch.message, messages, more=not terminate)


__all__ = ["INTERRUPTED_UNSAFE", "initial_state", "step"]
