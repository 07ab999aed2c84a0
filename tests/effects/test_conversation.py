"""Conversations: `MuleRunOutcome.all_messages` is the context to continue from."""

from __future__ import annotations

import pytest

import mule
from mule.pi import Message, Model, SystemMessage, UserMessage
from mule.pi.scripted import Call, ScriptedModel, reply
from mule.promise import core_input

MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")


@mule.tool
def double(n: int) -> int:
    """Double a number."""
    return 2 * n


def _inp(script: ScriptedModel, messages: tuple[Message, ...]) -> mule.MuleRunInput:
    return mule.MuleRunInput(
        model=MODEL, system_prompt="", messages=messages, stream=script, tools=[double]
    )


@pytest.mark.anyio
async def test_all_messages_is_the_input_plus_the_new_messages() -> None:
    first = (UserMessage("double 2", 1),)
    script = ScriptedModel([reply(Call("c1", "double", {"n": 2})), reply("4"), reply("8")])
    out = await mule.run(_inp(script, first))
    assert [m.role for m in out.messages] == ["assistant", "toolResult", "assistant"]
    assert out.all_messages == first + out.messages
    # Continuing from all_messages: the model sees the whole conversation.
    follow = (*out.all_messages, UserMessage("and again", 2))
    again = await mule.run(_inp(script, follow))
    seen = script.calls[-1][1].messages
    # Behind the initial system message (the prompt and the tools; Pi 1.6.0's transcript).
    assert type(seen[0]) is SystemMessage
    assert tuple(seen[1:]) == follow
    assert again.all_messages == follow + again.messages


@pytest.mark.anyio
async def test_a_cancelled_run_has_its_conversation_too() -> None:
    first = (UserMessage("double 2", 1),)
    script = ScriptedModel([reply(Call("c1", "double", {"n": 2})), reply("4")])
    async with mule.stream(_inp(script, first)) as run:
        async for event in run:
            if event.type == "tool_execution_end":
                break
    out = run.outcome
    assert out.status == "cancelled"
    assert out.all_messages[: len(first)] == first
    assert out.all_messages == first + out.messages


@pytest.mark.anyio
async def test_cancelled_before_start_keeps_the_input() -> None:
    controller = mule.AbortController()
    controller.abort("no")
    first = (UserMessage("hi", 1),)
    async with mule.effects.stream(
        core_input(_inp(ScriptedModel([]), first)), controller.signal
    ) as run:
        pass
    assert run.outcome.unwrap().all_messages == first
