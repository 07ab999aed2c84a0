"""A tool batch: start, prepare and execute an assistant message's calls, then its results."""

from __future__ import annotations

from typing import TypeVar, assert_never

from attrs import evolve

from mule.effects._errors import MuleError
from mule.effects._identity import MuleIdentity
from mule.effects._lifecycle import (
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from mule.effects._protocol import (
    CloseTool,
    PrepareTool,
    PullTool,
    StartTools,
    ToolExhausted,
    ToolFact,
    ToolPartArrived,
    ToolPrepared,
)
from mule.effects._state import RunningTools, ToolBatch
from mule.effects._tools import (
    MuleToolPrepared,
    MuleToolResult,
    ToolCompleted,
    ToolStarted,
)
from mule.effects._turns import end_turn
from mule.effects._txn import Txn, error_result, fail_run
from mule.pi import (
    AssistantMessage,
    ToolArgumentsError,
    ToolCall,
    ToolResultMessage,
    ToolSchemaError,
)

_T = TypeVar("_T")

INTERRUPTED_UNSAFE = "Tool call was interrupted and is not safe to replay"


class _Draft:
    """A tool batch's progress within one step, changed in place; `phase()` freezes it.

    A step may start, settle and emit several calls and move the cursor: the state gets one
    `RunningTools` where the step waits for the world, not a copy per change (and none when
    the batch ends in the step). The per-call tuples are replaced only where a call changes
    (`_put`), so the ones a step leaves alone pass to the next phase as they are.
    """

    __slots__ = (
        "batch",
        "cursor",
        "durations",
        "messages",
        "prepared",
        "results",
        "running",
        "started_ms",
    )

    def __init__(
        self,
        batch: ToolBatch,
        results: tuple[MuleToolResult | None, ...],
        messages: tuple[ToolResultMessage | None, ...],
        durations: tuple[int | None, ...],
        cursor: int = 0,
        prepared: tuple[int, ...] = (),
        running: int = 0,
        started_ms: int = 0,
    ) -> None:
        self.batch = batch
        self.results = results
        self.messages = messages
        self.durations = durations
        self.cursor = cursor
        self.prepared = prepared
        self.running = running
        self.started_ms = started_ms

    @classmethod
    def of(cls, phase: RunningTools) -> _Draft:
        """Return a draft of the batch `phase` is running."""
        return cls(
            phase.batch,
            phase.results,
            phase.messages,
            phase.durations,
            phase.cursor,
            phase.prepared,
            phase.running,
            phase.started_ms,
        )

    def phase(self) -> RunningTools:
        """Return the phase of the batch as far as it has come."""
        return RunningTools(
            batch=self.batch,
            results=self.results,
            messages=self.messages,
            durations=self.durations,
            cursor=self.cursor,
            prepared=self.prepared,
            running=self.running,
            started_ms=self.started_ms,
        )


def start_batch(
    t: Txn, message: AssistantMessage, message_id: MuleIdentity, calls: tuple[ToolCall, ...]
) -> None:
    n = len(calls)
    batch = ToolBatch(
        message=message,
        calls=calls,
        ids=tuple([t.ident("tool_call", message_id) for _ in calls]),
        todo=tuple(range(n)),
        sequential=_any_sequential(t, calls),
    )
    _advance(t, _Draft(batch, (None,) * n, (None,) * n, (None,) * n))


def truncated_call_text(name: str) -> str:
    """Return the error text of a call from a response cut at the output-token limit."""
    return (
        f'Tool call "{name}" was not executed: the response hit the output token limit, so its'
        " arguments may be truncated. Re-issue the tool call with complete arguments."
    )


def fail_truncated_calls(
    t: Txn, message: AssistantMessage, message_id: MuleIdentity, calls: tuple[ToolCall, ...]
) -> None:
    """Settle a `length`-stopped response's calls unrun, then end the turn (Pi 1.6.0).

    Their arguments may have been cut off, so none is prepared, validated or executed: each
    gets an error result, and the run goes on to the next turn. Each call's start, end and
    result message come in turn, as Pi's sequential order has them.
    """
    run, turn = t.cfg.run, t.current_turn()
    messages: list[ToolResultMessage] = []
    for call in calls:
        cid = t.ident("tool_call", message_id)
        tool = t.cfg.tools.get(call.name)
        replay = tool.replay if tool is not None else "unsafe"
        result = error_result(truncated_call_text(call.name))
        t.cmds.append(
            ToolExecutionStart(run=run, turn=turn, tool_call=cid, call=call, replay=replay)
        )
        t.cmds.append(ToolExecutionEnd(run=run, turn=turn, tool_call=cid, call=call, result=result))
        made = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=result.content,
            is_error=True,
            timestamp=t.clock,
            details=result.details,
            usage=None,
            duration_ms=None,
        )
        rid = t.ident("tool_result", cid)
        t.cmds.append(MessageStart(run=run, turn=turn, message=rid, value=made))
        t.cmds.append(MessageEnd(run=run, turn=turn, message=rid, value=made))
        t.new += (made,)
        messages.append(made)
    t.context += tuple(messages)
    end_turn(t, message, tuple(messages), more=True)


