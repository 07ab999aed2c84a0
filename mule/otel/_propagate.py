"""W3C `traceparent` strings: how a resumed run finds the trace of the run it continues."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_W3C = TraceContextTextMapPropagator()


def traceparent(span_context: SpanContext) -> str:
    """Return the W3C `traceparent` of a span ("" for an invalid, non-recorded one)."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=trace.set_span_in_context(NonRecordingSpan(span_context)))
    return carrier.get("traceparent", "")


def link_to(value: str | SpanContext) -> SpanContext:
    """Return the span context a `traceparent` names; `ValueError` if it names none."""
    if isinstance(value, SpanContext):
        return value
    found = trace.get_current_span(_W3C.extract({"traceparent": value})).get_span_context()
    if not found.is_valid:
        raise ValueError(f"not a W3C traceparent: {value!r}")
    return found


__all__ = ["link_to", "traceparent"]
