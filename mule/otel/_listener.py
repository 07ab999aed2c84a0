"""`traced(listener)`: a run's events as OpenTelemetry GenAI spans and metrics.

Spans follow mule's identities: the run is an `invoke_agent` span; each model attempt (from its
`model_prompt` to the `message_end` of its assistant message) a `chat {model}` span under it, so
retries are sibling attempts; each tool call an `execute_tool {name}` span under the attempt
whose message asked for it. Streamed deltas cost one type check: no span, no attribute.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, final

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode

from mule.effects import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelPrompt,
    MuleEvent,
    RunEnd,
    RunStart,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from mule.otel._content import (
    FINISH_REASONS,
    PROVIDER_NAMES,
    arguments_attribute,
    error_type,
    messages_attribute,
    result_attribute,
    system_attribute,
)
from mule.otel._propagate import link_to, traceparent
from mule.pi import AbortSignal, AssistantMessage, Message
from mule.promise import MulePromiseListener, check_listener

_SCOPE: Final = "mule"
OP: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
MODEL: Final = "gen_ai.request.model"
ERROR_TYPE: Final = "error.type"
REPLAYED: Final = "mule.replayed"
# Bucket advice from the GenAI metric conventions.
_TOKEN_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
_DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip


_OK: Final = Status(StatusCode.OK)


@final
class _Instruments:
    """A provider pair's tracer and GenAI histograms, made once (not once per run)."""

    __slots__ = ("duration", "tokens", "tracer")

    def __init__(self, tracer: trace.Tracer, meter: metrics.Meter) -> None:
        self.tracer = tracer
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )


# Weak: a host's providers live as long as the host keeps them, not as long as mule.
_MADE: weakref.WeakKeyDictionary[Any, weakref.WeakKeyDictionary[Any, _Instruments]] = (
    weakref.WeakKeyDictionary()
)


def _instruments(
    tracer_provider: trace.TracerProvider | None, meter_provider: metrics.MeterProvider | None
) -> _Instruments:
    tracers = tracer_provider or trace.get_tracer_provider()
    meters = meter_provider or metrics.get_meter_provider()
    try:
        by_meter = _MADE.get(tracers)
        if by_meter is None:
            by_meter = _MADE[tracers] = weakref.WeakKeyDictionary()
        made = by_meter.get(meters)
        if made is None:
            made = by_meter[meters] = _Instruments(
                tracers.get_tracer(_SCOPE), meters.get_meter(_SCOPE)
            )
    except TypeError:  # a provider that cannot be weakly referenced: made per run
        return _Instruments(tracers.get_tracer(_SCOPE), meters.get_meter(_SCOPE))
    return made


@final
class _Prompt:
    """A model attempt between its `model_prompt` and its assistant `message_start`.

    Its span starts (back-dated to the prompt) once the message names the model: one
    `start_span` with every attribute, instead of a start, a rename and more attributes.
    """

    __slots__ = ("attrs", "started", "started_ns")

    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs
        self.started_ns = time.time_ns()
        self.started = time.perf_counter()


@final
class _Attempt:
    """One model attempt's span; its context, made when its first tool call starts."""

    __slots__ = ("_context", "replayed", "span", "started")

    def __init__(self, span: Span, started: float, replayed: bool) -> None:
        self.span = span
        self.started = started
        self.replayed = replayed
        self._context: otel_context.Context | None = None

    def context(self) -> otel_context.Context:
        if self._context is None:
            self._context = trace.set_span_in_context(self.span)
        return self._context


