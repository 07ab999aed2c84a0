"""The I/O-free half of every provider: decoded stream events in, Pi's events out.

A vendor's parser subclasses `StreamParser` and implements `_on_event(event, data)`, given the
SSE event name ("" for unnamed events and NDJSON lines) and the event's data as text, and
`_on_end()` for the end of the body. It opens, extends and closes content blocks through the
helpers here, which keep the `PartialBuilder` and make Pi's block events, so every vendor emits
them alike; `_done` is the finish all vendors share (a failed stop reason fails the stream).

The transport drives it: `start()` once the response is open, `feed(event, data)` per event
(stopping early once `ended` is true, as after OpenAI's `[DONE]`), and `finish()` at the end of
the body. Both `feed` and `finish` raise `ProviderError` and nothing else: whatever a malformed
event makes the vendor code trip over becomes one, naming the event. `fail(exc, aborted)` then
gives the events made before the failure and Pi's terminal `error` event, content so far kept.

Also here, once for every vendor: stop-reason tables (`read_stop_reason`), token counts and
priced usage (`token_count`, `priced_usage`), and decoding an event's JSON (`decode_object`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final, Literal, final

from attrs import evolve

from mule.pi._assistant_events import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from mule.pi._cost import calculate_cost
from mule.pi._json import JsonObject, JsonValue, loads
from mule.pi._messages import Diagnostic, StopReason, Usage, now_ms
from mule.pi._model import Model
from mule.pi._partial import PartialBuilder

ABORTED_MESSAGE: Final = "Request was aborted"
UNKNOWN_ERROR: Final = "An unknown error occurred"  # Pi's text for a failed stop reason


class ProviderError(Exception):
    """A failure after the stream was returned; its text becomes the error message.

    Attributes:
        message: The error text the assistant message will carry.
        diagnostics: Provider diagnostics to attach to that message.
        error_body: The response body's `error` object, for provider-specific detail; None if
            there was none.
        status: The HTTP status of a failed request; None for other failures.

    """

    def __init__(
        self,
        message: str,
        diagnostics: tuple[Diagnostic, ...] = (),
        error_body: JsonValue = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.diagnostics = diagnostics
        self.error_body = error_body  # the body's "error" object, for provider-specific detail
        self.status = status


@final
class StreamAborted(Exception):
    """The attempt's signal fired while the provider was waiting."""

    def __init__(self) -> None:
        super().__init__(ABORTED_MESSAGE)


def snippet(text: str, limit: int = 200) -> str:
    """Return `text` cut to `limit` characters, marked when cut."""
    return text if len(text) <= limit else text[:limit] + "..."


# -- stop reasons and usage, for every vendor ----------------------------------------------


def read_stop_reason(table: Mapping[str, StopReason], reason: str) -> StopReason:
    """Map a vendor's stop reason through `table`; an unknown one fails the stream, as in Pi.

    >>> read_stop_reason({"end_turn": "stop"}, "end_turn")
    'stop'
    """
    mapped = table.get(reason)
    if mapped is None:
        raise ProviderError(f"Unhandled stop reason: {reason}")
    return mapped


def token_count(value: object) -> int | None:
    """Return a reported token count, or None when the field is missing or not a count.

    >>> token_count(12), token_count(None), token_count(True), token_count("12")
    (12, None, None, None)
    """
    if type(value) is int:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def priced_usage(
    model: Model,
    input_tokens: int,
    output_tokens: int,
    cache_read: int = 0,
    cache_write: int = 0,
    total: int | None = None,
    *,
    reasoning: int | None = None,
    cache_write_1h: int | None = None,
) -> Usage:
    """Return Pi's usage with its cost; the total defaults to the sum of the four counts."""
    if total is None:
        total = input_tokens + output_tokens + cache_read + cache_write
    usage = Usage(
        input_tokens,
        output_tokens,
        cache_read,
        cache_write,
        total,
        cache_write_1h=cache_write_1h,
        reasoning=reasoning,
    )
    return calculate_cost(model, usage)


