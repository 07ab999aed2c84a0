"""The HTTP half of every provider: one POST with SDK-style retries, then the streamed body.

`provider_stream(model, options, parser, request)` is the whole I/O of a provider call. It
builds the vendor's `HttpRequest` (lazily, so a failure there is an `error` event), lets
`options.on_payload` replace the body, sends it with the SDKs' retry rules (`max_retries`,
backoff, the server's Retry-After up to `max_retry_delay_ms`), bounds the wait for the headers
by `timeout_ms`, shows the status and headers to `options.on_response`, then decodes the body
(SSE events or NDJSON lines, `_frames`) and hands each event to the vendor's I/O-free
`StreamParser`; the Pi events of one network read go to the stream as one batch (one await and
one step of the loop for all of them). Any failure, HTTP status errors included, becomes Pi's
terminal `error` event (stopReason "aborted" iff the signal fired), and the connection is
closed before the terminal event is delivered, whichever way the stream ends.

Every network await runs inside its own cancel scope that the attempt's `AbortSignal` cancels,
so an abort ends the call at once, stalled or not; no scope is held across a `yield`.

Status errors read like the OpenAI/Anthropic SDKs' (`"429 Rate limit reached"`), and the error
message carries a `Diagnostic(type="http_error", details={"status", "retryAfterMs"?})` so the
loop's `retry_after_ms` setting can honour the server's wait (`_simple.retry_after_ms`).
"""

from __future__ import annotations

import contextlib
import email.utils
import inspect
import math
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, final

import anyio
from attrs import frozen

from mule.pi._assistant_events import AssistantMessageEvent
from mule.pi._context import ProviderResponse, StreamOptions
from mule.pi._event_stream import AssistantMessageEventStream
from mule.pi._extras import needs_extra
from mule.pi._json import JsonValue, loads, stringify
from mule.pi._model import Model
from mule.pi.providers._frames import MAX_EVENT_CHARS, NdjsonDecoder, SseDecoder
from mule.pi.providers._parser import ProviderError, StreamAborted, StreamParser
from mule.pi.providers._simple import http_error_diagnostic

with needs_extra("providers", "mule's model providers"):
    import httpx

if TYPE_CHECKING:
    from mule.pi import AbortSignal

DEFAULT_MAX_RETRIES: Final = 0  # Pi 1.6.0 retries a request only when told to (maxRetries)
DEFAULT_MAX_RETRY_DELAY_MS: Final = 60_000
DEFAULT_TIMEOUT_MS: Final = 600_000  # the SDKs' default request timeout

Framing: TypeAlias = Literal["sse", "ndjson"]


@final
@frozen
class HttpRequest:
    """What a vendor sends: the endpoint, its headers, and the JSON body.

    Attributes:
        url: The endpoint's full URL.
        headers: The request headers, authentication included.
        body: The JSON body, before it is encoded (`options.on_payload` may replace it).

    """

    url: str
    headers: Mapping[str, str]
    body: JsonValue


# -- status errors and Retry-After -----------------------------------------------------------


def status_error_message(status: int, body: str) -> str:
    """Format an HTTP error like the Stainless SDKs: `"<status> <error.message>"`.

    >>> status_error_message(429, '{"error": {"message": "Slow down", "type": "rate"}}')
    '429 Slow down'
    >>> status_error_message(502, "Bad gateway")
    '502 Bad gateway'
    """
    parsed: Any = None
    with contextlib.suppress(ValueError):
        parsed = loads(body) if body else None
    msg: str | None
    if parsed is not None:
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict) and error.get("message"):
            m = error["message"]
            msg = m if isinstance(m, str) else stringify(m)
        elif error:
            msg = stringify(error)
        elif isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
            msg = parsed["message"]  # some gateways answer {"message": ...} without "error"
        else:
            msg = None
    else:
        msg = body or None
    return f"{status} {msg}" if msg else f"{status} status code (no body)"


MAX_ERROR_BODY_CHARS: Final = 4000
"""Pi's cap on the error body quoted in an error message (UTF-16 code units)."""


def _truncate_utf16(text: str, limit: int) -> str:
    units = len(text.encode("utf-16-le")) // 2
    if units <= limit:
        return text
    out, used = [], 0
    for ch in text:
        width = 2 if ord(ch) > 0xFFFF else 1
        if used + width > limit:
            break
        out.append(ch)
        used += width
    return f"{''.join(out)}... [truncated {units - limit} chars]"


