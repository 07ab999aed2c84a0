"""Schema patterns are matched in linear time, with the meaning Pi gives them (issue 30.1).

Pi 1.6.0 compiles a `pattern` with pi-schema's `sharedRegex` (ECMAScript, `u` flag); mule
translates it to RE2. The differential tests run pi-schema's own function in Node on the same
patterns and texts; what RE2 cannot express (backreferences, lookaround) is a `ToolSchemaError`.

Tests the private rules `mule.pi._pattern.search` and `mule.pi._pattern.pattern_problem`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mule
from mule.pi import (
    Model,
    Tool,
    ToolArgumentsError,
    ToolCall,
    ToolSchemaError,
    UserMessage,
    validate_tool_arguments,
)
from mule.pi._pattern import pattern_problem, search
from mule.pi.scripted import Call, ScriptedModel, reply
from tests.node import NodeLines

REPO = Path(__file__).resolve().parents[2]
NODE_SCRIPT = REPO / "tests" / "node" / "regex.mjs"
HAVE_PI = (REPO / "node" / "node_modules" / "@earendil-works" / "pi-schema").is_dir()

HOSTILE = ["^(a+)+$", "^(a|a)*$", "^(a|aa)+$", "(x+x+)+y", "^(\\w+\\s?)*$", "^([a-z]*)*[0-9]$"]


def _tool(schema: dict[str, Any]) -> Tool:
    return Tool("T", "", schema)


@pytest.mark.parametrize("pattern", HOSTILE)
def test_a_nested_quantifier_pattern_answers_at_once_on_a_hostile_argument(pattern: str) -> None:
    # Python's `re` (and JS's engine) backtrack through 2**n paths here: 60 characters would
    # take longer than the universe has existed. RE2 answers in time linear in the text.
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(_tool(schema), ToolCall("c", "T", {"s": "a" * 60 + "!"}))
    assert caught.value.errors == (("s", f"expected to match {pattern}"),)


@pytest.mark.parametrize("pattern", HOSTILE)
def test_a_hostile_pattern_property_and_its_extras_answer_at_once(pattern: str) -> None:
    schema = {
        "type": "object",
        "patternProperties": {pattern: {"type": "integer"}},
        "additionalProperties": False,
    }
    key = "a" * 60 + "!"
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(_tool(schema), ToolCall("c", "T", {key: 1}))
    assert caught.value.errors == ((key, "unknown field"),)


def test_a_hostile_pattern_in_a_union_member_answers_at_once() -> None:
    member = {"type": "string", "pattern": "^(a+)+$"}
    schema = {"type": "object", "properties": {"s": {"anyOf": [member, {"type": "integer"}]}}}
    with pytest.raises(ToolArgumentsError):
        validate_tool_arguments(_tool(schema), ToolCall("c", "T", {"s": "a" * 60 + "!"}))


class Code(pydantic.BaseModel):
    code: str = pydantic.Field(pattern="^(a+)+$")


@pytest.mark.anyio
async def test_an_output_type_pattern_answers_at_once_on_a_hostile_output() -> None:
    hostile = {"code": "a" * 60 + "!"}
    model = ScriptedModel(
        [
            reply(Call("o1", "final_result", hostile)),
            reply(Call("o2", "final_result", {"code": "aa"})),
        ]
    )
    events: list[mule.MuleEvent] = []
    out = await mule.run(
        mule.MuleRunInput(
            model=Model(id="m", name="M", api="scripted", provider="p", base_url=""),
            system_prompt="",
            messages=(UserMessage("answer"),),
            stream=model,
            output_type=Code,
        ),
        lambda e, s: events.append(e),
    )
    assert out.output == Code(code="aa")
    (rejected,) = [e for e in events if e.type == "tool_execution_end" and e.result.is_error]
    assert "code: expected to match ^(a+)+$" in rejected.result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("(a)\\1", "backreference \\1"),
        ("(?<x>a)\\k<x>", "named backreference"),
        ("a(?=b)", "lookaround (?=...)"),
        ("a(?!b)", "lookaround (?!...)"),
        ("(?<=a)b", "lookaround (?<=...)"),
        ("(?<!a)b", "lookaround (?<!...)"),
        ("a{1001}", "RE2 cannot compile it"),
        ("(\\p{L}{1,30}){1,30}", "pattern too large"),  # a million instructions
        ("(?i)a", "not a JavaScript group"),
    ],
)
def test_what_cannot_be_matched_in_linear_time_is_a_typed_schema_error(
    pattern: str, why: str
) -> None:
    problem = pattern_problem(pattern)
    assert problem is not None
    assert why in problem
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    with pytest.raises(ToolSchemaError) as caught:
        validate_tool_arguments(_tool(schema), ToolCall("c", "T", {"s": "ab"}))
    assert why in str(caught.value)


def test_unevaluated_properties_beside_a_hostile_pattern_answers_at_once() -> None:
    # mule's own unevaluatedProperties matches the patterns through `_pattern` too.
    schema = {
        "type": "object",
        "allOf": [{"patternProperties": {"^(a+)+$": {}}}],
        "unevaluatedProperties": False,
    }
    key = "a" * 60 + "!"
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(_tool(schema), ToolCall("c", "T", {key: 1}))
    assert caught.value.errors == ((key, "unknown field"),)


def test_a_lone_surrogate_in_the_text_is_matched_not_raised() -> None:
    assert search("^a.b$", "a\ud800b")
    assert not search("^ab$", "a\ud800b")


# Pi's meaning, case by case: each pattern and text is also run through pi-schema in Node.
CASES: list[tuple[str, list[str]]] = [
    ("^a.b$", ["a\nb", "a\rb", "a\u2028b", "a\u2029b", "axb", "a\U0001f600b"]),
    ("^a$", ["a", "a\n", "\na"]),
    ("^\\s$", ["\v", "\t", " ", "\u00a0", "\u2003", "\ufeff", "\u0085", "x"]),
    ("^\\S$", ["\v", "x", "\u00a0", "\u0085"]),
    ("^[\\s]+$", ["\v\u00a0 ", "x"]),
    ("^[\\S]+$", ["\v", "xy", "\u3000"]),
    ("^[^\\s]$", ["\u2028", "x"]),
    ("^\\d+$", ["123", "\u0663", "\uff11"]),
    ("^\\w+$", ["abc_1", "é", "ß"]),
    ("\\bfoo\\b", ["a foo b", "éfooé", "afoo"]),
    ("^\\u0041\\x42\\u{1F600}$", ["AB\U0001f600", "AB"]),
    ("^\\uD83D\\uDE00$", ["\U0001f600"]),
    ("^\\p{L}+$", ["abcé", "a1"]),
    ("^\\p{Script=Greek}+$", ["αβ", "ab"]),
    ("^\\P{Lu}$", ["a", "A"]),
    ("^[^]$", ["\n", "x"]),
    ("a[]b", ["ab", "a]b"]),
    ("^[[a]+$", ["[a[", "b"]),
    ("^[a-c\\-]+$", ["a-c", "d"]),
    ("^\\/\\.\\-$", ["/.-"]),
    ("^[\\b]$", ["\b", "b"]),
    ("^\\cJ\\0$", ["\n\x00"]),
    ("^\\t\\n\\v\\f\\r$", ["\t\n\v\f\r"]),
    ("^(?<year>\\d{4})-(?:\\d{2})$", ["2024-01", "24-01"]),
    ("^(?i:ab)c$", ["ABc", "abC"]),
    ("^a{2,3}?$", ["aa", "aaaa"]),
    ("^[a-z]{2,}@x\\.com$", ["ab@x.com", "a@x.com"]),
    ("\\z", ["z", "a"]),  # invalid with `u`: Pi's fallback reads `\z` as `z`
]


class JsRegex(NodeLines):
    """pi-schema's `sharedRegex` in a Node process, one case per line."""

    def __init__(self) -> None:
        super().__init__(NODE_SCRIPT)

    def matches(self, pattern: str, texts: list[str]) -> list[bool] | None:
        """Return which texts the pattern matches in JavaScript (None: it does not compile)."""
        result = self.ask({"pattern": pattern, "texts": texts})
        return result["matches"] if result["ok"] else None