def decode_object(data: str) -> dict[str, Any]:
    """Decode an event's data as a JSON object; anything else fails the stream."""
    try:
        value = loads(data)
    except ValueError as exc:
        raise ProviderError(
            f"Could not parse stream chunk as JSON ({exc}): {snippet(data)}"
        ) from exc
    if not isinstance(value, dict):
        raise ProviderError(f"Unexpected stream chunk (not a JSON object): {data[:200]}")
    return value


def str_field(obj: JsonObject, key: str) -> str:
    """Return `obj[key]`, which must be a string (a malformed event fails the stream)."""
    value = obj.get(key)
    if isinstance(value, str):
        return value
    raise TypeError(f"{key!r} is {type(value).__name__}, not a string")


def str_or_none(value: object) -> str | None:
    """Return `value` if it is a string, else None (for optional ids and signatures)."""
    return value if isinstance(value, str) else None


def as_object(value: object) -> JsonObject:
    """Return `value` if it is a JSON object, else an empty one (for optional sub-objects)."""
    return value if isinstance(value, dict) else _EMPTY


_EMPTY: Final[JsonObject] = {}


# -- the parser skeleton --------------------------------------------------------------------


class StreamParser:
    """Turns one response's decoded stream events into Pi's events; does no I/O.

    Attributes:
        ended: The vendor's end marker arrived: whoever feeds the parser reads no further.

    """

    __slots__ = ("_b", "_model", "_out", "_started", "ended")

    vendor: str = "provider"  # names the stream in error messages
    # Pi's text when the body ends before the provider said why it stopped (per vendor).
    no_stop_reason: str = "Stream ended without a stop reason"

    def __init__(self, model: Model) -> None:
        self._model = model
        self._started = time.monotonic()  # Pi times a response from its stream's creation
        self._b = PartialBuilder(
            api=model.api, provider=model.provider, model=model.id, timestamp=now_ms()
        )
        self.ended = False
        self._out: list[AssistantMessageEvent] = []

    @property
    def builder(self) -> PartialBuilder:
        """The message built so far."""
        return self._b

    # -- what the transport calls --------------------------------------------------------
    def start(self) -> StartEvent:
        """Return Pi's `start` event (the response is open)."""
        return StartEvent(partial=self._b.snapshot())

    def feed(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Apply one decoded stream event; return the Pi events it causes.

        Raises `ProviderError` (and only that) when the event fails the stream.
        """
        try:
            self._on_event(event, data)
        except ProviderError:
            raise
        except Exception as exc:  # a malformed event the vendor code tripped over
            raise ProviderError(
                f"Malformed {self.vendor} stream event ({type(exc).__name__}: {exc}): "
                f"{snippet(data)}"
            ) from exc
        out, self._out = self._out, []
        return out

    def finish(self) -> list[AssistantMessageEvent]:
        """End the stream: the blocks' end events and `done`; raise `ProviderError` on failure."""
        try:
            self._on_end()
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(
                f"Malformed {self.vendor} stream ({type(exc).__name__}: {exc})"
            ) from exc
        out, self._out = self._out, []
        return out

    def fail(self, exc: BaseException, aborted: bool) -> list[AssistantMessageEvent]:
        """Return the events made before a failure, then Pi's terminal `error` event."""
        reason: Literal["error", "aborted"] = "aborted" if aborted else "error"
        if aborted or isinstance(exc, StreamAborted):
            text = ABORTED_MESSAGE
        elif isinstance(exc, ProviderError):
            text = exc.message
        else:
            text = str(exc) or type(exc).__name__
        message = self._b.message(reason, error_message=text, duration_ms=self._elapsed_ms())
        diagnostics = exc.diagnostics if isinstance(exc, ProviderError) else ()
        if diagnostics:
            message = evolve(message, diagnostics=(*(message.diagnostics or ()), *diagnostics))
        out, self._out = self._out, []
        out.append(ErrorEvent(reason=reason, error=message))
        return out

    # -- what a vendor implements ---------------------------------------------------------
    def _on_event(self, event: str, data: str) -> None:
        raise NotImplementedError

    def _on_end(self) -> None:
        raise NotImplementedError

    # -- block helpers: builder and events together ---------------------------------------
    def _open_text(self, text: str = "", signature: str | None = None) -> int:
        at = self._b.open_text(text, signature)
        self._out.append(TextStartEvent(content_index=at, partial=self._b.snapshot()))
        return at

    def _open_thinking(
        self, text: str = "", signature: str | None = None, redacted: bool | None = None
    ) -> int:
        at = self._b.open_thinking(text, signature, redacted)
        self._out.append(ThinkingStartEvent(content_index=at, partial=self._b.snapshot()))
        return at

    def _open_tool_call(
        self, call_id: str, name: str, thought_signature: str | None = None, arguments: str = ""
    ) -> int:
        at = self._b.open_tool_call(call_id, name, thought_signature)
        if arguments:
            self._b.append(at, arguments)
        self._out.append(ToolCallStartEvent(content_index=at, partial=self._b.snapshot()))
        return at

    def _delta(self, at: int, delta: str, *, append: bool = True) -> None:
        """Append `delta` to block `at` (unless told the text is already there); emit it."""
        b = self._b
        if append and delta:
            b.append(at, delta)
        kind = b.kind(at)
        cls = _DELTAS[kind]
        self._out.append(cls(at, delta, b.snapshot()))  # (positional: one per delta)

    def _end(self, at: int, arguments: JsonObject | None = None) -> None:
        """Close block `at` (a tool call's arguments parsed from its text unless given)."""
        b = self._b
        kind = b.kind(at)
        if kind == "toolCall":
            call = b.close_tool_call(at, arguments)
            self._out.append(
                ToolCallEndEvent(content_index=at, tool_call=call, partial=b.snapshot())
            )
        elif kind == "text":
            self._out.append(
                TextEndEvent(content_index=at, content=b.text(at), partial=b.snapshot())
            )
        else:
            self._out.append(
                ThinkingEndEvent(content_index=at, content=b.text(at), partial=b.snapshot())
            )

    def _has_tool_calls(self) -> bool:
        b = self._b
        return any(b.kind(i) == "toolCall" for i in range(len(b)))

    def _elapsed_ms(self) -> int:
        """Milliseconds since the stream was made, rounded as JavaScript's `Math.round`."""
        return int((time.monotonic() - self._started) * 1000 + 0.5)

    def _done(self, reason: StopReason | None = None, error_message: str | None = None) -> None:
        """Finish with Pi's `done`, or fail the stream when the stop reason is a failure.

        `reason` defaults to the one recorded (`PartialBuilder.set_stop`); a response that is
        still "pending" never said why it stopped, which fails it too.
        """
        b = self._b
        if reason is None:
            reason = b.head.stop_reason
        if reason == "error" or reason == "aborted":
            raise ProviderError(error_message or b.head.error_message or UNKNOWN_ERROR)
        if reason == "pending":
            raise ProviderError(self.no_stop_reason)
        message = b.message(reason, duration_ms=self._elapsed_ms())
        self._out.append(DoneEvent(reason=reason, message=message))


_DELTAS: Final[dict[str, Any]] = {
    "text": TextDeltaEvent,
    "thinking": ThinkingDeltaEvent,
    "toolCall": ToolCallDeltaEvent,
}


__all__ = [
    "ABORTED_MESSAGE",
    "UNKNOWN_ERROR",
    "ProviderError",
    "StreamAborted",
    "StreamParser",
    "as_object",
    "decode_object",
    "now_ms",
    "priced_usage",
    "read_stop_reason",
    "snippet",
    "str_field",
    "str_or_none",
    "token_count",
]