def format_provider_error(exc: ProviderError, prefix: str | None = None) -> str:
    """Word a failed request as Pi 1.6.0 does: the status and the error body, when there is one.

    With an `error` object in the body that the SDK's message does not already quote:
    `"<status>: <body>"` (`"<prefix> (<status>): <body>"`); otherwise the SDK's message
    (prefixed the same way when there is a prefix and a status).

    >>> format_provider_error(ProviderError("400 Bad", error_body={"message": "Bad"}, status=400))
    '400: {"message":"Bad"}'
    """
    body = exc.error_body
    if exc.status is not None and isinstance(body, dict) and body:
        text = _truncate_utf16(stringify(body).strip(), MAX_ERROR_BODY_CHARS)
        if text and text not in exc.message:
            return f"{prefix} ({exc.status}): {text}" if prefix else f"{exc.status}: {text}"
    if prefix is not None and exc.status is not None:
        return f"{prefix} ({exc.status}): {exc.message}"
    return exc.message


def _error_object(body: str) -> JsonValue:
    try:
        parsed = loads(body) if body else None
    except ValueError:
        return None
    return parsed.get("error") if isinstance(parsed, dict) else None


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Return the server's requested wait in ms from retry-after-ms or Retry-After, else None.

    >>> parse_retry_after({"retry-after": "2"})
    2000.0
    >>> parse_retry_after({"retry-after-ms": "150", "retry-after": "9"})
    150.0
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms:
        with contextlib.suppress(ValueError):
            value = float(raw_ms)
            if value == value:  # NaN is no answer
                return max(0.0, value)
    raw = lowered.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw) * 1000)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() * 1000 - current * 1000)


def _should_retry(response: httpx.Response) -> bool:
    hint = response.headers.get("x-should-retry")
    if hint == "true":
        return True
    if hint == "false":
        return False
    return response.status_code in (408, 409, 429) or response.status_code >= 500


def _backoff_ms(retry_index: int) -> float:
    # The SDKs' schedule: 0.5 s doubling up to 8 s, minus up to 25 % jitter.
    base = min(0.5 * 2.0**retry_index, 8.0)
    return base * (1 - random.random() * 0.25) * 1000


# -- abortable awaits ------------------------------------------------------------------------


@contextlib.contextmanager
def abortable(signal: AbortSignal | None) -> Iterator[anyio.CancelScope]:
    """Run the body in a cancel scope that the signal cancels; raise `StreamAborted` if it did."""
    if signal is None:
        with anyio.CancelScope() as scope:
            yield scope
        return
    with anyio.CancelScope() as scope:
        if signal.aborted:
            scope.cancel()
        # Timeout signals abort lazily (at their deadline, when observed): mirror the deadline.
        deadline = signal.deadline
        if deadline is not None:
            scope.deadline = anyio.current_time() + max(0.0, deadline - time.monotonic())

        def cancel(_: AbortSignal) -> None:
            scope.cancel()

        signal.add_listener(cancel)
        try:
            yield scope
        finally:
            signal.remove_listener(cancel)
    if scope.cancelled_caught or signal.aborted:
        raise StreamAborted


# -- hooks -----------------------------------------------------------------------------------


async def apply_payload_hook(options: StreamOptions, payload: JsonValue, model: Model) -> JsonValue:
    """Let `options.on_payload` inspect or replace the request body (sync or async)."""
    hook = options.on_payload
    if hook is None:
        return payload
    result = hook(payload, model)
    if inspect.isawaitable(result):
        result = await result
    return payload if result is None else result


async def notify_response(options: StreamOptions, response: ProviderResponse, model: Model) -> None:
    """Call `options.on_response` with the status and headers (sync or async)."""
    hook = options.on_response
    if hook is None:
        return
    result = hook(response, model)
    if inspect.isawaitable(result):
        await result


def merge_headers(*layers: Mapping[str, str] | None) -> dict[str, str]:
    """Merge header layers left to right; later layers override (case-insensitively)."""
    merged: dict[str, str] = {}
    for layer in layers:
        for name, value in (layer or {}).items():
            for old in [k for k in merged if k.lower() == name.lower()]:
                del merged[old]
            merged[name] = value
    return merged


