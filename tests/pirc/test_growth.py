"""The bridge's stream decoder: pi's text updates read from the line before, as json.loads reads.

`LineDecoder` decodes a streamed text or thinking update by comparing it with the last one it
decoded in full and reading only the text that is new. These tests hold it to json.loads over
whole streams: pi's own output, and drawn streams whose responses grow, change elsewhere,
split escaped surrogate pairs across lines, or arrive damaged. Every line gives json.loads's
value (keys in order) or a `LineError` exactly when json.loads fails or mule refuses the depth,
and no record handed out earlier changes afterwards.

Lines too deep to decode are skipped by the private rule `mule.pirc._framing.nesting_exceeds`.
"""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mule.pi import stringify
from mule.pirc import FrameStats, LineDecoder, LineError
from mule.pirc._framing import DEFAULT_DEPTH, nesting_exceeds
from tests.pirc.test_decode import damaged

RECORDED = sorted((Path(__file__).parent / "recorded").glob("*.jsonl"))

# Text with what JSON escapes, lone surrogates (halves of a pair too) and multi-byte letters.
PIECES = st.text(
    alphabet=st.characters(codec="utf-8")
    | st.sampled_from(['"', "\\", "\n", "\x00", "\ud83d", "\ude00", "\udfff", "é", "\u2028", "😀"]),
    max_size=6,
)


def expect(line: bytes) -> dict[str, Any] | None:
    """json.loads's record for `line`, or None where mule must raise `LineError`."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or nesting_exceeds(line, DEFAULT_DEPTH):
        return None
    return value


def check_stream(lines: list[bytes]) -> LineDecoder:
    """Decode `lines` with one decoder; each is json.loads's value, and stays so."""
    decoder = LineDecoder()
    kept: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for line in lines:
        want = expect(line)
        if want is None:
            with pytest.raises(LineError):
                decoder.decode(line)
            continue
        got = decoder.decode(line)
        assert got == want
        assert json.dumps(got) == json.dumps(want)  # keys in the same order, at every level
        kept.append((got, copy.deepcopy(want)))
    for got, want in kept:  # nothing handed out was changed by a later line
        assert got == want
    return decoder


def update(
    kind: str, index: int, delta: str, partial: dict[str, Any], message: Any
) -> dict[str, Any]:
    event = {"type": kind, "contentIndex": index, "delta": delta, "partial": partial}
    rec = {"type": "message_update", "assistantMessageEvent": event, "message": message}
    return rec


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    """Draw a stream of pi-like update lines, some in pi's form, some near it, some damaged.

    The response's last block grows by drawn text (not always the line's delta: pi writes its
    live response, which may be ahead); between growths other things change, a new block
    opens, the copies differ, or another record comes; each line may be damaged.
    """
    ascii_only = draw(st.booleans())  # json.dumps escapes every non-ASCII letter: pairs too
    blocks: list[dict[str, Any]] = [{"type": "text", "text": draw(PIECES)}]
    usage = {"input": 1, "output": 0}
    out: list[bytes] = []
    for _ in range(draw(st.integers(1, 12))):
        index = len(blocks) - 1
        key = "thinking" if blocks[index]["type"] == "thinking" else "text"
        step = draw(
            st.sampled_from(
                ["grow", "grow", "grow", "grow", "usage", "block", "differ", "other", "kind"]
            )
        )
        if step == "grow":
            blocks[index] = {**blocks[index], key: blocks[index][key] + draw(PIECES)}
        elif step == "usage":
            usage = {**usage, "output": usage["output"] + 1}
        elif step == "block":
            kind = draw(st.sampled_from(["text", "thinking"]))
            blocks.append({"type": kind, kind: draw(PIECES)})
            index, key = len(blocks) - 1, kind
        partial = {"role": "assistant", "content": list(blocks), "usage": usage}
        message: Any = partial
        if step == "differ":
            message = {**partial, "stopReason": "toolUse"}
        kind = "thinking_delta" if key == "thinking" else "text_delta"
        if step == "kind":
            kind = draw(st.sampled_from(["toolcall_delta", "text_start", "text_delta"]))
        rec: Any = update(
            kind, draw(st.sampled_from([index, index, 0, 7])), draw(PIECES), partial, message
        )
        if step == "other":
            rec = {"type": "tool_execution_update", "partialResult": draw(PIECES)}
        text = json.dumps(rec, separators=(",", ":"), ensure_ascii=ascii_only)
        out.append(damaged(draw, text.encode("utf-8", "surrogatepass")))
    return out


