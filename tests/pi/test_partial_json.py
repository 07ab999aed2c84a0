"""Streamed tool-call arguments parse as Pi's parseStreamingJson parses them.

Tests the private rules `mule.pi._partial_json.parse_tool_call_arguments` and `repair_json`.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.pi import parse_streaming_json
from mule.pi._partial_json import parse_tool_call_arguments, repair_json

ROOT = Path(__file__).resolve().parents[2]
PI_JSON = ROOT / "node/node_modules/@earendil-works/pi-ai/dist/utils/json-parse.js"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=4))
def test_every_prefix_parses_to_an_object(obj: dict[str, object]) -> None:
    """Every prefix of a JSON object yields an object; the whole text yields the object."""
    text = json.dumps(obj)
    for i in range(len(text)):
        assert isinstance(parse_streaming_json(text[:i]), dict)
    assert parse_streaming_json(text) == obj


def test_repair_escapes_control_characters_and_bad_escapes() -> None:
    """Pi's repair makes raw newlines and invalid escapes parseable."""
    assert json.loads(repair_json('{"a": "x\ny"}')) == {"a": "x\ny"}
    assert json.loads(repair_json('{"a": "b\\q"}')) == {"a": "b\\q"}
    assert parse_streaming_json("[1, 2]") == {}  # arguments are always an object


def _cases() -> list[str]:
    rng = random.Random(7)

    def value(depth: int) -> object:
        kind = rng.randrange(7 if depth < 2 else 4)
        if kind == 0:
            return rng.choice([None, True, False])
        if kind == 1:
            return rng.choice([0, 7, -3, 12.5, 1e3])
        if kind == 2:
            return rng.choice(["", "a b", "line\nbreak", 'quote"d', "ünï", "tab\t"])
        if kind == 3:
            return rng.choice(["x", "yy"])
        if kind in (4, 5):
            return {f"k{j}": value(depth + 1) for j in range(rng.randrange(3))}
        return [value(depth + 1) for _ in range(rng.randrange(3))]

    out: list[str] = []
    for _ in range(60):
        text = json.dumps({f"k{j}": value(0) for j in range(rng.randrange(1, 4))})
        out.extend(text[:i] for i in range(len(text) + 1))
    return out


@pytest.mark.pi
@pytest.mark.skipif(
    shutil.which("node") is None or not PI_JSON.exists(), reason="needs node_modules"
)
def test_prefixes_match_pi() -> None:
    """Partial arguments equal pi-ai's parseStreamingJson for every prefix of generated JSON."""
    cases = _cases()
    script = (
        f"import {{ parseStreamingJson }} from {json.dumps(PI_JSON.as_uri())};"
        "let s='';process.stdin.on('data',d=>s+=d);process.stdin.on('end',()=>{"
        "const cs=JSON.parse(s);const out=cs.map(c=>{const v=parseStreamingJson(c);"
        "return v&&typeof v==='object'&&!Array.isArray(v)?v:{}});"
        "process.stdout.write(JSON.stringify(out));});"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
    )
    expected = json.loads(done.stdout)
    diffs = [
        (c, e, parse_streaming_json(c))
        for c, e in zip(cases, expected, strict=True)
        if parse_streaming_json(c) != e
    ]
    assert diffs == []


@pytest.mark.pi
@pytest.mark.skipif(
    shutil.which("node") is None or not PI_JSON.exists(), reason="needs node_modules"
)
def test_finished_arguments_match_pi() -> None:
    """A finished call's arguments and argumentsError equal pi-ai 1.6.0's for every prefix.

    Every cut-off prefix of generated JSON is malformed arguments: the error text (JavaScript's
    JSON.parse message and the text received) must be Pi's word for word.
    """
    cases = [*_cases(), "[1, 2]", '"text"', '{"a": 1}}', "{a: 1}", '{"a" 1}', "nul", "[x]"]
    script = (
        f"import {{ parseToolCallArguments }} from {json.dumps(PI_JSON.as_uri())};"
        "let s='';process.stdin.on('data',d=>s+=d);process.stdin.on('end',()=>{"
        "const cs=JSON.parse(s);const out=cs.map(c=>parseToolCallArguments(c));"
        "process.stdout.write(JSON.stringify(out));});"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
    )
    expected = json.loads(done.stdout)
    diffs = []
    for case, pi in zip(cases, expected, strict=True):
        args, error = parse_tool_call_arguments(case)
        if (args, error) != (pi["arguments"], pi.get("argumentsError")):
            diffs.append((case, pi, args, error))
    assert diffs == []