# -- the connection --------------------------------------------------------------------------

_ssl_context: ssl.SSLContext | None = None


def _shared_ssl_context() -> ssl.SSLContext:
    # Building an SSL context costs milliseconds; clients are per call, the context is shared.
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = ssl.create_default_context()
    return _ssl_context


@final
class _RequestTimedOut(Exception):
    """The response headers did not arrive within `timeout_ms`."""


@final
class Connection:
    """One provider call: POST a JSON body (with retries), then read the body's bytes."""

    def __init__(self, options: StreamOptions) -> None:
        self._options = options
        self._signal = options.signal
        self._client: httpx.AsyncClient | None = None
        self._response: httpx.Response | None = None
        self._chunks: AsyncIterator[bytes] | None = None

    async def open(self, url: str, headers: Mapping[str, str], body: JsonValue) -> ProviderResponse:
        """Send the request, retrying like the SDKs; return the 2xx status and headers.

        Raises `ProviderError` for HTTP/connection failures and `StreamAborted` on abort.
        """
        opts = self._options
        max_retries = DEFAULT_MAX_RETRIES if opts.max_retries is None else opts.max_retries
        cap = (
            DEFAULT_MAX_RETRY_DELAY_MS
            if opts.max_retry_delay_ms is None
            else opts.max_retry_delay_ms
        )
        timeout_s = (opts.timeout_ms if opts.timeout_ms is not None else DEFAULT_TIMEOUT_MS) / 1000
        self._client = httpx.AsyncClient(timeout=None, verify=_shared_ssl_context())
        content = stringify(body).encode()
        request_headers = merge_headers({"content-type": "application/json"}, headers)
        attempt = 0
        while True:
            failure: ProviderError
            requested: float | None = None
            retryable = True
            try:
                response = await self._send(url, request_headers, content, timeout_s)
            except (httpx.TimeoutException, _RequestTimedOut):
                failure = ProviderError("Request timed out.")
            except httpx.TransportError as exc:
                failure = ProviderError(f"Connection error. ({type(exc).__name__}: {exc})")
            else:
                if response.is_success:
                    self._response = response
                    return ProviderResponse(response.status_code, dict(response.headers.items()))
                text = await self._read_error_body(response)
                requested = parse_retry_after(response.headers)
                retryable = _should_retry(response)
                failure = ProviderError(
                    status_error_message(response.status_code, text),
                    (http_error_diagnostic(response.status_code, requested),),
                    _error_object(text),
                    response.status_code,
                )
            if not retryable or attempt >= max_retries:
                raise failure
            if requested is not None and cap > 0 and requested > cap:
                raise ProviderError(
                    f"Server requested {math.ceil(requested / 1000)}s retry delay "
                    f"(max: {math.ceil(cap / 1000)}s). {failure.message}",
                    failure.diagnostics,
                )
            delay = requested if requested is not None else _backoff_ms(attempt)
            attempt += 1
            with abortable(self._signal):
                await anyio.sleep(delay / 1000)

    async def _send(
        self, url: str, headers: Mapping[str, str], content: bytes, timeout_s: float
    ) -> httpx.Response:
        assert self._client is not None
        request = self._client.build_request("POST", url, headers=headers, content=content)
        # The SDK timeout covers the wait for the response headers, not the streamed body.
        with anyio.move_on_after(timeout_s) as deadline, abortable(self._signal):
            return await self._client.send(request, stream=True)
        assert deadline.cancelled_caught
        raise _RequestTimedOut

    async def _read_error_body(self, response: httpx.Response) -> str:
        try:
            with abortable(self._signal):
                data = await response.aread()
        except httpx.HTTPError:
            return ""
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
        return data.decode("utf-8", "replace")

    def expect_event_stream(self) -> None:
        """Fail unless the open response says it is an event stream (as the SDKs' readers do)."""
        assert self._response is not None
        content_type = self._response.headers.get("content-type", "")
        if "text/event-stream" not in content_type.partition(";")[0]:
            raise ProviderError(
                f"Expected a text/event-stream response, got content-type {content_type!r}"
            )

    async def read(self) -> bytes | None:
        """Return the next piece of the body, or None at its end.

        A broken connection raises `ProviderError` ("terminated"); an abort, `StreamAborted`.
        """
        chunks = self._chunks
        if chunks is None:
            if self._response is None:
                raise RuntimeError("read() before a successful open()")
            chunks = self._chunks = self._response.aiter_bytes()
        try:
            if self._signal is None:
                return await chunks.__anext__()
            with abortable(self._signal):
                return await chunks.__anext__()
        except StopAsyncIteration:
            return None
        except httpx.TransportError as exc:
            detail = str(exc) or type(exc).__name__
            raise ProviderError(f"Connection terminated mid-stream ({detail})") from exc
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"Could not read the response body ({type(exc).__name__}: {exc})"
            ) from exc

    async def aclose(self) -> None:
        """Close the response and the client; safe to call twice, shielded from cancellation."""
        with anyio.CancelScope(shield=True):
            chunks, self._chunks = self._chunks, None
            response, self._response = self._response, None
            client, self._client = self._client, None
            if response is not None:
                with contextlib.suppress(Exception):
                    await response.aclose()
            if chunks is not None:
                await _drain(chunks)
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.aclose()


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    # httpx reads a body through a stack of nested async generators, and closing the outer one
    # leaves the inner ones suspended (trio warns when they are collected). With the connection
    # already closed, one more step makes the innermost read fail, which unwinds every layer.
    with anyio.move_on_after(1.0):
        for _ in range(10_000):
            try:
                await chunks.__anext__()
            except Exception:  # the end, or the closed connection's error: either unwinds
                return


