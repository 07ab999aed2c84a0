"""`@mule.tool` for real signatures: structured types, docstrings, threads and ToolContext."""

from __future__ import annotations

import dataclasses
import enum
import threading
from typing import Any, Literal, TypedDict

import anyio
import attrs
import pydantic
import pytest

import mule
from mule.effects import MuleEvent
from mule.pi import Model, TextContent, ToolCall, UserMessage
from mule.pi.scripted import Call, ScriptedModel, reply
from mule.promise import ToolSignatureError, schema_for

MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


@attrs.frozen
class Box:
    corner: Point
    label: str = "box"


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Options(TypedDict, total=False):
    verbose: bool


class Person(pydantic.BaseModel):
    name: str
    age: int


async def _call(tool: mule.MuleTool, arguments: dict[str, Any]) -> mule.MuleRunOutcome:
    events: list[MuleEvent] = []
    script = ScriptedModel([reply(Call("c1", tool.descriptor.name, arguments)), reply("done")])
    inp = mule.MuleRunInput(
        model=MODEL,
        system_prompt="",
        messages=(UserMessage("go"),),
        stream=script,
        tools=[tool],
    )
    return await mule.run(inp, lambda e, s: events.append(e))


def _result_text(outcome: mule.MuleRunOutcome) -> str:
    result = outcome.messages[1]
    assert result.role == "toolResult"
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def test_structured_types_have_schemas() -> None:
    assert schema_for(Point) == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
        "required": ["x"],
    }
    assert schema_for(Box)["required"] == ["corner"]
    assert schema_for(Box)["properties"]["label"] == {"type": "string", "default": "box"}
    assert schema_for(Colour) == {"enum": ["red", "green"], "type": "string"}
    assert schema_for(Literal["a", "b"]) == {"enum": ["a", "b"], "type": "string"}
    assert schema_for(Options) == {"type": "object", "properties": {"verbose": {"type": "boolean"}}}
    assert schema_for(int | str) == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert schema_for(dict[str, int]) == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }
    person = schema_for(Person)
    assert person["properties"]["age"]["type"] == "integer"
    assert person["required"] == ["name", "age"]


class Opaque:
    pass


def test_an_unknown_type_is_a_clear_error_at_decoration() -> None:
    with pytest.raises(ToolSignatureError, match="no JSON schema"):

        @mule.tool
        def f(thing: Opaque) -> None:
            """Use a thing."""

    class Local:
        pass

    with pytest.raises(ToolSignatureError, match="cannot resolve an annotation"):

        @mule.tool
        def g(thing: Local) -> None:
            """Use a local thing."""


@pytest.mark.anyio
async def test_structured_arguments_arrive_as_their_types() -> None:
    got: list[Any] = []

    @mule.tool
    async def place(
        box: Box,
        points: list[Point],
        colour: Colour,
        person: Person,
        options: Options,
        size: int | str = 1,
        where: Point | None = None,
    ) -> str:
        """Place a box."""
        got.extend([box, points, colour, person, options, size, where])
        return "placed"

    out = await _call(
        place,
        {
            "box": {"corner": {"x": 1, "y": 2}},
            "points": [{"x": 3}],
            "colour": "green",
            "person": {"name": "Ada", "age": 36},
            "options": {"verbose": True},
            "size": "large",
        },
    )
    assert _result_text(out) == "placed"
    assert got == [
        Box(Point(1, 2)),
        [Point(3.0)],
        Colour.GREEN,
        Person(name="Ada", age=36),
        {"verbose": True},
        "large",
        None,
    ]
    assert type(got[1][0].x) is float


@pytest.mark.anyio
async def test_invalid_structured_arguments_go_back_to_the_model() -> None:
    @mule.tool
    def paint(colour: Colour) -> str:
        """Paint."""
        return "painted"

    out = await _call(paint, {"colour": "blue"})
    result = out.messages[1]
    assert result.role == "toolResult"
    assert result.is_error
    assert "colour" in _result_text(out)


@pytest.mark.parametrize(
    "doc",
    [
        """Move a point.

        Args:
            point: The point to move.
            dx: How far along x,
                in metres.
        """,
        """Move a point.

        Parameters
        ----------
        point : Point
            The point to move.
        dx : float
            How far along x, in metres.
        """,
        """Move a point.

        :param point: The point to move.
        :param dx: How far along x, in metres.
        """,
    ],
    ids=["google", "numpy", "sphinx"],
)
def test_parameter_descriptions_come_from_the_docstring(doc: str) -> None:
    def move(point: Point, dx: float = 1.0) -> Point:
        return Point(point.x + dx, point.y)

    move.__doc__ = doc
    made = mule.tool(move)
    assert made.descriptor.description == "Move a point."
    props = made.descriptor.parameters["properties"]
    assert isinstance(props, dict)
    assert props["point"]["description"] == "The point to move."
    assert props["dx"] == {
        "type": "number",
        "default": 1.0,
        "description": "How far along x, in metres.",
    }


