"""A tool batch: start, prepare and execute an assistant message's calls, then its results."""

from __future__ import annotations

from typing import Any, assert_never

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
from mule.effects._state import (
    Batch,
    RunningTools,
)
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

INTERRUPTED_UNSAFE = "Tool call was interrupted and is not safe to replay"


def start_batch(
    t: Txn, message: AssistantMessage, message_id: MuleIdentity, calls: tuple[ToolCall, ...]
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
        durations=(None,) * n,
    )
    _advance(t, batch)


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
        durations=(None,) * len(calls),
    )
    _advance(t, batch)


def _advance(t: Txn, batch: Batch) -> None:
    """Move a batch forward until it must wait for the world, or it is complete."""
    if batch.sequential:
        _advance_sequential(t, batch)
        return
    # Parallel pass 1: start and prepare each call in source order.
    while batch.cursor < len(batch.todo):
        i = batch.todo[batch.cursor]
        gated = _start_call(t, batch, i)
        if type(gated) is ToolCall:
            t.phase = RunningTools(batch)
            t.cmds.append(PrepareTool(i, gated))
            return
        batch = _settle(t, batch, i, gated)
        batch = evolve(batch, cursor=batch.cursor + 1)
    # Pass 2: only now do the prepared calls execute, all at once.
    if batch.prepared:
        batch = evolve(batch, running=len(batch.prepared), started_ms=t.clock)
        t.phase = RunningTools(batch)
        t.cmds.append(StartTools(batch.prepared))
        return
    _result_phase(t, batch)


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


def _advance_sequential(t: Txn, batch: Batch) -> None:
    n = len(batch.calls)
    while batch.cursor < n:
        i = batch.cursor
        if i not in batch.todo:
            if batch.messages[i] is None:
                batch = _emit_result_message(t, batch, i)
            batch = evolve(batch, cursor=i + 1)
            continue
        gated = _start_call(t, batch, i)
        if type(gated) is ToolCall:
            t.phase = RunningTools(batch)
            t.cmds.append(PrepareTool(i, gated))
            return
        batch = _settle(t, batch, i, gated)
        batch = _emit_result_message(t, batch, i)
        batch = evolve(batch, cursor=i + 1)
    _finish_batch(t, batch)


def _start_call(t: Txn, batch: Batch, i: int) -> MuleToolResult | ToolCall:
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
    t: Txn,
    batch: Batch,
    i: int,
    result: MuleToolResult,
    running: int | None = None,
    duration_ms: int | None = None,
) -> Batch:
    """Record a call's final result and emit its end (and set `running`, if given).

    `duration_ms` is the execution's time, for a call that ran (Pi 1.6.0's `durationMs`).
    """
    end = ToolExecutionEnd(
        run=t.cfg.run,
        turn=t.current_turn(),
        tool_call=batch.ids[i],
        call=batch.calls[i],
        result=result,
        duration_ms=duration_ms,
    )
    t.cmds.append(end)
    results = list(batch.results)
    results[i] = result
    changes: dict[str, Any] = {"results": tuple(results)}
    if running is not None:
        changes["running"] = running
    if duration_ms is not None:
        durations = list(batch.durations)
        durations[i] = duration_ms
        changes["durations"] = tuple(durations)
    return evolve(batch, **changes)


def on_tools(t: Txn, batch: Batch, fact: ToolFact) -> None:
    sequential = batch.sequential
    match fact:
        case ToolPrepared():
            t.clock = max(t.clock, fact.now_ms)
            i = fact.index
            prep = fact.preparation
            if isinstance(prep, MuleToolPrepared):
                if sequential:
                    t.phase = RunningTools(evolve(batch, running=1, started_ms=t.clock))
                    t.cmds.append(StartTools((i,)))
                    return
                batch = evolve(batch, prepared=(*batch.prepared, i), cursor=batch.cursor + 1)
            else:
                # As Pi 1.6.0 records a block's terminate: only when it is true.
                result = error_result(prep.message, True if prep.terminate else None)
                batch = _settle(t, batch, i, result)
                if sequential:
                    batch = _emit_result_message(t, batch, i)
                batch = evolve(batch, cursor=batch.cursor + 1)
            _advance(t, batch)
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
                t.phase = RunningTools(batch)
                return
            took = max(0, t.clock - batch.started_ms)
            batch = _settle(t, batch, i, part.result, batch.running - 1, took)
            t.cmds.append(CloseTool(i))
            if sequential:
                batch = _emit_result_message(t, batch, i)
                batch = evolve(batch, cursor=batch.cursor + 1)
                _advance(t, batch)
            elif batch.running == 0:
                _result_phase(t, batch)
            else:
                t.phase = RunningTools(batch)
        case ToolExhausted():
            name = batch.calls[fact.index].name
            fail_run(t, MuleError("tool", f"tool {name} finished without a result part"))
        case _:
            assert_never(fact)


def _emit_result_message(t: Txn, batch: Batch, i: int) -> Batch:
    messages = list(batch.messages)
    messages[i] = _result_message(t, batch, i)
    return evolve(batch, messages=tuple(messages))


def _result_message(t: Txn, batch: Batch, i: int) -> ToolResultMessage:
    """Make call `i`'s result message, emit its start and end, add it to the new messages."""
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
        duration_ms=batch.durations[i] if batch.durations else None,
    )
    rid = t.ident("tool_result", batch.ids[i])
    turn = t.current_turn()
    t.cmds.append(MessageStart(run=t.cfg.run, turn=turn, message=rid, value=message))
    t.cmds.append(MessageEnd(run=t.cfg.run, turn=turn, message=rid, value=message))
    t.new += (message,)
    return message


def _result_phase(t: Txn, batch: Batch) -> None:
    messages = list(batch.messages)
    for i, made in enumerate(messages):
        if made is None:
            messages[i] = _result_message(t, batch, i)
    _finish_batch(t, evolve(batch, messages=tuple(messages)))


def _finish_batch(t: Txn, batch: Batch) -> None:
    messages = tuple(m for m in batch.messages if m is not None)
    t.context += messages
    terminate = bool(batch.results) and all(
        r is not None and r.terminate is True for r in batch.results
    )
    end_turn(t, batch.message, messages, more=not terminate)


__all__ = ["INTERRUPTED_UNSAFE", "truncated_call_text"]
