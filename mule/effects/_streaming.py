"""A model attempt's stream: events in, message start/update/end out, retry or settle."""

from __future__ import annotations

from typing import assert_never

from attrs import evolve

from mule.effects._batch import fail_truncated_calls, start_batch
from mule.effects._errors import MuleError
from mule.effects._lifecycle import (
    MessageEnd,
    MessageStart,
    TurnEnd,
)
from mule.effects._limits import add_usage
from mule.effects._protocol import (
    CLOSE_MODEL,
    PULL_MODEL,
    AskRetryAfter,
    Sleep,
    StreamExhausted,
    StreamFact,
    StreamIdled,
    StreamOpened,
)
from mule.effects._state import (
    AwaitingRetryAfter,
    BackingOff,
    Streaming,
)
from mule.effects._turns import end_turn
from mule.effects._txn import Txn, fail_run
from mule.pi import (
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


def on_stream(t: Txn, phase: Streaming, fact: StreamFact) -> None:
    run, turn, mid = t.cfg.run, phase.turn, phase.message
    match fact:
        case StreamOpened():
            t.cmds.append(PULL_MODEL)
        case StartEvent():
            if not phase.started:
                t.phase = Streaming(phase.attempt, phase.turn, mid, started=True)
                value = fact.partial
                t.cmds.append(MessageStart(run=run, turn=turn, message=mid, value=value))
            t.cmds.append(PULL_MODEL)
        # The cases' classes are disjoint, so their order is only the commonest first.
        case DoneEvent() | ErrorEvent():
            final = fact.message if isinstance(fact, DoneEvent) else fact.error
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
                return
            _attempt_settled(t, phase, final)
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
            t.cmds.append(PULL_MODEL)  # a block event before `start` is ignored, as in Pi
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
        case _:
            assert_never(fact)


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
    calls = tuple(b for b in final.content if type(b) is ToolCall)
    if calls and stop == "length":
        fail_truncated_calls(t, final, mid, calls)
    elif calls:
        start_batch(t, final, mid, calls)
    else:
        end_turn(t, final, (), more=False)
