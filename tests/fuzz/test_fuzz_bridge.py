"""Fuzz the bridge's JSONL framer and its line handler (issue 17.2).

Invariants: the framer splits any byte stream, however chunked, into exactly its LF-terminated
records (one trailing CR stripped; over-long ones skipped and counted, never held); the line
handler takes any line (garbage, truncated, mutated or deeply nested pi records) without raising
and without a handler error (`stats.handler_errors`: an exception no handler expected), and the
job machine stays consistent (a finished job is done exactly once).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.effects import RunEnd
from mule.pirc import Bridge, BridgeConfig, FrameStats, LineFramer
from tests.fuzz.budget import fuzz_settings, tally

pytestmark = pytest.mark.slow  # a few seconds of examples each

RECORDED = Path(__file__).parents[1] / "pirc" / "recorded"
# pi 0.73.1's and 1.6.0's recorded lines (the 70 KB ones of a large output left out)
PI_LINES = [
    line
    for p in sorted(RECORDED.rglob("*.jsonl"))
    for line in p.read_bytes().splitlines()
    if len(line) < 20_000
]

records = st.lists(st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")), max_size=12)


@fuzz_settings(300)
@given(records, st.lists(st.booleans(), max_size=12), st.data())
def test_framer_splits_any_chunking(
    recs: list[bytes], crlf: list[bool], data: st.DataObject
) -> None:
    tally("bridge: framer chunking")
    limit = 64
    ends = [b"\r\n" if i < len(crlf) and crlf[i] else b"\n" for i in range(len(recs))]
    stream = b"".join(r + e for r, e in zip(recs, ends, strict=True))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    stats = FrameStats()
    framer = LineFramer(limit, stats)
    got: list[bytes] = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got += framer.feed(stream[a:b])
    assert framer.close() is None
    want, oversize = [], 0
    for r, e in zip(recs, ends, strict=True):
        body = r + e[:-1]  # what precedes the LF
        if len(body) > limit:
            oversize += 1
            continue
        want.append(body[:-1] if body.endswith(b"\r") else body)
    assert got == want
    assert stats.oversize_lines == oversize


def _mutate(draw: st.DrawFn, line: bytes) -> bytes:
    how = draw(st.sampled_from(["keep", "truncate", "flip", "deep", "drop_key", "swap_value"]))
    if how == "truncate":
        return line[: draw(st.integers(0, len(line)))]
    if how == "flip":
        i = draw(st.integers(0, max(len(line) - 1, 0)))
        return line[:i] + bytes([draw(st.integers(0, 255))]) + line[i + 1 :]
    if how == "deep":
        n = draw(st.sampled_from([10, 255, 257, 1000, 50_000]))
        return b'{"type":"message_update","x":' + b"[" * n + b"]" * n + b"}"
    record: Any = json.loads(line)
    keys = list(record)
    if how == "drop_key" and keys:
        record.pop(draw(st.sampled_from(keys)))
    elif how == "swap_value" and keys:
        scalar = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
        value = draw(st.recursive(scalar, lambda c: st.lists(c) | st.dictionaries(st.text(), c)))
        record[draw(st.sampled_from(keys))] = value
    return json.dumps(record).encode()


@st.composite
def pi_streams(draw: st.DrawFn) -> list[bytes]:
    picked = draw(st.lists(st.sampled_from(PI_LINES), min_size=1, max_size=25))
    garbage = st.binary(max_size=40)
    return [draw(garbage) if draw(st.integers(0, 9)) == 0 else _mutate(draw, p) for p in picked]


async def _handle_all(lines: list[bytes]) -> Bridge:
    b = Bridge(BridgeConfig(provider="local", model="fake", executable="/nonexistent"))
    sub = b.subscribe(capacity=100_000)
    for line in lines:
        await b._handle_line(line)
    ends: dict[Any, int] = {}
    sub.close()
    async for ev in sub:
        if isinstance(ev, RunEnd):
            ends[ev.run] = ends.get(ev.run, 0) + 1
    assert all(n == 1 for n in ends.values()), ends
    return b


@fuzz_settings(200)
@given(pi_streams())
def test_line_handler_takes_any_line(lines: list[bytes]) -> None:
    tally("bridge: line handler")
    b = anyio.run(_handle_all, lines)
    assert b.stats.handler_errors == 0
    job = b.job
    if job is not None and job.done.is_set():
        assert job.result is not None or job.state.phase == "done"
