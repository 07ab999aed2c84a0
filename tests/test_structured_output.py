"""Structured output: `output_type` as a terminating `final_result` tool, typed for mypy."""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

import attrs
import pydantic
import pytest

import mule
from mule.effects import MuleEvent
from mule.pi import Model, UserMessage
from mule.pi._scripted import Call, Reply, ScriptedModel, reply

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
        (str, {"response": "yes"}, "yes"),
    ],
)
async def test_output_types(output_type: Any, arguments: dict[str, Any], expected: Any) -> None:
    out = await mule.run(_inp([_final(arguments)], output_type))
    assert out.output == expected


def test_the_tool_schema_is_the_types() -> None:
    seen = ScriptedModel([_final({"response": 1})])
    inp = mule.MuleRunInput(
        model=MODEL, system_prompt="", messages=(UserMessage("a"),), stream=seen, output_type=int
    )
    mule.run_sync(inp)
    tools = seen.calls[0][1].tools
    assert tools is not None
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
    assert script.calls[0][1].tools is None