@pytest.fixture(scope="module")
def js() -> Iterator[JsRegex]:
    if not HAVE_PI:
        pytest.skip("node/node_modules is missing (run ./dev setup)")
    runner = JsRegex()
    yield runner
    runner.close()


@pytest.mark.pi
@pytest.mark.parametrize(("pattern", "texts"), CASES)
def test_a_pattern_means_what_it_means_in_pi(js: JsRegex, pattern: str, texts: list[str]) -> None:
    expected = js.matches(pattern, texts)
    assert expected is not None, f"Node rejects {pattern!r}"
    assert pattern_problem(pattern) is None
    assert [search(pattern, text) for text in texts] == expected


# Generated patterns: the JS constructs RE2 can express, quantified where JS allows it.
_ATOMS = st.sampled_from(
    [
        "a",
        "b",
        "-",
        " ",
        ".",
        "\\d",
        "\\D",
        "\\w",
        "\\W",
        "\\s",
        "\\S",
        "\\.",
        "\\u0061",
        "\\x62",
        "\\u{e9}",
        "\\n",
        "[ab]",
        "[^a]",
        "[a-c]",
        "[\\s-]",
        "[\\S]",
        "[.]",
        "[^]",
        "\\p{L}",
        "é",
    ]
)
_ANCHORS = st.sampled_from(["^", "$", "\\b", "\\B"])
_QUANTIFIERS = st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,2}", "*?", "+?", "{0,}"])