# -- the one driver --------------------------------------------------------------------------


def provider_stream(
    model: Model,
    options: StreamOptions,
    parser: StreamParser,
    request: Callable[[], HttpRequest],
    *,
    on_http_error: Callable[[ProviderError], ProviderError] | None = None,
    framing: Framing = "sse",
) -> AssistantMessageEventStream:
    """Return a pull-mode stream of one provider call, decoded by `parser`.

    `request` builds the vendor's request when the consumer first pulls; `on_http_error` may
    reword a failed request's error as the vendor's SDK words it. Never raises: every failure
    is the stream's terminal `error` event.
    """
    source = _drive(model, options, parser, request, on_http_error, framing)
    return AssistantMessageEventStream.from_batches(source)


async def _drive(
    model: Model,
    options: StreamOptions,
    parser: StreamParser,
    request: Callable[[], HttpRequest],
    on_http_error: Callable[[ProviderError], ProviderError] | None,
    framing: Framing,
) -> AsyncIterator[list[AssistantMessageEvent]]:
    """Yield the Pi events of each network read as one batch (a read with none yields none)."""
    conn = Connection(options)
    signal = options.signal
    events: list[AssistantMessageEvent] = []  # the current read's, not yet handed on
    try:
        try:
            wanted = request()
            body = await apply_payload_hook(options, wanted.body, model)
            try:
                response = await conn.open(wanted.url, wanted.headers, body)
            except ProviderError as exc:
                if on_http_error is None:
                    raise
                raise on_http_error(exc) from exc
            await notify_response(options, response, model)
            yield [parser.start()]
            limit = MAX_EVENT_CHARS
            decoder = SseDecoder(limit) if framing == "sse" else NdjsonDecoder(limit)
            if framing == "sse":
                conn.expect_event_stream()
            feed = parser.feed
            while True:
                chunk = await conn.read()
                frames = decoder.feed(chunk) if chunk is not None else decoder.close()
                for event, data in frames:
                    events += feed(event, data)
                    if parser.ended:
                        break
                if chunk is None or parser.ended:
                    break
                if events:
                    batch, events = events, []
                    yield batch
                    del batch  # handed on: not held while the next read waits
            if signal is not None and signal.aborted:
                raise StreamAborted
            events += parser.finish()  # the last read's events and the finish: one batch
        except Exception as exc:  # failures after the stream was returned are events
            await conn.aclose()
            yield events + parser.fail(exc, signal is not None and signal.aborted)
            return
        await conn.aclose()
        yield events
    finally:
        await conn.aclose()


__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_RETRY_DELAY_MS",
    "DEFAULT_TIMEOUT_MS",
    "MAX_ERROR_BODY_CHARS",
    "Connection",
    "Framing",
    "HttpRequest",
    "abortable",
    "apply_payload_hook",
    "format_provider_error",
    "merge_headers",
    "notify_response",
    "parse_retry_after",
    "provider_stream",
    "status_error_message",
]