@pytest.mark.anyio
async def test_sync_functions_run_in_a_worker_thread() -> None:
    threads: list[int] = []

    @mule.tool
    def where() -> str:
        """Say where."""
        threads.append(threading.get_ident())
        return "here"

    await _call(where, {})
    assert threads
    assert threads[0] != threading.get_ident()


@pytest.mark.anyio
async def test_tool_context_gives_the_call_the_signal_and_progress() -> None:
    seen: list[Any] = []

    @mule.tool
    async def index(ctx: mule.ToolContext, topic: str) -> str:
        """Index a topic."""
        seen.append((ctx.call.id, ctx.call.name, ctx.signal.aborted))
        for step in ("one", "two"):
            await ctx.progress(f"{topic}: {step}")
        return "indexed"

    assert index.descriptor.parameters == {
        "type": "object",
        "properties": {"topic": {"type": "string"}},
        "required": ["topic"],
    }
    events: list[MuleEvent] = []
    script = ScriptedModel([reply(Call("c1", "index", {"topic": "mules"})), reply("done")])
    inp = mule.MuleRunInput(
        model=MODEL, system_prompt="", messages=(UserMessage("go"),), stream=script, tools=[index]
    )
    out = await mule.run(inp, lambda e, s: events.append(e))
    assert seen == [("c1", "index", False)]
    tool_events = [e for e in events if e.type.startswith("tool_execution")]
    assert [e.type for e in tool_events] == [
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_update",
        "tool_execution_end",
    ]
    updates = [e for e in tool_events if e.type == "tool_execution_update"]
    assert [u.result.content for u in updates] == [
        (TextContent("mules: one"),),
        (TextContent("mules: two"),),
    ]
    assert _result_text(out) == "indexed"


@pytest.mark.anyio
async def test_progress_waits_for_the_run_to_emit_it() -> None:
    """`await ctx.progress` returns only after the listener has seen the update."""
    order: list[str] = []

    @mule.tool
    async def slow(ctx: mule.ToolContext) -> str:
        """Report, then finish."""
        await ctx.progress("p")
        order.append("progress returned")
        return "ok"

    async def listener(event: MuleEvent, signal: mule.AbortSignal) -> None:
        if event.type == "tool_execution_update":
            await anyio.sleep(0.01)
            order.append("listener saw update")

    script = ScriptedModel([reply(Call("c1", "slow", {})), reply("done")])
    inp = mule.MuleRunInput(
        model=MODEL, system_prompt="", messages=(UserMessage("go"),), stream=script, tools=[slow]
    )
    await mule.run(inp, listener)
    assert order == ["listener saw update", "progress returned"]


@pytest.mark.anyio
async def test_a_sync_tool_reports_progress_from_its_thread() -> None:
    @mule.tool
    def count(ctx: mule.ToolContext, n: int) -> int:
        """Count to n."""
        for i in range(n):
            ctx.progress_from_thread(i)
        return n

    events: list[MuleEvent] = []
    script = ScriptedModel([reply(Call("c1", "count", {"n": 3})), reply("done")])
    inp = mule.MuleRunInput(
        model=MODEL, system_prompt="", messages=(UserMessage("go"),), stream=script, tools=[count]
    )
    await mule.run(inp, lambda e, s: events.append(e))
    assert [e.result.details for e in events if e.type == "tool_execution_update"] == [
        0,
        1,
        2,
    ]


@pytest.mark.anyio
async def test_a_raising_context_tool_fails_the_run_or_reports() -> None:
    @mule.tool
    async def boom(ctx: mule.ToolContext) -> str:
        """Fail after progress."""
        await ctx.progress("almost")
        raise ValueError("broken")

    with pytest.raises(mule.MuleRunFailed) as caught:
        await _call(boom, {})
    assert caught.value.phase == "tool"

    @mule.tool(errors_as_results=True)
    async def soft(ctx: mule.ToolContext) -> str:
        """Fail softly."""
        raise ValueError("broken")

    out = await _call(soft, {})
    assert _result_text(out) == "ValueError: broken"


def test_tool_context_must_come_first() -> None:
    with pytest.raises(ToolSignatureError, match="first parameter"):

        @mule.tool
        def late(x: int, ctx: mule.ToolContext) -> int:
            """Late context."""
            return x


def test_tool_call_is_typed() -> None:
    assert ToolCall("c", "n", {}).id == "c"