@final
class _Recorder:
    """Turns one run's events into spans and metrics (see `traced`)."""

    def __init__(
        self,
        listener: MulePromiseListener | None,
        *,
        tracer_provider: trace.TracerProvider | None,
        meter_provider: metrics.MeterProvider | None,
        capture_content: bool,
        agent_name: str | None,
        conversation_id: str | None,
        messages: Sequence[Message],
        continues: str | SpanContext | None,
        on_run_start: Callable[[str], None] | None,
        replayed: Callable[[MuleEvent], bool] | None,
    ) -> None:
        self._inner = listener
        self._replayed = replayed
        made = _instruments(tracer_provider, meter_provider)
        self._tracer = made.tracer
        self._tokens = made.tokens
        self._duration = made.duration
        # Metric attributes per (provider, model, error type): duration, input, output. The SDK
        # copies them, so one set serves every attempt alike.
        self._metric_attrs: dict[tuple[str, str, str | None], tuple[dict[str, str], ...]] = {}
        self._capture = capture_content
        self._agent_name = agent_name
        self._conversation_id = conversation_id
        self._starting = tuple(messages)
        self._continues = link_to(continues) if continues is not None else None
        self._on_run_start = on_run_start
        self._handlers: dict[type[Any], Callable[[Any], None]] = {
            RunStart: self._run_start,
            ModelPrompt: self._model_prompt,
            MessageStart: self._message_start,
            MessageEnd: self._message_end,
            ToolExecutionStart: self._tool_start,
            ToolExecutionEnd: self._tool_end,
            RunEnd: self._run_end,
        }
        self._reset()

    def _reset(self) -> None:
        self._run: Span | None = None
        self._run_context: otel_context.Context | None = None
        self._pending: _Prompt | None = None  # prompted, its assistant message not yet started
        self._attempts: dict[str, _Attempt] = {}  # by message identity
        self._asked: dict[str, _Attempt] = {}  # by message identity, for its tool calls
        self._tools: dict[str, Span] = {}  # by tool_call identity
        self._transcript: list[Message] = list(self._starting) if self._capture else []
        self._model: str | None = None
        self._provider: str | None = None
        self._usage = [0, 0]

    def listener(self) -> MulePromiseListener:
        """Return the listener: a closure, since the per-delta path must cost next to nothing."""
        handlers = self._handlers.get
        inner = self._inner
        delta = MessageUpdate

        if inner is None:

            def record(event: MuleEvent, signal: AbortSignal) -> None:
                kind = type(event)
                if kind is not delta:
                    handler = handlers(kind)
                    if handler is not None:
                        handler(event)

            return record

        def record_then_call(event: MuleEvent, signal: AbortSignal) -> Awaitable[None] | None:
            kind = type(event)
            if kind is not delta:
                handler = handlers(kind)
                if handler is not None:
                    handler(event)
            return inner(event, signal)

        return record_then_call

    # -- the run ----------------------------------------------------------------------------

    def _run_start(self, event: RunStart) -> None:
        if self._run is not None:
            raise RuntimeError("mule.otel: a traced() listener records one run at a time")
        attrs: dict[str, Any] = {OP: "invoke_agent", "mule.run": event.run.value}
        if self._agent_name is not None:
            attrs["gen_ai.agent.name"] = self._agent_name
        if self._conversation_id is not None:
            attrs["gen_ai.conversation.id"] = self._conversation_id
        name = "invoke_agent" if self._agent_name is None else f"invoke_agent {self._agent_name}"
        links = None
        if self._continues is not None:
            links = [Link(self._continues, {"mule.link": "continues"})]
        span = self._tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attrs, links=links)
        if self._capture and event.messages:  # the run's own start wins over `messages=`
            self._transcript = list(event.messages)
        self._run = span
        self._run_context = trace.set_span_in_context(span)
        if self._on_run_start is not None:
            parent = traceparent(span.get_span_context())
            if parent:  # "" without an SDK: nothing is recorded, nothing to continue
                self._on_run_start(parent)

    def _run_end(self, event: RunEnd) -> None:
        run = self._run
        if run is None:
            return
        outcome = event.outcome
        status = (
            _OK if outcome == "completed" else Status(StatusCode.ERROR, f"the run was {outcome}")
        )
        why = None if outcome == "completed" else outcome
        # Work the run left open (a stream or tools cut off by a cancel or failure) ends with it.
        for attempt in self._attempts.values():
            self._close(attempt.span, why)
        if self._pending is not None:  # cut off before its stream started
            self._close(self._chat_span("chat", self._pending), why)
        for span in self._tools.values():
            self._close(span, why)
        attrs: dict[str, Any] = {
            "mule.outcome": outcome,
            "gen_ai.usage.input_tokens": self._usage[0],
            "gen_ai.usage.output_tokens": self._usage[1],
        }
        if self._model is not None:
            attrs[MODEL] = self._model
        if self._provider is not None:
            attrs[PROVIDER] = self._provider
        if why is not None:
            attrs[ERROR_TYPE] = why
        run.set_attributes(attrs)
        run.set_status(status)
        run.end()
        self._reset()

    @staticmethod
    def _close(span: Span, why: str | None) -> None:
        if why is not None:
            span.set_attribute(ERROR_TYPE, why)
            span.set_status(Status(StatusCode.ERROR, f"the run was {why}"))
        span.end()

    # -- model attempts ---------------------------------------------------------------------

    def _model_prompt(self, event: ModelPrompt) -> None:
        attrs: dict[str, Any] = {
            OP: "chat",
            "mule.turn": event.turn.value,
            "mule.attempt": event.attempt,
        }
        if self._capture:
            attrs["gen_ai.system_instructions"] = system_attribute(event.system_prompt)
            attrs["gen_ai.input.messages"] = messages_attribute(self._transcript)
        self._pending = _Prompt(attrs)

    def _chat_span(self, name: str, prompt: _Prompt) -> Span:
        return self._tracer.start_span(
            name,
            context=self._run_context,
            kind=SpanKind.CLIENT,
            attributes=prompt.attrs,
            start_time=prompt.started_ns,
        )

    def _message_start(self, event: MessageStart) -> None:
        value = event.value
        if type(value) is not AssistantMessage:
            return
        prompt = self._pending
        if prompt is None:
            return
        self._pending = None
        message = event.message.value
        provider = PROVIDER_NAMES.get(value.provider, value.provider)
        if self._model is None:
            self._model, self._provider = value.model, provider
        attrs = prompt.attrs
        attrs[MODEL] = value.model
        attrs[PROVIDER] = provider
        attrs["mule.message"] = message
        replayed = self._replayed is not None and self._replayed(event)
        if replayed:
            attrs[REPLAYED] = True
        span = self._chat_span(f"chat {value.model}", prompt)
        attempt = _Attempt(span, prompt.started, replayed)
        self._attempts[message] = attempt
        self._asked[message] = attempt

    def _message_end(self, event: MessageEnd) -> None:
        value = event.value
        if type(value) is not AssistantMessage:
            if self._capture:
                self._transcript.append(value)
            return
        attempt = self._attempts.pop(event.message.value, None)
        if attempt is None:
            return
        failed = value.stop_reason in ("error", "aborted")
        if self._capture and not failed:  # a retry asks again without the failed attempt
            self._transcript.append(value)
        usage = value.usage
        input_tokens = usage.input + usage.cache_read + usage.cache_write
        self._usage[0] += input_tokens
        self._usage[1] += usage.output
        attrs: dict[str, Any] = {
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": usage.output,
            "gen_ai.response.finish_reasons": (
                FINISH_REASONS.get(value.stop_reason, value.stop_reason),
            ),
        }
        if usage.cache_read:
            attrs["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read
        if usage.cache_write:
            attrs["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write
        if value.response_id is not None:
            attrs["gen_ai.response.id"] = value.response_id
        if value.response_model is not None:
            attrs["gen_ai.response.model"] = value.response_model
        if self._capture:
            attrs["gen_ai.output.messages"] = messages_attribute((value,))
        span = attempt.span
        why = None
        if failed:
            why = attrs[ERROR_TYPE] = error_type(value)
            # The provider's text may quote the prompt: without capture, its type and status.
            text = value.error_message if self._capture else None
            span.set_status(Status(StatusCode.ERROR, text or f"{value.stop_reason}: {why}"))
        span.set_attributes(attrs)
        span.end()
        if attempt.replayed:  # no model call: no tokens spent, no duration to observe
            return
        key = (value.provider, value.model, why)
        metric = self._metric_attrs.get(key)
        if metric is None:
            metric = self._metric_attrs[key] = _metric_attributes(*key)
        self._duration.record(time.perf_counter() - attempt.started, metric[0])
        self._tokens.record(input_tokens, metric[1])
        self._tokens.record(usage.output, metric[2])

    # -- tool calls -------------------------------------------------------------------------

    def _tool_start(self, event: ToolExecutionStart) -> None:
        call = event.call
        ident = event.tool_call
        parent = ident.parent
        asked = self._asked.get(parent.value) if parent is not None else None
        attrs: dict[str, Any] = {
            OP: "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "mule.tool_call": ident.value,
            "mule.turn": event.turn.value,
            "mule.replay": event.replay,
        }
        if self._capture:
            attrs["gen_ai.tool.call.arguments"] = arguments_attribute(call)
        self._tools[ident.value] = self._tracer.start_span(
            f"execute_tool {call.name}",
            context=self._run_context if asked is None else asked.context(),
            kind=SpanKind.INTERNAL,
            attributes=attrs,
        )

    def _tool_end(self, event: ToolExecutionEnd) -> None:
        span = self._tools.pop(event.tool_call.value, None)
        if span is None:
            return
        result = event.result
        if self._replayed is not None and self._replayed(event):
            span.set_attribute(REPLAYED, True)
        if self._capture:
            span.set_attribute("gen_ai.tool.call.result", result_attribute(result))
        if result.is_error:
            span.set_attribute(ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the tool returned an error result"))
        span.end()


def _metric_attributes(
    provider: str, model: str, why: str | None
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Return an attempt's metric attributes: for its duration, input and output tokens."""
    metric = {OP: "chat", PROVIDER: PROVIDER_NAMES.get(provider, provider), MODEL: model}
    if why is not None:
        metric[ERROR_TYPE] = why
    return (
        metric,
        {**metric, "gen_ai.token.type": "input"},
        {**metric, "gen_ai.token.type": "output"},
    )


def traced(
    listener: MulePromiseListener | None = None,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    capture_content: bool = False,
    agent_name: str | None = None,
    conversation_id: str | None = None,
    messages: Sequence[Message] = (),
    continues: str | SpanContext | None = None,
    on_run_start: Callable[[str], None] | None = None,
    replayed: Callable[[MuleEvent], bool] | None = None,
) -> MulePromiseListener:
    """Return a listener that records a run as OpenTelemetry GenAI spans and metrics.

    `listener` (optional) receives every event afterwards; it must take `(event, signal)`
    (a `TypeError` here otherwise). Providers default to the global ones. Prompts, outputs,
    tool arguments, results and the provider's error text go into spans only with
    `capture_content=True` (without it a failed attempt's status says only its stop reason
    and `error.type`). The first attempt's `gen_ai.input.messages` are the run's starting
    messages, which `run_start` carries; `messages` is for a run whose `run_start` carries
    none (a pi bridge job). `continues` (a W3C
    `traceparent`) links the run to the trace of the run it resumes; `on_run_start` receives
    this run's `traceparent`, for the host to keep with the run. `replayed` (e.g. a DBOS
    worker's `DurableRun.replayed`) is asked at each attempt's assistant `message_start` and
    each `tool_execution_end` whether that step was replayed from a durable record rather
    than run; its span then gets `mule.replayed=true`, and a replayed attempt records no
    metric points (it spent no tokens and called no model).

    The run span's parent is the context current when the run starts. The listener records
    one run at a time (make one per concurrent run); it is promise-style, and returns what
    `listener` returns.
    """
    check_listener(listener)
    return _Recorder(
        listener,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=capture_content,
        agent_name=agent_name,
        conversation_id=conversation_id,
        messages=messages,
        continues=continues,
        on_run_start=on_run_start,
        replayed=replayed,
    ).listener()


__all__ = ["traced"]
