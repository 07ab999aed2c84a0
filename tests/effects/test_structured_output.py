"""Structured output: `output_type` as a terminating `final_result` tool, typed for mypy."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, TypedDict, assert_type

import attrs
import pydantic
import pytest
from returns.result import Failure, Result, Success

import mule
from mule import effects
from mule.effects import MuleError, MuleEvent, MulePortsInput, Ports
from mule.pi import Model, UserMessage, get_current_tools
from mule.pi.scripted import Call, Reply, ScriptedModel, reply

MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")


@dataclasses.dataclass
class City:
    name: str
    population: int


@attrs.frozen
class Pet:
    name: str
    legs: int = 4


class Score(TypedDict):
    points: int


class Person(pydantic.BaseModel):
    name: str
    age: int


def _final(arguments: dict[str, Any], cid: str = "o1") -> Reply:
    return reply(Call(cid, "final_result", arguments))


def _inp(replies: list[Reply], output_type: Any, **kw: Any) -> mule.MuleRunInput[Any]:
    return mule.MuleRunInput(
        model=MODEL,
        system_prompt="",
        messages=(UserMessage("answer"),),
        stream=ScriptedModel(replies),
        output_type=output_type,
        **kw,
    )


@pytest.mark.anyio
async def test_a_dataclass_output_is_decoded_and_typed() -> None:
    inp = mule.MuleRunInput(
        model=MODEL,
        system_prompt="",
        messages=(UserMessage("answer"),),
        stream=ScriptedModel([_final({"name": "Paris", "population": 2100000})]),
        output_type=City,
    )
    out = await mule.run(inp)
    city: City = out.output  # mypy knows: MuleRunOutcome[City]
    assert_type(out, mule.MuleRunOutcome[City])  # exact, not Any (checked by mypy --strict)
    assert city == City("Paris", 2100000)
    assert out.status == "completed"
    # The output tool terminated the run: one model call, no text turn after it.
    assert [m.role for m in out.messages] == ["assistant", "toolResult"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("output_type", "arguments", "expected"),
    [
        (Pet, {"name": "Rex"}, Pet("Rex")),
        (Score, {"points": 3}, {"points": 3}),
        (Person, {"name": "Ada", "age": 36}, Person(name="Ada", age=36)),
        (int, {"response": 42}, 42),
        (list[str], {"response": ["yes"]}, ["yes"]),
    ],
)
async def test_output_types(output_type: Any, arguments: dict[str, Any], expected: Any) -> None:
    out = await mule.run(_inp([_final(arguments)], output_type))
    assert out.output == expected


@pytest.mark.anyio
async def test_str_output_is_the_final_text_without_an_output_tool() -> None:
    script = ScriptedModel([reply(Call("c1", "echo", {"text": "hi"})), reply("Paris.")])

    @mule.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    inp = mule.MuleRunInput(
        model=MODEL,
        system_prompt="",
        messages="answer",
        stream=script,
        tools=[echo],
        output_type=str,
    )
    out = await mule.run(inp)
    text: str = out.output
    assert_type(out, mule.MuleRunOutcome[str])
    assert text == "Paris." == out.text
    tools = get_current_tools(script.calls[0][1].messages)
    assert [t.name for t in tools] == ["echo"]  # no final_result tool to call


@pytest.mark.anyio
async def test_str_output_through_the_effect_root() -> None:
    result = await effects.run(_core([reply("Rome.")], str))
    assert result.unwrap().output == "Rome."


@pytest.mark.anyio
async def test_outcome_text_on_every_outcome() -> None:
    # No output type: the last assistant message's text; a cancelled run: its stand-in's "".
    out = await mule.run(_inp([reply("plain answer")], None))
    assert out.output is None
    assert out.text == "plain answer"
    ctl = mule.AbortController()
    ctl.abort("stop")
    result = await effects.run(_core([reply("never")], str), ctl.signal)
    cancelled = result.unwrap()
    assert cancelled.status == "cancelled"
    assert cancelled.text == ""
    assert cancelled.output is None


def test_the_tool_schema_is_the_types() -> None:
    seen = ScriptedModel([_final({"response": 1})])
    inp = mule.MuleRunInput(
        model=MODEL, system_prompt="", messages=(UserMessage("a"),), stream=seen, output_type=int
    )
    mule.run_sync(inp)
    tools = get_current_tools(seen.calls[0][1].messages)
    assert tools
    assert tools[-1].name == "final_result"
    assert tools[-1].parameters == {
        "type": "object",
        "properties": {"response": {"type": "integer"}},
        "required": ["response"],
    }


@pytest.mark.anyio
async def test_invalid_output_goes_back_to_the_model_then_succeeds() -> None:
    events: list[MuleEvent] = []
    replies = [_final({"name": "Paris"}, "o1"), _final({"name": "Paris", "population": 2}, "o2")]
    out = await mule.run(_inp(replies, City), lambda e, s: events.append(e))
    assert out.output == City("Paris", 2)
    errors = [e for e in events if e.type == "tool_execution_end" and e.result.is_error]
    assert len(errors) == 1


@pytest.mark.anyio
async def test_too_many_invalid_outputs_fail_the_run() -> None:
    events: list[MuleEvent] = []
    replies = [_final({"name": "x"}, "o1"), _final({"name": "y"}, "o2"), reply("never")]
    with pytest.raises(mule.MuleRunFailed) as caught:
        await mule.run(_inp(replies, City, output_retries=1), lambda e, s: events.append(e))
    assert caught.value.phase == "tool"
    assert "output_retries=1" in caught.value.error.message
    assert [e.outcome for e in events if e.type == "run_end"] == ["failed"]


@pytest.mark.anyio
async def test_a_text_answer_is_asked_for_the_tool() -> None:
    script = ScriptedModel([reply("Paris, I think."), _final({"name": "Paris", "population": 1})])
    out = await mule.run(_inp_with(script, City))
    assert out.output == City("Paris", 1)
    asked = script.calls[1][1].messages[-1]
    assert asked.role == "user"
    assert "final_result" in str(asked.content)


def _inp_with(script: ScriptedModel, output_type: Any) -> mule.MuleRunInput[Any]:
    return mule.MuleRunInput(
        model=MODEL,
        system_prompt="",
        messages=(UserMessage("answer"),),
        stream=script,
        output_type=output_type,
    )


@pytest.mark.anyio
async def test_stream_and_effects_codec_carry_the_output() -> None:
    async with mule.stream(_inp([_final({"name": "Rex", "legs": 3})], Pet)) as run:
        async for _ in run:
            pass
    assert run.outcome.output == Pet("Rex", 3)


@pytest.mark.anyio
async def test_no_output_type_means_no_output_tool() -> None:
    script = ScriptedModel([reply("hi")])
    out = await mule.run(
        mule.MuleRunInput(
            model=MODEL, system_prompt="", messages=(UserMessage("a"),), stream=script
        )
    )
    assert out.output is None
    assert get_current_tools(script.calls[0][1].messages) == ()


# The Effect root: the same output tool through `mule.effects.run` and `mule.effects.stream`.


def _core(replies: list[Reply], output_type: Any, **kw: Any) -> MulePortsInput[Any]:
    return MulePortsInput(
        model=MODEL,
        system_prompt="",
        messages=(UserMessage("answer"),),
        stream=ScriptedModel(replies),
        output_type=output_type,
        **kw,
    )


@pytest.mark.anyio
async def test_the_effect_root_decodes_the_output() -> None:
    result = await effects.run(
        MulePortsInput(
            model=MODEL,
            system_prompt="",
            messages=(UserMessage("answer"),),
            stream=ScriptedModel([_final({"name": "Paris", "population": 3})]),
            output_type=City,
        )
    )
    outcome = result.unwrap()
    city: City = outcome.output  # mypy knows: Result[MuleRunOutcome[City], MuleError]
    assert_type(result, Result[effects.MuleRunOutcome[City], MuleError])
    assert city == City("Paris", 3)
    assert [m.role for m in outcome.messages] == ["assistant", "toolResult"]


@pytest.mark.anyio
async def test_the_effect_stream_carries_the_output_and_sees_the_tool() -> None:
    seen: list[str] = []
    async with effects.stream(_core([_final({"name": "Rex", "legs": 3})], Pet)) as run:
        async for event in run:
            seen.append(event.type)
    assert isinstance(run.outcome, Success)
    assert run.outcome.unwrap().output == Pet("Rex", 3)
    assert seen.count("tool_execution_end") == 1
    assert seen[-1] == "run_end"


@pytest.mark.anyio
async def test_the_effect_root_retries_then_fails_as_a_value() -> None:
    ends: list[str] = []

    async def emit(event: MuleEvent, _: object) -> Result[None, MuleError]:
        if event.type == "run_end":
            ends.append(event.outcome)
        return Success(None)

    replies = [_final({"name": "x"}, "o1"), _final({"name": "y"}, "o2"), reply("never")]
    result = await effects.run(_core(replies, City, output_retries=1, ports=Ports(emit=emit)))
    assert isinstance(result, Failure)
    assert result.failure().phase == "tool"
    assert "output_retries=1" in result.failure().message
    assert ends == ["failed"]


@pytest.mark.anyio
async def test_the_effect_root_asks_for_the_tool_after_a_text_answer() -> None:
    script = ScriptedModel([reply("Paris."), _final({"name": "Paris", "population": 1})])
    result = await effects.run(
        MulePortsInput(
            model=MODEL,
            system_prompt="",
            messages=(UserMessage("answer"),),
            stream=script,
            output_type=City,
        )
    )
    assert result.unwrap().output == City("Paris", 1)
    assert "final_result" in str(script.calls[1][1].messages[-1].content)


@pytest.mark.anyio
async def test_text_answers_past_the_retries_fail_the_effect_run() -> None:
    result = await effects.run(_core([reply("no"), reply("still no")], City, output_retries=1))
    assert isinstance(result, Failure)
    assert result.failure().phase == "tool"
    assert "without calling final_result" in result.failure().message


@pytest.mark.anyio
async def test_the_output_tool_sits_beside_the_hosts_tools() -> None:
    @mule.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    replies = [reply(Call("c1", "add", {"a": 1, "b": 2})), _final({"response": 3})]
    out = await mule.run(_inp(replies, int, tools=(add,)))
    assert out.output == 3
    assert [m.role for m in out.messages] == ["assistant", "toolResult"] * 2


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"output_type": City, "output_retries": -1}, "output_retries"),
        ({"output_type": datetime.datetime}, "output_type"),
    ],
)
async def test_bad_output_settings_are_control_errors(kw: dict[str, Any], needle: str) -> None:
    result = await effects.run(
        MulePortsInput(
            model=MODEL,
            system_prompt="",
            messages=(UserMessage("answer"),),
            stream=ScriptedModel([reply("x")]),
            **kw,
        )
    )
    assert isinstance(result, Failure)
    assert result.failure().phase == "control"
    assert needle in result.failure().message
    with pytest.raises(mule.MuleRunFailed):
        await mule.run(
            _inp([reply("x")], kw["output_type"], output_retries=kw.get("output_retries", 1))
        )
