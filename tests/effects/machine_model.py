"""A small model of Pi's loop (spec sections 3 and 5), written apart from mule's machine.

The stateful test feeds the same facts to the machine and to this model; the model predicts
what the machine must ask for next and the coarse event log it must emit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias

from attrs import evolve, frozen

from mule.effects import (
    ExecutionMode,
    MuleCompletedTurn,
    MuleResume,
    MuleToolResult,
    Replay,
    ToolCompleted,
    ToolStarted,
)
from mule.pi import (
    ZERO_USAGE,
    AssistantMessage,
    Message,
    Model,
    RetryPolicy,
    TextContent,
    Tool,
    ToolArgumentsError,
    ToolCall,
    ToolResultMessage,
    create_initial_system_message,
    validate_tool_arguments,
)

MODEL = Model(id="m", name="m", api="fake", provider="p", base_url="")
LENIENT: dict[str, object] = {"type": "object"}
STRICT: dict[str, object] = {
    "type": "object",
    "properties": {"n": {"type": "number"}},
    "required": ["n"],
}
# Provider error texts and whether Pi's classifier retries them (decided by hand, not by regex).
ERROR_TEXTS: tuple[tuple[str | None, bool], ...] = (
    ("503 service unavailable", True),
    ("request timed out", True),
    ("invalid request", False),
    ("insufficient_quota: 429", False),
    ("", False),
    (None, False),
)
RETRYABLE = {text: ok for text, ok in ERROR_TEXTS}
INTERRUPTED = "Tool call was interrupted and is not safe to replay"

Expect: TypeAlias = tuple[object, ...]
Entry: TypeAlias = tuple[object, ...]


@frozen
class ToolSpec:
    """One configured tool: strict schema or not, its execution mode and replay safety."""

    strict: bool
    mode: ExecutionMode | None
    replay: Replay

    def descriptor(self, name: str) -> Tool:
        """Return the tool's Pi descriptor."""
        return Tool(name, f"tool {name}", dict(STRICT if self.strict else LENIENT))  # type: ignore[arg-type]


@frozen
class Setup:
    """One run's configuration, as drawn by the test."""

    tools: Mapping[str, ToolSpec]
    sequential: bool
    retry: RetryPolicy | None
    key_hook: bool
    steering: bool
    follow_up: bool
    stop: bool
    retry_after: bool
    idle_ms: int | None
    resume: MuleResume | None
    messages: tuple[Message, ...]
    api_key: str | None


SYSTEM_PROMPT = "be brief"


def truncated(name: str) -> str:
    """Pi 1.6.0's result text for a call cut at the output-token limit."""
    return (
        f'Tool call "{name}" was not executed: the response hit the output token limit, so its'
        " arguments may be truncated. Re-issue the tool call with complete arguments."
    )


def error_result(text: str, terminate: bool | None = None) -> MuleToolResult:
    """Pi's error tool result."""
    return MuleToolResult(
        content=(TextContent(text),), details={}, is_error=True, terminate=terminate
    )


def retryable(text: str | None, policy: RetryPolicy) -> bool:
    """Whether Pi retries an error with this text (our own table, overrides included)."""
    if text and "quota" in text and "quota" in policy.non_retryable_overrides:
        return True
    if text is not None and text.startswith("Model stream idle timeout"):
        return True
    return RETRYABLE[text]