@given(streams())
@example([])  # nothing to decode
def test_streams_decode_as_json_loads_does(lines: list[bytes]) -> None:
    """Grown, changed or damaged, every line of a stream decodes to json.loads's value or fails."""
    check_stream(lines)


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_real_pi_streams_decode_by_growth(path: Path) -> None:
    """Real pi output decodes as json.loads does, writes back as pi's bytes, and grows.

    Its text updates are read from the one before (all but the first of each block).
    """
    lines = path.read_bytes().splitlines()
    decoder = check_stream(lines)
    for line in lines:
        assert stringify(LineDecoder().decode(line)).encode() == line
    deltas = sum(
        b'"assistantMessageEvent":{"type":"text_delta"' in line
        or b'"assistantMessageEvent":{"type":"thinking_delta"' in line
        for line in lines
    )
    if deltas > 2:
        assert decoder.grown >= deltas // 2


def test_a_grown_update_reads_only_the_new_text() -> None:
    """Two updates of one block: the second is decoded from the first (counted in `grown`)."""
    first = {"role": "assistant", "content": [{"type": "text", "text": 'say "hi'}], "n": 0}
    second = {
        "role": "assistant",
        "content": [{"type": "text", "text": 'say "hi\\ there é'}],
        "n": 0,
    }
    lines = [
        json.dumps(update("text_delta", 0, "x", first, first), separators=(",", ":")).encode(),
        json.dumps(update("text_delta", 0, "y", second, second), separators=(",", ":")).encode(),
    ]
    decoder = check_stream(lines)
    assert decoder.grown == 1


def test_an_escaped_pair_split_across_lines_is_read_whole() -> None:
    """An escaped surrogate pair split across two lines' texts is one letter, as in json.loads.

    The high half ends one line's text and the low half starts the next line's new text.
    """
    a = {"role": "assistant", "content": [{"type": "text", "text": "a\ud83d"}]}
    b = {"role": "assistant", "content": [{"type": "text", "text": "a\ud83d\ude00"}]}
    lines = [
        json.dumps(update("text_delta", 0, "x", m, m), separators=(",", ":")).encode()
        for m in (a, b)
    ]
    assert json.loads(lines[1])["message"]["content"][0]["text"] == "a😀"
    check_stream(lines)


def test_new_text_that_would_close_the_string_is_read_in_full() -> None:
    """New bytes holding an unescaped quote (a different structure) are not taken as text."""
    a = b'{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,'
    tail = b'"delta":"x","partial":{"content":[{"type":"text","text":"ab%s"}]}},'
    tail += b'"message":{"content":[{"type":"text","text":"ab%s"}]}}'
    lines = [a + tail % (b"", b""), a + tail % (b'","z":"', b'","z":"')]
    assert json.loads(lines[1])["message"]["content"][0] == {"type": "text", "text": "ab", "z": ""}
    decoder = check_stream(lines)
    assert decoder.grown == 0


def grown_pair() -> tuple[bytes, bytes]:
    """Return two successive text updates of real pi output, the second read by growth."""
    lines = (RECORDED[0].parent / "text.jsonl").read_bytes().splitlines()
    for first, second in itertools.pairwise(lines):
        decoder = LineDecoder()
        decoder.decode(first)
        decoder.decode(second)
        if decoder.grown == 1:
            return first, second
    raise AssertionError("no grown pair in the recording")