def begin_resume(t: Txn) -> None:
    resume = t.cfg.resume
    assert resume is not None
    message = resume.message
    mid = t.ident("message", t.current_turn())
    t.context += (message,)
    t.last_assistant = message
    calls = tuple(b for b in message.content if type(b) is ToolCall)
    if not calls:
        end_turn(t, message, (), more=False)
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
        elif message.stop_reason == "length":
            # Cut at the output-token limit: no call of it ever runs (Pi 1.6.0).
            results.append(error_result(truncated_call_text(call.name)))
            messages.append(None)
        elif type(cp) is ToolStarted and cp.replay == "unsafe":
            results.append(error_result(INTERRUPTED_UNSAFE))
            messages.append(None)
        else:
            results.append(None)
            messages.append(None)
            todo.append(i)
    batch = ToolBatch(
        message=message,
        calls=calls,
        ids=tuple(t.ident("tool_call", mid) for _ in calls),
        todo=tuple(todo),
        sequential=_any_sequential(t, calls),
    )
    _advance(t, _Draft(batch, tuple(results), tuple(messages), (None,) * len(calls)))


def _advance(t: Txn, d: _Draft) -> None:
    """Move a batch forward until it must wait for the world, or it is complete."""
    if d.batch.sequential:
        _advance_sequential(t, d)
        return
    # Parallel pass 1: start and prepare each call in source order.
    todo = d.batch.todo
    while d.cursor < len(todo):
        i = todo[d.cursor]
        gated = _start_call(t, d.batch, i)
        if type(gated) is ToolCall:
            _wait(t, d, PrepareTool(i, gated))
            return
        _settle(t, d, i, gated)
        d.cursor += 1
    # Pass 2: only now do the prepared calls execute, all at once.
    if d.prepared:
        d.running = len(d.prepared)
        d.started_ms = t.clock
        _wait(t, d, StartTools(d.prepared))
        return
    _result_phase(t, d)


def _wait(t: Txn, d: _Draft, cmd: PrepareTool | StartTools) -> None:
    """End the step waiting for `cmd`'s answer, the batch's progress its phase."""
    t.phase = d.phase()
    t.cmds.append(cmd)


def _any_sequential(t: Txn, calls: tuple[ToolCall, ...]) -> bool:
    """Pi's rule: the whole batch is sequential if the run says so or any called tool does."""
    if t.cfg.sequential:
        return True
    tools = t.cfg.tools
    for call in calls:
        tool = tools.get(call.name)
        if tool is not None and tool.execution_mode == "sequential":
            return True
    return False


def _advance_sequential(t: Txn, d: _Draft) -> None:
    batch = d.batch
    n = len(batch.calls)
    while d.cursor < n:
        i = d.cursor
        if i not in batch.todo:
            if d.messages[i] is None:
                _emit_result_message(t, d, i)
            d.cursor = i + 1
            continue
        gated = _start_call(t, batch, i)
        if type(gated) is ToolCall:
            _wait(t, d, PrepareTool(i, gated))
            return
        _settle(t, d, i, gated)
        _emit_result_message(t, d, i)
        d.cursor = i + 1
    _finish_batch(t, d)


def _start_call(t: Txn, batch: ToolBatch, i: int) -> MuleToolResult | ToolCall:
    """Emit the call's start; return an immediate error result, or the call to prepare.

    The call to prepare carries the gate's coerced arguments (what Pi hands its tool); the
    events keep the model's call as it came.
    """
    call = batch.calls[i]
    tool = t.cfg.tools.get(call.name)
    replay = tool.replay if tool is not None else "unsafe"
    t.cmds.append(
        ToolExecutionStart(
            run=t.cfg.run, turn=t.current_turn(), tool_call=batch.ids[i], call=call, replay=replay
        )
    )
    if tool is None:
        return error_result(f"Tool {call.name} not found")
    try:
        arguments = t.cfg.validators[call.name].validate(call)
    except ToolArgumentsError as exc:
        return error_result(exc.text)
    except ToolSchemaError as exc:  # checked before run_start; a schema can still fail on a value
        return error_result(str(exc))
    return evolve(call, arguments=arguments)


