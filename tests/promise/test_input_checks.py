"""`MuleRunInput` checks its inputs when built; a listener is checked before the run starts."""

from __future__ import annotations

from typing import Any

import pytest

import mule
from mule.effects import MuleEvent
from mule.pi import AbortSignal, Model, UserMessage
from mule.pi.scripted import Call, ScriptedModel, reply

MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")


def _inp(**kw: Any) -> mule.MuleRunInput:
    kw.setdefault("messages", "hi")
    return mule.MuleRunInput(model=MODEL, system_prompt="", **kw)


def double(n: int) -> int:
    """Double a number.

    Args:
        n: The number.

    """
    return 2 * n


def test_a_str_is_one_user_message() -> None:
    inp = _inp(messages="How are you?")
    assert len(inp.messages) == 1
    assert isinstance(inp.messages[0], UserMessage)
    assert inp.messages[0].content == "How are you?"


def test_a_list_of_messages_becomes_a_tuple() -> None:
    first = UserMessage("a")
    assert _inp(messages=[first]).messages == (first,)


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        (3, "messages has type int"),
        ([{"role": "user", "content": "hi"}], "a dict is not a message: use mule.pi.UserMessage"),
        (["hi", UserMessage("x")], "messages[0] has type str"),
        ({"role": "user"}, "messages has type dict"),
    ],
)
def test_wrong_messages_are_a_type_error_at_once(messages: object, needle: str) -> None:
    with pytest.raises(TypeError) as caught:
        _inp(messages=messages)
    assert needle in str(caught.value)


def test_a_plain_function_is_wrapped_as_mule_tool_would() -> None:
    inp = _inp(tools=[double])
    (made,) = inp.tools
    assert isinstance(made, mule.MuleTool)
    assert made.descriptor == mule.tool(double).descriptor
    assert made.descriptor.parameters == {
        "type": "object",
        "properties": {"n": {"type": "integer", "description": "The number."}},
        "required": ["n"],
    }


@pytest.mark.parametrize(
    ("tools", "needle"),
    [
        ([3], "tools[0] has type int, not a tool"),
        (double, "tools has type function"),
        ([mule.tool(double), "double"], "tools[1] has type str"),
    ],
)
def test_wrong_tools_are_a_type_error_naming_mule_tool(tools: object, needle: str) -> None:
    with pytest.raises(TypeError) as caught:
        _inp(tools=tools)
    assert needle in str(caught.value)
    assert "@mule.tool" in str(caught.value)


@pytest.mark.anyio
async def test_a_wrapped_plain_function_runs() -> None:
    script = ScriptedModel([reply(Call("c1", "double", {"n": 21})), reply("42")])
    out = await mule.run(_inp(stream=script, tools=[double]))
    assert out.text == "42"
    assert [m.role for m in out.messages] == ["assistant", "toolResult", "assistant"]


def one_argument(event: MuleEvent) -> None:
    raise AssertionError("never called")


@pytest.mark.anyio
async def test_a_one_argument_listener_is_refused_before_the_run() -> None:
    script = ScriptedModel([reply("never")])
    with pytest.raises(TypeError, match=r"cannot be called as listener\(event, signal\)"):
        await mule.run(_inp(stream=script), one_argument)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="listener"):
        mule.stream(_inp(stream=script), listener=one_argument)  # type: ignore[arg-type]
    assert script.calls == []  # nothing ran


def test_run_sync_refuses_it_too() -> None:
    with pytest.raises(TypeError, match="two positional arguments"):
        mule.run_sync(_inp(stream=ScriptedModel([reply("x")])), one_argument)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_listeners_that_take_event_and_signal_pass() -> None:
    seen: list[str] = []

    def with_defaults(event: MuleEvent, signal: AbortSignal, extra: int = 0) -> None:
        seen.append(event.type)

    async def star(*args: object) -> None:
        seen.append("star")

    await mule.run(_inp(stream=ScriptedModel([reply("a")])), with_defaults)
    await mule.run(_inp(stream=ScriptedModel([reply("a")])), star)
    assert seen[0] == "run_start"
    assert "star" in seen