def _sequence(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    piece = st.one_of(
        st.tuples(_ATOMS, _QUANTIFIERS).map("".join),
        _ANCHORS,
        st.tuples(st.sampled_from(["(", "(?:"]), inner, st.just(")"), _QUANTIFIERS).map("".join),
    )
    return st.lists(piece, min_size=1, max_size=4).map("".join)


_PATTERNS = st.recursive(
    _sequence(st.just("a")),
    lambda inner: st.lists(_sequence(inner), min_size=1, max_size=3).map("|".join),
    max_leaves=6,
)
_TEXTS = st.lists(
    st.text(st.sampled_from("ab- .\n\u2028\u00a0\vé1Z\U0001f600"), max_size=8),
    min_size=1,
    max_size=6,
)


tally_compared: list[str] = []


@pytest.mark.pi
@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(_PATTERNS, _TEXTS)
def test_generated_patterns_match_as_in_pi(js: JsRegex, pattern: str, texts: list[str]) -> None:
    expected = js.matches(pattern, texts)
    if expected is None:  # not a JS pattern at all (`^*`): nothing to compare
        return
    tally_compared.append(pattern)
    assert pattern_problem(pattern) is None, pattern
    assert [search(pattern, text) for text in texts] == expected, pattern


@pytest.mark.pi
def test_most_generated_patterns_were_compared(js: JsRegex) -> None:
    if not tally_compared:
        test_generated_patterns_match_as_in_pi(js)
    assert len(tally_compared) >= 200


def test_a_long_run_of_digits_is_coerced_at_once() -> None:
    # Found by the hostile-pattern fuzz target: Pi's Number() coercion (a union with an
    # integer member tries it) matched with an ambiguous regex, quadratic in the digits.
    schema = {
        "type": "object",
        "properties": {"s": {"anyOf": [{"type": "integer"}, {"pattern": "P"}]}},
    }
    with pytest.raises(ToolArgumentsError):
        validate_tool_arguments(_tool(schema), ToolCall("c", "T", {"s": "1" * 300_000 + "c"}))