class LoopModel:
    """Pi's loop as a plain bookkeeping object: feed it what happened, read `expect` and `log`."""

    def __init__(self, setup: Setup) -> None:
        self.s = setup
        self.log: list[Entry] = []
        self.expect: Expect = ("began",)
        self.status: Literal["completed", "cancelled", "failed"] | None = None
        self.failed_phase: str | None = None
        # Pi 1.6.0's transcript opens with the initial system message: the prompt and the tools.
        descriptors = [spec.descriptor(name) for name, spec in setup.tools.items()]
        initial = create_initial_system_message(SYSTEM_PROMPT, descriptors)
        self.context: list[Message] = [*([initial] if initial else []), *setup.messages]
        self.new: list[Message] = []
        self.first = True
        self.more = False
        self.attempt = 0
        self.started = False
        self.last: AssistantMessage | None = None
        self.clock = 0
        self.turn: tuple[AssistantMessage, tuple[ToolResultMessage, ...], bool] | None = None
        # The open tool batch.
        self.b_msg: AssistantMessage | None = None
        self.calls: list[ToolCall] = []
        self.results: list[MuleToolResult | None] = []
        self.messages: list[ToolResultMessage | None] = []
        self.todo: list[int] = []
        self.seq = False
        self.queue: list[int] = []
        self.prepared: list[int] = []
        self.running: set[int] = set()
        self.cursor = 0
        self.key: str | None = None
        self.backoff = 0.0
        self.tools_started = 0
        self.durations: list[int | None] = []

    # -- bookkeeping helpers ------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Time arrived with a fact."""
        self.clock = max(self.clock, now_ms)

    def _over(self, status: Literal["completed", "cancelled", "failed"]) -> None:
        self.status = status
        self.expect = ("over",)

    def complete(self) -> None:
        """Complete the run."""
        self.log.append(("run_end", "completed"))
        self._over("completed")

    def fail(self, phase: str) -> None:
        """Fail the run (`run_end(failed)`)."""
        self.log.append(("run_end", "failed"))
        self.failed_phase = phase
        self._over("failed")

    def cancel(self, now_ms: int) -> None:
        """Cancel the run: only `run_end(cancelled)`."""
        self.tick(now_ms)
        self.log.append(("run_end", "cancelled"))
        self._over("cancelled")

    def listener_failed(self) -> None:
        """Fail the run for its listener: no `run_end`."""
        self.failed_phase = "listener"
        self._over("failed")

    def outcome_message(self) -> AssistantMessage:
        """Return the completed outcome's message."""
        if self.last is not None:
            return self.last
        assert self.s.resume is not None
        return self.s.resume.message

    # -- the loop -----------------------------------------------------------------------------

    def began(self) -> None:
        """`Began`: run_start, turn_start, then resume, the steering poll or the model."""
        self.log += [("run_start",), ("turn_start",)]
        if self.s.resume is not None:
            self.first = False
            self._resume(self.s.resume)
        elif self.s.steering:
            self.expect = ("steering",)
        else:
            self._turn_body(())

    def _turn_body(self, pending: tuple[Message, ...]) -> None:
        if not self.first:
            self.log.append(("turn_start",))
        self.first = False
        for m in pending:
            self.log.append(("end", m))
        self.context += pending
        self.new += pending
        self._attempt(1)

    def _attempt(self, n: int) -> None:
        self.attempt = n
        self.started = False
        if self.s.key_hook:
            self.expect = ("key",)
        else:
            self.key_resolved(None)

    def key_resolved(self, key: str | None) -> None:
        """Take the key hook's answer (or none): prompt and call the model."""
        self.log.append(("prompt", self.attempt))
        self.key = key or self.s.api_key
        self.expect = ("call",)

    def opened(self) -> None:
        """Take the opened stream: pull it."""
        self.expect = ("pull",)

    def start(self) -> None:
        """Take the `start` event (only the first one counts)."""
        self.started = True
        self.expect = ("pull",)

    def idle_text(self) -> str:
        """Pi's idle-timeout error text for this run."""
        return f"Model stream idle timeout: no provider event for {self.s.idle_ms} ms"

    def idled(self, last: AssistantMessage | None, now_ms: int) -> None:
        """No provider event in time: synthesise the final message."""
        self.tick(now_ms)
        if last is None:
            final = AssistantMessage(
                (), MODEL.api, MODEL.provider, MODEL.id, ZERO_USAGE, "error", self.clock
            )
            final = evolve(final, error_message=self.idle_text())
        else:
            final = evolve(
                last, stop_reason="error", error_message=self.idle_text(), timestamp=self.clock
            )
        self.settled(final)

    def settled(self, final: AssistantMessage) -> None:
        """Settle the attempt with `final`: retry, fail, run tools or end the turn."""
        # Pi 1.6.0's loop records the thinking level it asked for (none here: "off").
        final = evolve(final, thinking_level="off")
        self.log.append(("end", final))
        policy = self.s.retry
        if (
            final.stop_reason == "error"
            and policy is not None
            and policy.enabled
            and self.attempt - 1 < policy.max_retries
            and retryable(final.error_message, policy)
        ):
            self.backoff = min(
                policy.base_delay_ms * 2 ** (self.attempt - 1), policy.max_agent_delay_ms
            )
            self.expect = ("retry_after",) if self.s.retry_after else ("sleep", self.backoff)
            return
        self.context.append(final)
        self.new.append(final)
        self.last = final
        if final.stop_reason in ("error", "aborted"):
            self.log.append(("turn_end", final, ()))
            self.fail("model")
            return
        calls = [b for b in final.content if isinstance(b, ToolCall)]
        if calls and final.stop_reason == "length":
            # Pi 1.6.0: none runs; each gets an error result in turn, then the next turn.
            self.b_msg, self.calls = final, calls
            self.results, self.messages = [None] * len(calls), [None] * len(calls)
            self.durations = [None] * len(calls)
            for i, call in enumerate(calls):
                spec = self.s.tools.get(call.name)
                self.log.append(("tstart", call, spec.replay if spec else "unsafe"))
                self._settle(i, error_result(truncated(call.name)))
                self._emit(i)
            self.context += [m for m in self.messages if m is not None]
            self._end_turn(final, tuple(m for m in self.messages if m is not None), more=True)
        elif calls:
            self._batch(final, calls, [None] * len(calls), [None] * len(calls))
        else:
            self._end_turn(final, (), more=False)

    def retry_after(self, ms: float | None) -> None:
        """`retry_after_ms` answered: the delay is never shorter than the backoff."""
        delay = self.backoff
        if ms is not None and ms == ms and ms != float("inf") and ms >= 0:
            delay = max(delay, ms)
        assert self.s.retry is not None
        self.expect = ("sleep", min(delay, self.s.retry.max_agent_delay_ms))

    def slept(self) -> None:
        """End the backoff: the next attempt of the same turn."""
        self._attempt(self.attempt + 1)

    # -- tools ----------------------------------------------------------------------------------

    def _resume(self, resume: MuleResume) -> None:
        message = resume.message
        self.context.append(message)
        calls = [b for b in message.content if isinstance(b, ToolCall)]
        if not calls:
            self._end_turn(message, (), more=False)
            return
        by_id = {cp.call.id: cp for cp in resume.tools}
        results: list[MuleToolResult | None] = []
        messages: list[ToolResultMessage | None] = []
        for call in calls:
            cp = by_id.get(call.id)
            if isinstance(cp, ToolCompleted):
                results.append(cp.result)
                messages.append(cp.message)
            elif message.stop_reason == "length":
                results.append(error_result(truncated(call.name)))
                messages.append(None)
            elif isinstance(cp, ToolStarted) and cp.replay == "unsafe":
                results.append(error_result(INTERRUPTED))
                messages.append(None)
            else:
                results.append(None)
                messages.append(None)
        self._batch(message, calls, results, messages)

    def _batch(
        self,
        message: AssistantMessage,
        calls: list[ToolCall],
        results: list[MuleToolResult | None],
        messages: list[ToolResultMessage | None],
    ) -> None:
        self.durations = [None] * len(calls)
        self.b_msg, self.calls, self.results, self.messages = message, calls, results, messages
        self.todo = [i for i, r in enumerate(results) if r is None]
        tools = self.s.tools
        self.seq = self.s.sequential or any(
            c.name in tools and tools[c.name].mode == "sequential" for c in calls
        )
        self.queue = list(self.todo)
        self.prepared = []
        self.running = set()
        self.cursor = 0
        self._pump()

    def _start(self, i: int) -> MuleToolResult | None:
        """Log the call's start; return its immediate result (unknown tool, bad arguments)."""
        call = self.calls[i]
        spec = self.s.tools.get(call.name)
        self.log.append(("tstart", call, spec.replay if spec else "unsafe"))
        if spec is None:
            return error_result(f"Tool {call.name} not found")
        n = call.arguments.get("n")
        bad = spec.strict and (type(n) not in (int, float))
        try:
            validate_tool_arguments(spec.descriptor(call.name), call)
        except ToolArgumentsError as exc:
            assert bad, f"validation rejected {call.arguments}"
            return error_result(exc.text)
        assert not bad, f"validation accepted {call.arguments}"
        return None

    def _settle(self, i: int, result: MuleToolResult, duration: int | None = None) -> None:
        self.log.append(("tend", self.calls[i], result))
        self.results[i] = result
        self.durations[i] = duration

    def _emit(self, i: int) -> None:
        call, result = self.calls[i], self.results[i]
        assert result is not None
        message = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=result.content,
            is_error=result.is_error,
            timestamp=self.clock,
            details=result.details,
            usage=result.usage,
            duration_ms=self.durations[i],
        )
        self.log.append(("end", message))
        self.new.append(message)
        self.messages[i] = message

    def _pump(self) -> None:
        if self.seq:
            while self.cursor < len(self.calls):
                i = self.cursor
                if i not in self.todo:
                    if self.messages[i] is None:
                        self._emit(i)
                    self.cursor += 1
                    continue
                immediate = self._start(i)
                if immediate is None:
                    self.expect = ("prepare", i)
                    return
                self._settle(i, immediate)
                self._emit(i)
                self.cursor += 1
            self._finish_batch()
            return
        while self.queue:
            i = self.queue[0]
            immediate = self._start(i)
            if immediate is None:
                self.expect = ("prepare", i)
                return
            self._settle(i, immediate)
            self.queue.pop(0)
        if self.prepared:
            self.log.append(("start_tools", tuple(self.prepared)))
            self.tools_started = self.clock
            self.running = set(self.prepared)
            self.prepared = []
            self.expect = ()
            return
        self._result_phase()

    def prepared_ok(self, i: int) -> None:
        """`prepare` gave an executor."""
        assert self.expect == ("prepare", i)
        if self.seq:
            self.log.append(("start_tools", (i,)))
            self.tools_started = self.clock
            self.running = {i}
            self.expect = ()
            return
        self.queue.pop(0)
        self.prepared.append(i)
        self._pump()

    def rejected(self, i: int, message: str, terminate: bool | None) -> None:
        """`prepare` rejected the call: an immediate error result."""
        assert self.expect == ("prepare", i)
        # Pi 1.6.0 records a block's terminate only when it is true.
        self._settle(i, error_result(message, True if terminate else None))
        if self.seq:
            self._emit(i)
            self.cursor += 1
        else:
            self.queue.pop(0)
        self._pump()

    def update(self, i: int, result: MuleToolResult) -> None:
        """Log a tool's progress."""
        self.log.append(("tupdate", self.calls[i], result))

    def result(self, i: int, result: MuleToolResult) -> None:
        """Take a tool's final result (it ran since `started`: Pi 1.6.0's durationMs)."""
        self._settle(i, result, max(0, self.clock - self.tools_started))
        self.running.discard(i)
        if self.seq:
            self._emit(i)
            self.cursor += 1
            self._pump()
        elif not self.running:
            self._result_phase()

    def _result_phase(self) -> None:
        for i in range(len(self.calls)):
            if self.messages[i] is None:
                self._emit(i)
        self._finish_batch()

    def _finish_batch(self) -> None:
        messages = tuple(m for m in self.messages if m is not None)
        assert len(messages) == len(self.calls)
        self.context += messages
        terminate = all(r is not None and r.terminate is True for r in self.results)
        assert self.b_msg is not None
        self._end_turn(self.b_msg, messages, more=not terminate)

    # -- turn ends, hooks and polls -------------------------------------------------------------

    def _end_turn(
        self, message: AssistantMessage, results: tuple[ToolResultMessage, ...], more: bool
    ) -> None:
        # The stop hook comes before turn_end, where Pi 1.6.0 calls finishTurn.
        self.turn = (message, results, more)
        if self.s.stop:
            self.expect = ("stop",)
        else:
            self.log.append(("turn_end", message, results))
            self._after_stop(more)

    def completed_turn(self) -> MuleCompletedTurn:
        """Return what the stop hook must be shown."""
        assert self.turn is not None
        message, results, _ = self.turn
        return MuleCompletedTurn(message, results, tuple(self.context), tuple(self.new))

    def stop_answered(self, stop: bool) -> None:
        """Take the stop hook's answer."""
        assert self.turn is not None
        self.log.append(("turn_end", self.turn[0], self.turn[1]))
        if stop:
            self.complete()
        else:
            self._after_stop(self.turn[2])

    def _after_stop(self, more: bool) -> None:
        self.more = more
        if self.s.steering:
            self.expect = ("steering",)
        elif more:
            self._turn_body(())
        elif self.s.follow_up:
            self.expect = ("follow_up",)
        else:
            self.complete()

    def polled(self, messages: tuple[Message, ...]) -> None:
        """Take a steering or follow-up poll's answer."""
        if self.expect == ("steering_again",):
            self._turn_body(messages)
        elif self.expect == ("steering",):
            if self.first or messages:
                self._turn_body(messages)
            elif self.more:
                # Pi 1.6.0 polls once more before the next turn after an empty poll.
                self.expect = ("steering_again",)
            elif self.s.follow_up:
                self.expect = ("follow_up",)
            else:
                self.complete()
        elif messages:
            self._turn_body(messages)
        else:
            self.complete()


__all__ = [
    "ERROR_TEXTS",
    "INTERRUPTED",
    "MODEL",
    "SYSTEM_PROMPT",
    "LoopModel",
    "Setup",
    "ToolSpec",
    "error_result",
    "retryable",
    "truncated",
]