def test_every_one_byte_damage_of_a_grown_line_decodes_as_json_loads_does() -> None:
    """Each byte of a line that would grow, damaged after its reference: json.loads's answer.

    Each byte replaced, dropped or doubled: both copies, the seam and the delta are checked.
    """
    a = {"role": "assistant", "content": [{"type": "text", "text": "tok0 tok1"}], "n": 0}
    b = {**a, "content": [{"type": "text", "text": "tok0 tok1 tok2 é"}]}
    made = [
        json.dumps(update("text_delta", 0, "d", m, m), separators=(",", ":")).encode()
        for m in (a, b)
    ]
    assert check_stream(made).grown == 1
    for first, second in (grown_pair(), made):  # pi's (nothing new yet), and new text
        for i in range(len(second)):
            for new in (b"", b"x", b'"', b"\\", b"}", second[i : i + 1] * 2):
                check_stream([first, second[:i] + new + second[i + 1 :]])


def test_parse_counts_and_logs_bad_lines_as_parse_record_does() -> None:
    """`parse` is `parse_record` with the decoder's state: bad lines are counted, not raised."""
    stats = FrameStats()
    decoder = LineDecoder()
    assert decoder.parse(b"not json", stats) is None
    assert decoder.parse(b"[" * 300 + b"]" * 300, stats) is None
    assert decoder.parse(b"   ", stats) is None
    assert decoder.parse(b'{"type":"agent_start"}', stats) == {"type": "agent_start"}
    assert (stats.bad_lines, stats.deep_lines) == (1, 1)


USAGES = st.sampled_from(
    [
        {"input": 0, "output": 0, "totalTokens": 0, "cost": {"input": 0, "total": 0}},
        {"input": 12, "output": 30, "reasoning": 0, "cost": {"total": 0.5, "totalFromProvider": 0}},
        {"cost": {}},
        {"input": 1, "cost": {"total": 1e-7}, "cacheWrite1h": 2},
        {"input": "x", "cost": {"a": [1, {"b": 2}]}},  # not pi's shape: decoded in full
        {},  # no cost: decoded in full
    ]
)


@st.composite
def delta_streams(draw: st.DrawFn) -> list[bytes]:
    """Draw pi >= 0.84 update lines (a delta and the usage so far), some near it, some damaged."""
    ascii_only = draw(st.booleans())
    out: list[bytes] = []
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["text_delta", "thinking_delta", "toolcall_delta", "text_end"]))
        index = draw(st.sampled_from([0, 1, 12, -1, 10**10]))
        event: dict[str, Any] = {"type": kind, "contentIndex": index, "delta": draw(PIECES)}
        if draw(st.booleans()):
            event = dict(reversed(list(event.items())))  # another key order: decoded in full
        rec = {"type": "message_update", "usage": draw(USAGES), "assistantMessageEvent": event}
        text = json.dumps(rec, separators=(",", ":"), ensure_ascii=ascii_only)
        out.append(damaged(draw, text.encode("utf-8", "surrogatepass")))
    return out


@given(delta_streams())
def test_delta_updates_decode_as_json_loads_does(lines: list[bytes]) -> None:
    """Pi 1.6.0's delta lines, intact, changed or damaged: json.loads's value, or LineError."""
    check_stream(lines)


def test_a_repeated_usage_is_decoded_once_and_shared() -> None:
    """Consecutive delta lines with the same usage share its value (records are read-only)."""
    path = Path(__file__).parent / "recorded" / "pi-1.6.0" / "thinking.jsonl"
    decoder = LineDecoder()
    records = [decoder.decode(line) for line in path.read_bytes().splitlines()]
    deltas = [
        r for r in records if r.get("assistantMessageEvent", {}).get("type", "").endswith("_delta")
    ]
    assert len(deltas) > 3
    assert all(r == json.loads(json.dumps(r)) for r in records)
    usages = {id(r["usage"]) for r in deltas}
    assert len(usages) < len(deltas)
