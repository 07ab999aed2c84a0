"""Strict JSONL framing of pi's stdout: only LF ends a record, oversize records are skipped.

Decoding is bounded too: a record nested deeper than a limit is refused before `json.loads`
sees it (Python's decoder and every walker after it recurse), with a typed `LineError`.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Final, Literal, TypeAlias, final

from attrs import define

from mule.pirc._commands import BridgeError

log = logging.getLogger("mule.pirc")


@define
class FrameStats:
    """Live counters of the framer and decoder (mutated in place by the reader).

    Attributes:
        lines: Lines framed (within `max_line_bytes`), good or bad.
        bytes: Bytes read from pi's stdout.
        oversize_lines: Lines longer than `max_line_bytes`, skipped.
        oversize_bytes: The bytes those lines held.
        bad_lines: Lines that were not JSON, not an object or not UTF-8, skipped.
        deep_lines: Lines nested deeper than `max_line_depth`, skipped undecoded.

    """

    lines: int = 0
    bytes: int = 0
    oversize_lines: int = 0
    oversize_bytes: int = 0
    bad_lines: int = 0
    deep_lines: int = 0


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


DEFAULT_DEPTH: Final = 256

LineProblem: TypeAlias = Literal["json", "not_object", "too_deep"]

# A JSON string (skipped whole) or one bracket: the depth scan's tokens.
_DEPTH_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


@final
class LineError(BridgeError, ValueError):
    """A record that is not a JSON object mule will decode; `problem` says why."""

    def __init__(self, problem: LineProblem, detail: str) -> None:
        self.problem: LineProblem = problem
        super().__init__(detail)


def nesting_exceeds(line: bytes, limit: int) -> bool:
    """Whether JSON text `line` nests arrays and objects more than `limit` deep.

    Most records have fewer brackets than the limit in all, which settles it with two C-speed
    counts; only the others are scanned (brackets inside strings do not count).
    """
    if line.count(b"[") + line.count(b"{") <= limit:
        return False
    depth = 0
    for m in _DEPTH_TOKEN.finditer(line):
        c = m.group()
        if c in b"[{" and len(c) == 1:
            depth += 1
            if depth > limit:
                return True
        elif c in b"]}" and len(c) == 1:
            depth -= 1
    return False


def decode_line(line: bytes, max_depth: int = DEFAULT_DEPTH) -> dict[str, Any]:
    """Decode one record as a JSON object, or raise `LineError` (never anything else)."""
    if nesting_exceeds(line, max_depth):
        raise LineError("too_deep", f"nested deeper than {max_depth} levels")
    try:
        value = json.loads(line)
    except RecursionError:  # cannot happen below the limit; kept typed whatever the stack
        raise LineError("too_deep", "nested too deeply to decode") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both land here
        raise LineError("json", f"unparsable line ({exc})") from None
    if not isinstance(value, dict):
        raise LineError("not_object", "not a JSON object")
    return value


def parse_record(
    line: bytes, stats: FrameStats | None = None, max_depth: int = DEFAULT_DEPTH
) -> dict[str, Any] | None:
    """Decode one record as a JSON object; log, count and return None for anything else."""
    if not line.strip():
        return None
    try:
        return decode_line(line, max_depth)
    except LineError as exc:
        if stats is not None:
            if exc.problem == "too_deep":
                stats.deep_lines += 1
            else:
                stats.bad_lines += 1
        log.error("pi stdout: %s: %.200r", exc, line)
        return None


__all__ = [
    "DEFAULT_DEPTH",
    "FrameStats",
    "LineError",
    "LineFramer",
    "LineProblem",
    "decode_line",
    "nesting_exceeds",
    "parse_record",
]
