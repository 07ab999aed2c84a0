"""Run totals (`MuleRunOutcome.usage`) and `RunLimits`, through both roots."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from returns.result import Success

import mule
import mule.effects
from mule.effects import MuleEvent
from mule.pi import Model, RetryPolicy, Usage, UsageCost, UserMessage
from mule.pi.scripted import Call, Reply, ScriptedModel, error_reply, reply
from mule.promise import core_input

MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")


def _usage(output: int, cost: float = 0.0) -> Usage:
    return Usage(
        input=10,
        output=output,
        total_tokens=10 + output,
        cost=UsageCost(output=cost, total=cost),
    )


@mule.tool(replay="safe")
def echo(text: str) -> str:
    """Echo."""
    return text


def _inp(replies: list[Reply], **kw: Any) -> mule.MuleRunInput:
    return mule.MuleRunInput(
        model=MODEL,
        system_prompt="",
        messages=(UserMessage("go", 1),),
        stream=ScriptedModel(replies),
        tools=[echo],
        **kw,
    )


def _calls(*ids: str) -> Reply:
    return reply(*(Call(i, "echo", {"text": i}) for i in ids), usage=_usage(5, 0.25))


@pytest.mark.anyio
async def test_usage_totals_every_attempt_retried_ones_included() -> None:
    replies = [
        error_reply("503 overloaded", usage=_usage(3, 0.5), start=True),
        reply("done", usage=_usage(7, 1.0)),
    ]
    inp = _inp(replies, retry=RetryPolicy(enabled=True, max_retries=1, base_delay_ms=1))
    out = await mule.run(inp)
    assert out.message.usage.output == 7  # the last response's own
    assert out.usage.output == 10
    assert out.usage.input == 20
    assert out.usage.total_tokens == 30
    assert out.usage.cost.total == pytest.approx(1.5)
    assert out.limit is None


@pytest.mark.anyio
async def test_max_turns_stops_after_the_turn_settles() -> None:
    events: list[MuleEvent] = []
    replies = [_calls("c1", "c2"), _calls("c3"), reply("never")]
    out = await mule.run(
        _inp(replies, limits=mule.RunLimits(max_turns=1)), lambda e, s: events.append(e)
    )
    assert out.status == "completed"
    assert out.limit == "max_turns"
    # Both tools of the batch ran and the turn ended before the stop.
    assert [m.role for m in out.messages] == ["assistant", "toolResult", "toolResult"]
    ends = [e for e in events if e.type == "run_end"]
    assert [e.outcome for e in ends] == ["completed"]
    assert events[-1].type == "run_end"
    assert [e.type for e in events].count("turn_end") == 1


@pytest.mark.anyio
async def test_max_output_tokens_reached_mid_batch_stops_after_that_turn() -> None:
    events: list[MuleEvent] = []
    replies = [_calls("c1"), _calls("c2", "c3"), _calls("c4"), reply("never")]
    out = await mule.run(
        _inp(replies, limits=mule.RunLimits(max_output_tokens=10)), lambda e, s: events.append(e)
    )
    assert out.limit == "max_output_tokens"
    assert out.usage.output == 10
    assert [e.type for e in events].count("turn_end") == 2
    assert [m.role for m in out.messages][-2:] == ["toolResult", "toolResult"]
    assert [e.outcome for e in events if e.type == "run_end"] == ["completed"]


@pytest.mark.anyio
async def test_max_cost_usd_through_the_effects_root() -> None:
    replies = [_calls("c1"), _calls("c2"), _calls("c3"), reply("never")]
    result = await mule.effects.run(
        core_input(_inp(replies, limits=mule.RunLimits(max_cost_usd=0.5)))
    )
    assert isinstance(result, Success)
    out = result.unwrap()
    assert out.limit == "max_cost_usd"
    assert out.usage.cost.total == pytest.approx(0.5)


@pytest.mark.anyio
async def test_a_run_that_ends_first_names_no_limit() -> None:
    out = await mule.run(_inp([_calls("c1"), reply("done")], limits=mule.RunLimits(max_turns=2)))
    assert out.limit is None
    assert out.message.content[0].text == "done"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_stop_hook_is_not_asked_once_a_limit_stopped_the_run() -> None:
    asked: list[int] = []

    async def stop(turn: mule.MuleCompletedTurn, signal: mule.AbortSignal) -> bool:
        asked.append(1)
        return False

    out = await mule.run(
        _inp(
            [_calls("c1"), _calls("c2"), reply("never")],
            limits=mule.RunLimits(max_turns=2),
            should_stop_after_turn=stop,
        )
    )
    assert out.limit == "max_turns"
    assert asked == [1]  # after turn 1 only


@pytest.mark.parametrize(
    "kw",
    [{"max_turns": 0}, {"max_turns": 1.5}, {"max_output_tokens": -1}, {"max_cost_usd": 0}],
)
def test_limits_are_checked(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        mule.RunLimits(**kw)


@pytest.mark.anyio
async def test_a_failed_run_keeps_its_usage_on_the_error() -> None:
    # A tool call (5 out), then a model failure that is not retried (3 out): both counted.
    replies = [_calls("a"), error_reply("400 bad request", usage=_usage(3, 0.5), start=True)]
    with pytest.raises(mule.MuleRunFailed) as caught:
        await mule.run(_inp(replies))
    assert caught.value.phase == "model"
    assert caught.value.usage.output == 8
    assert caught.value.usage.cost.total == 0.75
    assert caught.value.error.usage == caught.value.usage


@pytest.mark.anyio
async def test_the_effect_root_failure_carries_the_usage() -> None:
    replies = [_calls("a"), error_reply("400 bad request", usage=_usage(3, 0.5), start=True)]
    result = await mule.effects.run(core_input(_inp(replies)))
    assert not isinstance(result, Success)
    error = result.failure()
    assert error.usage.output == 8
    assert error.usage.input == 20
    # Usage is a fact about the run, not part of the error's identity.
    assert error == mule.effects.MuleError(error.phase, error.message, error.cause)


@pytest.mark.anyio
async def test_an_error_not_from_a_run_has_zero_usage() -> None:
    assert mule.effects.MuleError("tool", "x").usage.total_tokens == 0


# -- limits with structured output: the run that ends with its answer names no limit ---------


def _answer(points: int, *also: str, out: int = 5) -> Reply:
    calls = [Call(i, "echo", {"text": i}) for i in also]
    return reply(*calls, Call("o1", "final_result", {"response": points}), usage=_usage(out, 0.25))


def _typed(replies: list[Reply], limits: mule.RunLimits) -> mule.MuleRunInput[Any]:
    return _inp(replies, output_type=int, limits=limits)


async def _both_roots(
    inp: mule.MuleRunInput[Any], events: list[MuleEvent] | None = None
) -> list[mule.MuleRunOutcome[Any]]:
    """Run through `mule.run` and through `mule.effects.run` (fresh replies each)."""
    assert isinstance(inp.stream, ScriptedModel)
    script = list(inp.stream.replies)
    seen = events if events is not None else []
    promised = await mule.run(inp, lambda e, s: seen.append(e))
    again = attrs.evolve(inp, stream=ScriptedModel(list(script)))
    result = await mule.effects.run(core_input(again, lambda e, s: seen.append(e)))
    assert isinstance(result, Success)
    return [promised, result.unwrap()]


@pytest.mark.anyio
async def test_output_on_the_turn_a_limit_is_reached_names_no_limit() -> None:
    # max_turns=2 is reached by the turn whose final_result ends the run.
    inp = _typed([_calls("c1"), _answer(3)], mule.RunLimits(max_turns=2))
    for out in await _both_roots(inp):
        assert out.output == 3
        assert out.limit is None
        assert out.status == "completed"


@pytest.mark.anyio
async def test_output_in_a_batch_that_reaches_a_limit_names_no_limit() -> None:
    # The output tool runs beside another tool, and that turn crosses max_output_tokens.
    events: list[MuleEvent] = []
    inp = _typed(
        [_calls("c1"), _answer(7, "c2", out=6), reply("never")],
        mule.RunLimits(max_output_tokens=10),
    )
    for out in await _both_roots(inp, events):
        assert out.output == 7
        assert out.limit is None
        assert out.usage.output == 11
        assert [m.role for m in out.messages][-3:] == ["assistant", "toolResult", "toolResult"]
    # One terminal per run, and the batch settled (both tools ran) before it.
    assert [e.outcome for e in events if e.type == "run_end"] == ["completed", "completed"]
    assert [e.type for e in events].count("tool_execution_end") == 2 * 3


@pytest.mark.anyio
async def test_a_limit_after_the_output_turn_is_still_named() -> None:
    # The output arrives beside another tool (so the run goes on), and a later turn is cut.
    inp = _typed([_answer(7, "c1"), _calls("c2"), reply("never")], mule.RunLimits(max_turns=2))
    for out in await _both_roots(inp):
        assert out.output == 7
        assert out.limit == "max_turns"


@pytest.mark.anyio
async def test_a_limit_before_any_output_is_named() -> None:
    inp = _typed([_calls("c1"), _calls("c2"), reply("never")], mule.RunLimits(max_turns=2))
    for out in await _both_roots(inp):
        assert out.output is None
        assert out.limit == "max_turns"


@pytest.mark.anyio
async def test_an_invalid_output_on_the_limit_turn_is_no_answer() -> None:
    # final_result rejected (not an int): the limit, not an output, ended the run.
    bad = reply(Call("o1", "final_result", {"response": "many"}), usage=_usage(5, 0.25))
    inp = _typed([_calls("c1"), bad, reply("never")], mule.RunLimits(max_turns=2))
    for out in await _both_roots(inp):
        assert out.output is None
        assert out.limit == "max_turns"
