"""A tool's return value reaches the model as JSON, encoded as its arguments are decoded."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import socket
import threading
from typing import Any, TypedDict

import attrs
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mule
from mule.pi import Model, TextContent, ToolResultMessage, text_of
from mule.pi.scripted import Call, ScriptedModel, reply
from mule.promise import ToolResultError, ToolSignatureError, as_result

MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Size(enum.IntEnum):
    SMALL = 1


@dataclasses.dataclass
class D:
    v: int
    colour: Colour = Colour.RED


@attrs.frozen
class A:
    v: int
    when: datetime.date


class P(pydantic.BaseModel):
    v: int
    at: datetime.datetime


class T(TypedDict):
    v: int
    size: Size


@dataclasses.dataclass
class Nested:
    items: list[D]
    by_name: dict[str, A]


WHEN = datetime.datetime(2026, 12, 6, 18, 30, tzinfo=datetime.UTC)

CASES: list[tuple[object, Any]] = [
    (D(3), {"v": 3, "colour": "red"}),
    (A(3, WHEN.date()), {"v": 3, "when": "2026-12-06"}),
    (P(v=3, at=WHEN), {"v": 3, "at": "2026-12-06T18:30:00Z"}),
    (T(v=1, size=Size.SMALL), {"v": 1, "size": 1}),
    ([P(v=1, at=WHEN)], [{"v": 1, "at": "2026-12-06T18:30:00Z"}]),
    (
        Nested([D(1, Colour.BLUE)], {"a": A(2, WHEN.date())}),
        {"items": [{"v": 1, "colour": "blue"}], "by_name": {"a": {"v": 2, "when": "2026-12-06"}}},
    ),
    ({Colour.BLUE: WHEN.time()}, {"blue": "18:30:00"}),
    ({1: Size.SMALL, 2: socket.AF_INET}, {"1": 1, "2": 2}),  # int keys as JSON writes them
    (WHEN, "2026-12-06T18:30:00+00:00"),
    ((1, 2.5, True, None), [1, 2.5, True, None]),
]


@pytest.mark.parametrize(("value", "expected"), CASES)
def test_values_are_encoded_as_json(value: object, expected: Any) -> None:
    result = as_result(value, "t")
    assert result.details == expected
    assert json.loads(text_of_result(result)) == expected


def text_of_result(result: mule.MuleToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.mark.parametrize(
    "value",
    [object(), {"k": [1, threading.Lock()]}, {(1, 2): "tuple key"}, float("nan"), b"x"],
)
def test_anything_else_is_a_typed_error_naming_tool_and_type(value: object) -> None:
    with pytest.raises(ToolResultError, match="tool lookup returned ") as caught:
        as_result(value, "lookup")
    assert isinstance(caught.value, TypeError)
    assert "MuleToolResult" in str(caught.value)  # says what would do


def test_the_error_names_where_the_value_is() -> None:
    with pytest.raises(ToolResultError, match=r"a value of type lock at \['k'\]\[1\]"):
        as_result({"k": [1, threading.Lock()]}, "t")


def test_results_and_blocks_keep_full_control() -> None:
    own = mule.MuleToolResult(content=(TextContent("x"),), details={"raw": True})
    assert as_result(own) is own
    assert as_result([TextContent("a"), TextContent("b")]).content == (
        TextContent("a"),
        TextContent("b"),
    )
    assert as_result("plain").details is None


def test_an_unencodable_return_annotation_is_refused_when_the_tool_is_made() -> None:
    def opener() -> socket.socket:
        """Open."""
        raise AssertionError

    with pytest.raises(ToolSignatureError, match=r"opener: cannot encode its return type"):
        mule.tool(opener)

    def fine() -> list[D] | dict[str, P] | None:
        """Fine."""
        return None

    mule.tool(fine)  # every member encodable


@st.composite
def _json_like(draw: st.DrawFn) -> object:
    leaf = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text()
    )
    return draw(
        st.recursive(
            leaf | st.builds(D, st.integers(), st.sampled_from(Colour)),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3)
            ),
            max_leaves=10,
        )
    )


@given(_json_like())
def test_encoded_results_are_json_and_round_trip_through_text(value: object) -> None:
    result = as_result(value, "t")
    if value is None or isinstance(value, str):  # empty text / the text itself
        return
    assert json.loads(text_of_result(result)) == result.details


@pytest.mark.anyio
async def test_the_model_sees_json_for_a_dataclass_list() -> None:
    @mule.tool
    def find(name: str) -> list[D]:
        """Find things."""
        return [D(3), D(4, Colour.BLUE)]

    script = ScriptedModel([reply(Call("c1", "find", {"name": "x"})), reply("done")])
    inp = mule.MuleRunInput(
        model=MODEL, system_prompt="", messages="go", stream=script, tools=[find]
    )
    out = await mule.run(inp)
    sent = script.calls[1][1].messages[-1]
    assert isinstance(sent, ToolResultMessage)
    assert json.loads(text_of(sent)) == [{"v": 3, "colour": "red"}, {"v": 4, "colour": "blue"}]
    assert out.text == "done"


@pytest.mark.anyio
async def test_an_unencodable_value_fails_the_run_in_the_tool_phase() -> None:
    @mule.tool
    def leak(name: str) -> Any:
        """Leak a lock."""
        return threading.Lock()

    script = ScriptedModel([reply(Call("c1", "leak", {"name": "x"})), reply("never")])
    inp = mule.MuleRunInput(
        model=MODEL, system_prompt="", messages="go", stream=script, tools=[leak]
    )
    with pytest.raises(mule.MuleRunFailed) as caught:
        await mule.run(inp)
    assert caught.value.phase == "tool"
    assert "tool leak returned a value of type lock" in caught.value.error.message
    assert isinstance(caught.value.error.cause, ToolResultError)


@pytest.mark.anyio
async def test_with_errors_as_results_the_model_sees_the_encoding_error() -> None:
    @mule.tool(errors_as_results=True)
    def leak(name: str) -> object:
        """Leak a lock."""
        return threading.Lock()

    script = ScriptedModel([reply(Call("c1", "leak", {"name": "x"})), reply("sorry")])
    inp = mule.MuleRunInput(
        model=MODEL, system_prompt="", messages="go", stream=script, tools=[leak]
    )
    out = await mule.run(inp)
    sent = script.calls[1][1].messages[-1]
    assert isinstance(sent, ToolResultMessage)
    assert sent.is_error
    assert "ToolResultError: tool leak returned a value of type lock" in text_of(sent)
    assert out.text == "sorry"
