"""mule.pi's one JSON decoder is bounded: depth and number size, each a typed `JsonError`.

Tests the private rules `mule.pi._json.MAX_DEPTH`, `MAX_NUMBER_CHARS` and `nested_deeper_than`.
"""

from __future__ import annotations

import pytest

from mule.pi import JsonError, loads
from mule.pi._json import MAX_DEPTH, MAX_NUMBER_CHARS, nested_deeper_than


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
        '{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1),
        "1" * (MAX_NUMBER_CHARS + 1),
        "9" * 5000,
        "[1." + "0" * MAX_NUMBER_CHARS + "]",
        '{"a": -' + "1" * 200 + "." + "1" * 200 + "}",
        "",
        "   ",
        "[1,]",
        '{"a" 1}',
        "\ud800",
    ],
)
def test_refused_text_is_a_json_error(text: str) -> None:
    with pytest.raises(JsonError):
        loads(text)
    with pytest.raises(JsonError):
        loads(text.encode("utf-8", "surrogatepass"))


def test_within_the_bounds_decodes() -> None:
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert nested_deeper_than(loads(deep), MAX_DEPTH - 1)
    wide = "[" + ",".join(["[]"] * 1000) + "]"
    assert len(loads(wide)) == 1000
    assert loads("1" * MAX_NUMBER_CHARS) == int("1" * MAX_NUMBER_CHARS)
    assert loads('"' + "1" * 10_000 + '"') == "1" * 10_000  # a long digit run in a string
    assert loads(' {"a": [1, 2.5]} ') == {"a": [1, 2.5]}


def test_nested_deeper_than_answers_for_a_value_that_contains_itself() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    assert nested_deeper_than(cyclic, 10)
    assert not nested_deeper_than({"a": [1, {"b": "x"}]}, 3)
    assert nested_deeper_than({"a": [1, {"b": "x"}]}, 2)