def _settle(
    t: Txn, d: _Draft, i: int, result: MuleToolResult, duration_ms: int | None = None
) -> None:
    """Record a call's final result and emit its end.

    `duration_ms` is the execution's time, for a call that ran (Pi 1.6.0's `durationMs`).
    """
    batch = d.batch
    end = ToolExecutionEnd(
        run=t.cfg.run,
        turn=t.current_turn(),
        tool_call=batch.ids[i],
        call=batch.calls[i],
        result=result,
        duration_ms=duration_ms,
    )
    t.cmds.append(end)
    d.results = _put(d.results, i, result)
    if duration_ms is not None:
        d.durations = _put(d.durations, i, duration_ms)


def on_tools(t: Txn, phase: RunningTools, fact: ToolFact) -> None:
    batch = phase.batch
    match fact:
        case ToolPrepared():
            t.clock = max(t.clock, fact.now_ms)
            i = fact.index
            prep = fact.preparation
            d = _Draft.of(phase)
            if isinstance(prep, MuleToolPrepared):
                if batch.sequential:
                    d.running = 1
                    d.started_ms = t.clock
                    _wait(t, d, StartTools((i,)))
                    return
                d.prepared = (*d.prepared, i)
            else:
                # As Pi 1.6.0 records a block's terminate: only when it is true.
                result = error_result(prep.message, True if prep.terminate else None)
                _settle(t, d, i, result)
                if batch.sequential:
                    _emit_result_message(t, d, i)
            d.cursor += 1
            _advance(t, d)
        case ToolPartArrived():
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
                return  # the phase as it was
            d = _Draft.of(phase)
            _settle(t, d, i, part.result, max(0, t.clock - phase.started_ms))
            d.running -= 1
            t.cmds.append(CloseTool(i))
            if batch.sequential:
                _emit_result_message(t, d, i)
                d.cursor += 1
                _advance(t, d)
            elif d.running == 0:
                _result_phase(t, d)
            else:
                t.phase = d.phase()
        case ToolExhausted():
            name = batch.calls[fact.index].name
            fail_run(t, MuleError("tool", f"tool {name} finished without a result part"))
        case _:
            assert_never(fact)


def _put(items: tuple[_T, ...], i: int, value: _T) -> tuple[_T, ...]:
    """Return `items` with item `i` replaced."""
    return (*items[:i], value, *items[i + 1 :])


def _emit_result_message(t: Txn, d: _Draft, i: int) -> None:
    d.messages = _put(d.messages, i, _result_message(t, d, i))


def _result_message(t: Txn, d: _Draft, i: int) -> ToolResultMessage:
    """Make call `i`'s result message, emit its start and end, add it to the new messages."""
    batch = d.batch
    call, result = batch.calls[i], d.results[i]
    assert result is not None
    message = ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=result.content,
        is_error=result.is_error,
        timestamp=t.clock,
        details=result.details,
        usage=result.usage,
        duration_ms=d.durations[i],
    )
    rid = t.ident("tool_result", batch.ids[i])
    turn = t.current_turn()
    t.cmds.append(MessageStart(run=t.cfg.run, turn=turn, message=rid, value=message))
    t.cmds.append(MessageEnd(run=t.cfg.run, turn=turn, message=rid, value=message))
    t.new += (message,)
    return message


def _result_phase(t: Txn, d: _Draft) -> None:
    messages = list(d.messages)
    for i, made in enumerate(messages):
        if made is None:
            messages[i] = _result_message(t, d, i)
    d.messages = tuple(messages)
    _finish_batch(t, d)


def _finish_batch(t: Txn, d: _Draft) -> None:
    messages = tuple(m for m in d.messages if m is not None)
    t.context += messages
    results = d.results
    terminate = bool(results) and all(r is not None and r.terminate is True for r in results)
    end_turn(t, d.batch.message, messages, more=not terminate)


__all__ = ["INTERRUPTED_UNSAFE", "truncated_call_text"]
