"""Incremental, I/O-free decoders for streamed response bodies: SSE events and NDJSON lines.

The transport feeds raw body bytes in whatever pieces the network delivers; a decoder returns
the complete `(event name, data)` pairs so far, the same however the bytes were split. UTF-8 is
decoded incrementally (a character split across pieces is joined; invalid bytes become U+FFFD);
lines end at CRLF, LF or CR, a CR split from its LF included.

`SseDecoder` interprets lines as the WHATWG event-stream format does, dispatching like the
vendors' SDKs: an event with a name but no data lines is still dispatched (with data ""); `id`
and `retry` fields are ignored (providers never reconnect). An incomplete event at the end of
the body is dropped. `NdjsonDecoder` makes each non-blank line one event with no name.

Nothing grows without a bound: an event (or line) longer than `max_chars` raises
`ProviderError` ("Stream event too large").
"""

from __future__ import annotations

import codecs
from typing import Final

from mule.pi.providers._parser import ProviderError

Frame = tuple[str, str]
"""One decoded event: its SSE event name ("" when unnamed) and its data."""

MAX_EVENT_CHARS: Final = 32 * 1024 * 1024  # far above any real event; a bound, not a budget


class _Lines:
    """Splits decoded text into complete lines, keeping the unfinished tail."""

    __slots__ = ("_cr", "_tail", "_tail_len", "_utf8", "max_chars")

    def __init__(self, max_chars: int = MAX_EVENT_CHARS) -> None:
        self.max_chars = max_chars
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._tail: list[str] = []  # pieces of the current unfinished line
        self._tail_len = 0
        self._cr = False  # the last piece ended in CR: a LF starting the next is the same break

    def _lines(self, chunk: bytes, final: bool = False) -> list[str]:
        text = self._utf8.decode(chunk, final)
        if self._cr:
            text = "\r" + text
            self._cr = False
        if text.endswith("\r") and not final:
            self._cr = True
            text = text[:-1]
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        last = lines.pop()  # after the last break: unfinished (or "" when text ends in one)
        if lines and self._tail:
            self._tail.append(lines[0])
            lines[0] = "".join(self._tail)
            self._tail, self._tail_len = [], 0
        if last:
            self._tail.append(last)
            self._tail_len += len(last)
            if self._tail_len > self.max_chars:
                raise _too_large(self.max_chars)
        if final and self._tail:
            lines.append("".join(self._tail))
            self._tail, self._tail_len = [], 0
        return lines


def _too_large(limit: int) -> ProviderError:
    return ProviderError(f"Stream event too large (over {limit} characters)")


class SseDecoder(_Lines):
    """Server-sent events from body bytes, incrementally."""

    __slots__ = ("_data", "_data_len", "_event", "_seen")

    def __init__(self, max_chars: int = MAX_EVENT_CHARS) -> None:
        super().__init__(max_chars)
        self._event = ""
        self._data: list[str] = []
        self._data_len = 0

    def feed(self, chunk: bytes) -> list[Frame]:
        """Return the events completed by `chunk`."""
        return self._frames(self._lines(chunk))

    def close(self) -> list[Frame]:
        """End of body: the events a last CR completes; one not ended by a blank line is dropped."""
        out = self._frames(self._lines(b"", final=True))
        self._event, self._data, self._data_len = "", [], 0
        return out

    def _frames(self, lines: list[str]) -> list[Frame]:
        out: list[Frame] = []
        for line in lines:
            if not line:
                if self._data or self._event:
                    out.append((self._event, "\n".join(self._data)))
                    self._event, self._data, self._data_len = "", [], 0
                continue
            if line[0] == ":":
                continue  # a comment (keep-alive)
            field, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if field == "data":
                self._data.append(value)
                self._data_len += len(value) + 1
                if self._data_len > self.max_chars:
                    raise _too_large(self.max_chars)
            elif field == "event":
                self._event = value
        return out


class NdjsonDecoder(_Lines):
    """Newline-delimited JSON documents from body bytes, one frame per non-blank line."""

    __slots__ = ()

    def feed(self, chunk: bytes) -> list[Frame]:
        """Return the lines completed by `chunk`."""
        return [("", line) for line in self._lines(chunk) if line.strip()]

    def close(self) -> list[Frame]:
        """End of body: a last line without a newline still counts."""
        return [("", line) for line in self._lines(b"", final=True) if line.strip()]


__all__ = ["MAX_EVENT_CHARS", "Frame", "NdjsonDecoder", "SseDecoder"]
