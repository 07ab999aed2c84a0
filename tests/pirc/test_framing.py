"""LF-only JSONL framing of pi's stdout: chunking, separators, CRLF, oversize and bad lines."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.pirc import FrameStats, LineFramer, parse_record

# Text that includes the separators other line readers split on.
TRICKY = st.text(
    alphabet=st.sampled_from(["a", "é", "\u2028", "\u2029", "\u0085", "\r", '"', "\\", "😀", " "]),
    max_size=40,
)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in [*points, len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


def feed_all(framer: LineFramer, chunks: list[bytes]) -> list[bytes]:
    lines: list[bytes] = []
    for c in chunks:
        lines += framer.feed(c)
    tail = framer.close()
    return lines + ([tail] if tail is not None else [])


@given(st.lists(TRICKY, max_size=8), st.lists(st.integers(0, 10_000), max_size=12), st.booleans())
def test_records_survive_any_chunking(texts: list[str], cuts: list[int], crlf: bool) -> None:
    """Records split at arbitrary byte positions (mid-UTF-8 too) come back whole, in order."""
    records = [json.dumps({"t": t}, ensure_ascii=False).encode() for t in texts]
    end = b"\r\n" if crlf else b"\n"
    data = b"".join(r + end for r in records)
    assert feed_all(LineFramer(1 << 20), chunked(data, cuts)) == records
    assert [parse_record(r) for r in records] == [{"t": t} for t in texts]


def test_unicode_separators_are_not_line_ends() -> None:
    """U+2028, U+2029 and U+0085 inside a string stay inside the record."""
    rec = json.dumps({"text": "a\u2028b\u2029c\u0085d"}, ensure_ascii=False).encode()
    assert LineFramer(1024).feed(rec + b"\n") == [rec]
    assert parse_record(rec) == {"text": "a\u2028b\u2029c\u0085d"}


def test_only_one_trailing_cr_is_stripped() -> None:
    """A CRLF record loses one CR; a bare CR mid-record is content."""
    assert LineFramer(64).feed(b"ab\r\r\nc\rd\n") == [b"ab\r", b"c\rd"]
    assert LineFramer(4).feed(b"ab\r\r\nc\rd\n") == [b"ab\r", b"c\rd"]  # chunk over the limit


@given(
    st.lists(st.tuples(st.integers(0, 60), st.booleans()), min_size=1, max_size=10),
    st.lists(st.integers(0, 2000), max_size=10),
)
def test_oversize_lines_are_skipped_and_counted(
    spec: list[tuple[int, bool]], cuts: list[int]
) -> None:
    """Lines over the limit vanish (counted), the rest survive, whatever the chunking."""
    limit = 30
    lines = [(b"x" * n) for n, _ in spec]
    data = b"".join(line + b"\n" for line in lines)
    stats = FrameStats()
    got = feed_all(LineFramer(limit, stats), chunked(data, cuts))
    assert got == [line for line in lines if len(line) <= limit]
    assert stats.oversize_lines == sum(len(line) > limit for line in lines)
    assert stats.oversize_bytes == sum(len(line) for line in lines if len(line) > limit)


def test_oversize_line_is_not_held_in_memory() -> None:
    """While skipping a huge line, the framer keeps no bytes of it."""
    framer = LineFramer(100)
    for _ in range(100):
        assert framer.feed(b"y" * 10_000) == []
    assert framer._parts == []
    assert framer.feed(b"tail\n{}\n") == [b"{}"]
    assert framer.stats.oversize_lines == 1
    assert framer.stats.oversize_bytes == 1_000_004


def test_unterminated_tail_is_returned_at_close() -> None:
    """Pi killed mid-write leaves a partial record; close() hands it over."""
    framer = LineFramer(64)
    assert framer.feed(b'{"a":1}\n{"b":') == [b'{"a":1}']
    assert framer.close() == b'{"b":'
    assert framer.close() is None


def test_bad_records_are_logged_counted_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    """Garbage, non-objects and invalid UTF-8 give None, a count and an error log."""
    stats = FrameStats()
    with caplog.at_level(logging.ERROR, logger="mule.pirc"):
        assert parse_record(b"not json", stats) is None
        assert parse_record(b"[1,2]", stats) is None
        assert parse_record(b'"\xff"', stats) is None
        assert parse_record(b"   ", stats) is None  # blank: ignored, not an error
    assert stats.bad_lines == 3
    assert len(caplog.records) == 3


def test_limit_must_be_positive() -> None:
    """A zero limit is a programming error."""
    with pytest.raises(ValueError, match="positive"):
        LineFramer(0)
