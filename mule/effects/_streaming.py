"""A model attempt's stream: events in, message start/update/end out, retry or settle.

The stream's events arrive one by one or as a `StreamBatch` (one read's events), and a batch is
handled as its events in order. `stream_updates` is the one place a delta's `message_update` is
made; for a read of nothing but deltas, their updates and the next pull are all `step` answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

from attrs import evolve

from mule.effects._batch import fail_truncated_calls, start_batch
from mule.effects._errors import MuleError
from mule.effects._identity import MuleIdentity
from mule.effects._lifecycle import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TurnEnd,
)
from mule.effects._limits import add_usage
from mule.effects._protocol import (
    CLOSE_MODEL,
    PULL_MODEL,
    AskRetryAfter,
    Sleep,
    StreamBatch,
    StreamExhausted,
    StreamFact,
    StreamIdled,
    StreamOpened,
)
from mule.effects._state import (
    AwaitingRetryAfter,
    BackingOff,
    Phase,
    Streaming,
)
from mule.effects._turns import end_turn
from mule.effects._txn import Txn, fail_run
from mule.pi import (
    BLOCK_EVENT_TYPES,
    ZERO_USAGE,
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    is_retryable_assistant_error,
    retry_delay_ms,
)

_BLOCK_EVENTS = BLOCK_EVENT_TYPES


def stream_updates(
    run: MuleIdentity, phase: Phase, events: Sequence[object]
) -> Sequence[MessageUpdate] | None:
    """Return each event's `message_update` if all of them are deltas; else None.

    A delta is a block event of a started attempt. This is the one place a delta's event is
    made, and for a read of nothing but deltas the updates and the next pull are all `step`
    answers (the state does not change): so the interpreter asks this first, per read, and
    emits its updates without a step. None for no events, or for any that is more than an
    update (`on_stream` then takes the read event by event).
    """
    if type(phase) is not Streaming or not phase.started:
        return None
    turn, mid = phase.turn, phase.message
    # `partial_source`: the lazy snapshot as it is (`partial` would build the message).
    if len(events) == 1:  # a slow stream's read: one delta
        event = events[0]
        if type(event) not in _BLOCK_EVENTS:
            return None
        partial = event.partial_source  # type: ignore[attr-defined]
        return (MessageUpdate(run, turn, mid, partial, event),)  # type: ignore[arg-type]
    updates: list[MessageUpdate] = []
    for event in events:
        if type(event) not in _BLOCK_EVENTS:
            return None
        partial = event.partial_source  # type: ignore[attr-defined]
        updates.append(MessageUpdate(run, turn, mid, partial, event))  # type: ignore[arg-type]
    return updates or None


def on_stream(t: Txn, phase: Streaming, fact: StreamFact) -> None:
    match fact:
        case StreamBatch():
            for event in fact.events:
                if not _on_event(t, event):
                    return  # the attempt settled (a terminal comes last) or the run failed
            t.cmds.append(PULL_MODEL)
        case StreamOpened():
            t.cmds.append(PULL_MODEL)
        case StreamIdled():
            t.clock = max(t.clock, fact.now_ms)
            text = (
                f"Model stream idle timeout: no provider event for {_ms(t.cfg.idle_timeout_ms)} ms"
            )
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
        case StreamExhausted():
            t.cmds.append(CLOSE_MODEL)
            fail_run(t, MuleError("model", "model stream ended without a done or error event"))
        case (
            StartEvent()
            | DoneEvent()
            | ErrorEvent()
            | TextStartEvent()
            | TextDeltaEvent()
            | TextEndEvent()
            | ThinkingStartEvent()
            | ThinkingDeltaEvent()
            | ThinkingEndEvent()
            | ToolCallStartEvent()
            | ToolCallDeltaEvent()
            | ToolCallEndEvent()
        ):
            if _on_event(t, fact):
                t.cmds.append(PULL_MODEL)
        case _:
            assert_never(fact)


def _on_event(t: Txn, event: object) -> bool:
    """Take one model event; return whether the attempt still streams (pull again)."""
    phase = t.phase
    assert type(phase) is Streaming
    run, turn, mid = t.cfg.run, phase.turn, phase.message
    match event:
        # The cases' classes are disjoint, so their order is only the commonest first.
        case (
            TextStartEvent()
            | TextDeltaEvent()
            | TextEndEvent()
            | ThinkingStartEvent()
            | ThinkingDeltaEvent()
            | ThinkingEndEvent()
            | ToolCallStartEvent()
            | ToolCallDeltaEvent()
            | ToolCallEndEvent()
        ):
            # (a block event before `start` is ignored, as in Pi)
            t.cmds += stream_updates(run, phase, (event,)) or ()
            return True
        case StartEvent():
            if not phase.started:
                t.phase = Streaming(phase.attempt, phase.turn, mid, started=True)
                value = event.partial
                t.cmds.append(MessageStart(run=run, turn=turn, message=mid, value=value))
            return True
        case DoneEvent() | ErrorEvent():
            final = event.message if isinstance(event, DoneEvent) else event.error
            given: object = final  # a hand-written stream may push anything
            if type(given) is not AssistantMessage:
                t.cmds.append(CLOSE_MODEL)
                fail_run(
                    t,
                    MuleError(
                        "model",
                        "model stream ended with a terminal that is not an assistant message",
                        final,
                    ),
                )
                return False
            _attempt_settled(t, phase, final)
            return False
        case _:  # a hand-written stream may yield anything
            fail_run(
                t, MuleError("model", f"the model stream yielded {type(event).__name__}", event)
            )
            return False


def _ms(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if float(value).is_integer() else str(value)


def _attempt_settled(t: Txn, phase: Streaming, final: AssistantMessage) -> None:
    run, turn, mid = t.cfg.run, phase.turn, phase.message
    # Pi 1.6.0's loop records the level it asked for on the final message, whoever streamed it.
    final = evolve(final, thinking_level=t.cfg.stream_options.reasoning or "off")
    if not phase.started:
        t.cmds.append(MessageStart(run=run, turn=turn, message=mid, value=final))
    t.cmds.append(MessageEnd(run=run, turn=turn, message=mid, value=final))
    t.cmds.append(CLOSE_MODEL)
    t.usage = add_usage(t.usage, final.usage)
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
        fail_run(t, MuleError("model", text, final))
        return
    calls = tuple([b for b in final.content if type(b) is ToolCall])  # (a list: no generator)
    if calls and stop == "length":
        fail_truncated_calls(t, final, mid, calls)
    elif calls:
        start_batch(t, final, mid, calls)
    else:
        end_turn(t, final, (), more=False)
