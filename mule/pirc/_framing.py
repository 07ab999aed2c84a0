"""Strict JSONL framing of pi's stdout: only LF ends a record, oversize records are skipped."""

from __future__ import annotations

import json
import logging
from typing import Any, final

from attrs import define

log = logging.getLogger("mule.pirc")


@define
class FrameStats:
    """Live counters of the framer and decoder (mutated in place by the reader)."""

    lines: int = 0
    bytes: int = 0
    oversize_lines: int = 0
    oversize_bytes: int = 0
    bad_lines: int = 0


@final
class LineFramer:
    r"""Split a byte stream into records at `\n` (one trailing `\r` stripped).

    U+2028, U+2029 and U+0085 are never separators (pi writes them raw inside strings). A record
    longer than `max_line_bytes` is discarded up to its `\n` without being held in memory, and
    counted in `stats.oversize_lines`.

    >>> f = LineFramer(1024)
    >>> f.feed(b'{"a":1}\r\n{"b"') + f.feed(b':2}\n')
    [b'{"a":1}', b'{"b":2}']
    """

    def __init__(self, max_line_bytes: int, stats: FrameStats | None = None) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._max = max_line_bytes
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False
        self._skipped = 0
        self.stats = stats if stats is not None else FrameStats()

    def feed(self, chunk: bytes) -> list[bytes]:
        """Return the complete records that `chunk` finishes, in order."""
        self.stats.bytes += len(chunk)
        out: list[bytes] = []
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            end = len(chunk) if nl < 0 else nl
            self._take(chunk[start:end] if start or end != len(chunk) else chunk)
            if nl < 0:
                return out
            line = self._finish()
            if line is not None:
                out.append(line)
            start = nl + 1

    def close(self) -> bytes | None:
        """Return an unterminated last record at end of stream (pi may die mid-write)."""
        if not self._parts and not self._skipping:
            return None
        line = self._finish()
        return line or None

    def _take(self, piece: bytes) -> None:
        if not piece:
            return
        if self._skipping:
            self._skipped += len(piece)
            return
        if self._size + len(piece) > self._max:
            self._skipping = True
            self._skipped = self._size + len(piece)
            self._parts.clear()
            self._size = 0
            return
        self._parts.append(piece)
        self._size += len(piece)

    def _finish(self) -> bytes | None:
        if self._skipping:
            self._skipping = False
            self.stats.oversize_lines += 1
            self.stats.oversize_bytes += self._skipped
            log.error(
                "pi stdout: skipped a %d-byte line (limit %d bytes)", self._skipped, self._max
            )
            self._skipped = 0
            return None
        line = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        if line.endswith(b"\r"):
            line = line[:-1]
        self.stats.lines += 1
        return line


def parse_record(line: bytes, stats: FrameStats | None = None) -> dict[str, Any] | None:
    """Decode one record as a JSON object; log, count and return None for anything else."""
    if not line.strip():
        return None
    try:
        value = json.loads(line)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both land here
        if stats is not None:
            stats.bad_lines += 1
        log.error("pi stdout: unparsable line (%s): %.200r", exc, line)
        return None
    if not isinstance(value, dict):
        if stats is not None:
            stats.bad_lines += 1
        log.error("pi stdout: not a JSON object: %.200r", line)
        return None
    return value


__all__ = ["FrameStats", "LineFramer", "parse_record"]
