"""Section 6 scenarios 1-22 and 34-37, 39: the loop, tools, steering and the stop hook.

The expected text of an interrupted call is the private rule
`mule.effects._batch.truncated_call_text`.
"""

from __future__ import annotations

import pytest

from mule.effects import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelPrompt,
    MuleIdentity,
    RunEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from mule.effects._batch import truncated_call_text
from mule.pi import (
    AssistantMessage,
    JsonObject,
    JsonValue,  # noqa: F401 (resolves the recursive alias)
    StreamOptions,
    SystemMessage,
    TextContent,
    TextDeltaEvent,
    ThinkingLevel,
    Tool,
    ToolArgumentsError,
    ToolCall,
    ToolResultMessage,
    Usage,
    get_current_system_prompt,
    get_current_tools,
    validate_tool_arguments,
    without_system_messages,
)
from mule.pi.scripted import Call, Reply, Text, error_reply, reply
from tests.effects.kit import (
    MODEL,
    SYSTEM,
    Journal,
    Queue,
    Root,
    StopHook,
    assistant,
    identities,
    make_input,
    model_of,
    of_type,
    run_root,
    text_of,
    to_core,
    tool,
    user,
)

pytestmark = pytest.mark.anyio

ASSISTANT_TEXT = ["MS", "MU", "MU", "MU", "ME(stop)"]


def after(proj: list[str], marker: str) -> list[str]:
    """Return the projection after the first `marker`."""
    return proj[proj.index(marker) + 1 :]


def tool_turn(*calls: Call) -> Reply:
    """Return a toolUse reply holding `calls`."""
    return reply(*calls)


# -- 1, 2: the basic run and input checks ----------------------------------------------------------


async def test_s01_text_reply_completes(root: Root) -> None:
    """1: a text reply gives the canonical sequence; outcome.messages is [assistant]."""
    model = model_of(reply("hi"))
    ran = await run_root(root, make_input(model))
    assert ran.proj == ["RS", "TS", "MP(1)", *ASSISTANT_TEXT, "TE()", "RE(completed)"]
    out = ran.ok
    assert out.status == "completed"
    assert len(out.messages) == 1
    final = out.messages[0]
    assert type(final) is AssistantMessage
    assert text_of(final) == "hi"
    assert out.message == final
    assert of_type(ran.events, MessageEnd)[0].value == final
    assert of_type(ran.events, TurnEnd)[0].message == final
    end = ran.events[-1]
    assert type(end) is RunEnd
    assert end.terminal == out.terminal
    assert end.run == out.run


@pytest.mark.parametrize(
    "messages",
    [(), (user("q"), assistant(TextContent("a")))],
    ids=["empty", "trailing-assistant"],
)
async def test_s02_bad_continue_input_is_control_error(
    root: Root, messages: tuple[object, ...]
) -> None:
    """2: no messages, or a trailing assistant without resume: control error, no events."""
    model = model_of(reply("never"))
    ran = await run_root(root, make_input(model, messages=messages))  # type: ignore[arg-type]
    assert ran.failed.phase == "control"
    assert ran.events == []
    assert model.calls == []


async def test_s02_input_checks(root: Root) -> None:
    """Idle timeouts <= 0 or not finite, and duplicate tool names, are control errors."""
    for bad in (0.0, -5.0, float("nan"), float("inf")):
        ran = await run_root(
            root, make_input(model_of(reply("x")), model_stream_idle_timeout_ms=bad)
        )
        assert ran.failed.phase == "control", bad
        assert ran.events == []
    dup = make_input(model_of(reply("x")), tools=(tool("T"), tool("T")))
    ran = await run_root(root, dup)
    assert ran.failed.phase == "control"
    assert "T" in ran.failed.message
    assert ran.events == []


# -- 3, 4: provider errors ----------------------------------------------------------------------


async def test_s03_error_without_start(root: Root) -> None:
    """3: an `error` without `start`: MS ME(error) TE() RE(failed); model error."""
    ran = await run_root(root, make_input(model_of(error_reply("429 Too Many Requests"))))
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "ME(error)", "TE()", "RE(failed)"]
    err = ran.failed
    assert err.phase == "model"
    assert err.message == "429 Too Many Requests"
    assert type(err.cause) is AssistantMessage
    assert err.cause.stop_reason == "error"
    assert err.cause == of_type(ran.events, MessageEnd)[0].value


async def test_s04_error_after_start_with_calls_runs_no_tool(root: Root) -> None:
    """4: an error after `start` with toolCall blocks: no tool runs, TE() RE(failed)."""
    journal = Journal()
    failing = Reply(blocks=(Call("c1", "T", {"a": 1}),), stop_reason="error", error_message="boom")
    ran = await run_root(root, make_input(model_of(failing), tools=(tool("T", journal),)))
    assert ran.proj == [
        "RS",
        "TS",
        "MP(1)",
        "MS",
        "MU",
        "MU",
        "MU",
        "ME(error)",
        "TE()",
        "RE(failed)",
    ]
    assert journal.entries == []
    assert ran.failed.phase == "model"
    assert ran.failed.message == "boom"
    final = ran.failed.cause
    assert type(final) is AssistantMessage
    assert any(type(b) is ToolCall for b in final.content)


# -- 5-9: tool batches ----------------------------------------------------------------------------


async def test_s05_parallel_completion_order_and_source_order_results(root: Root) -> None:
    """5: parallel: ends in completion order, result messages and TE in source order."""
    journal = Journal()
    tools = (tool("A", journal, delay_ms=80), tool("B", journal))
    model = model_of(tool_turn(Call("c1", "A"), Call("c2", "B")), reply("done"))
    ran = await run_root(root, make_input(model, tools=tools))
    assert after(ran.proj, "ME(toolUse)") == [
        "XS(c1)",
        "XS(c2)",
        "XE(c2)",
        "XE(c1)",
        "MS(r:c1)",
        "ME(r:c1)",
        "MS(r:c2)",
        "ME(r:c2)",
        "TE(c1,c2)",
        "TS",
        "MP(1)",
        *ASSISTANT_TEXT,
        "TE()",
        "RE(completed)",
    ]
    te = of_type(ran.events, TurnEnd)[0]
    assert [text_of(r) for r in te.tool_results] == ["A:c1", "B:c2"]
    # Both executed concurrently: B finished while A was still running.
    assert journal.of("done") == ["c2", "c1"]


async def test_s06_parallel_immediate_result_precedes_execution(root: Root) -> None:
    """6: an unknown tool's XE comes in the prepare pass; every prepare runs before any execute."""
    journal = Journal()
    tools = tuple(tool(n, journal, updates=("u",)) for n in ("A", "B", "D"))
    calls = (Call("c1", "A"), Call("c2", "B"), Call("c3", "U"), Call("c4", "D"))
    ran = await run_root(root, make_input(model_of(tool_turn(*calls), reply("ok")), tools=tools))
    body = after(ran.proj, "ME(toolUse)")
    assert body[:5] == ["XS(c1)", "XS(c2)", "XS(c3)", "XE(c3!)", "XS(c4)"]
    others = [p for p in body if p.startswith(("XU(", "XE(")) and "c3" not in p]
    assert len(others) == 6
    assert all(body.index(p) > body.index("XE(c3!)") for p in others)
    first_exec = journal.entries.index(("execute", journal.of("execute")[0]))
    prepares = [i for i, (w, _) in enumerate(journal.entries) if w == "prepare"]
    assert journal.of("prepare") == ["c1", "c2", "c4"]
    assert max(prepares) < first_exec
    ends = of_type(ran.events, ToolExecutionEnd)
    unknown = next(e for e in ends if e.call.id == "c3")
    assert text_of(unknown.result) == "Tool U not found"
    results = ["MS(r:c1)", "ME(r:c1)", "MS(r:c2)", "ME(r:c2)", "MS(r:c3!)", "ME(r:c3!)"]
    assert body[11:20] == [*results, "MS(r:c4)", "ME(r:c4)", "TE(c1,c2,c3,c4)"]


SEQUENTIAL_BODY = [
    "XS(c1)",
    "XE(c1)",
    "MS(r:c1)",
    "ME(r:c1)",
    "XS(c2)",
    "XE(c2)",
    "MS(r:c2)",
    "ME(r:c2)",
    "TE(c1,c2)",
]


async def test_s07_sequential_setting(root: Root) -> None:
    """7: toolExecution sequential: XS XE MS ME per call, strictly; the slow one still first."""
    journal = Journal()
    tools = (tool("A", journal, delay_ms=60), tool("B", journal))
    model = model_of(tool_turn(Call("c1", "A"), Call("c2", "B")), reply("ok"))
    ran = await run_root(root, make_input(model, tools=tools, tool_execution="sequential"))
    body = after(ran.proj, "ME(toolUse)")
    assert body[: len(SEQUENTIAL_BODY)] == SEQUENTIAL_BODY
    assert journal.entries == [
        ("prepare", "c1"),
        ("execute", "c1"),
        ("done", "c1"),
        ("closed", "c1"),
        ("prepare", "c2"),
        ("execute", "c2"),
        ("done", "c2"),
        ("closed", "c2"),
    ]


async def test_s08_one_sequential_tool_makes_the_batch_sequential(root: Root) -> None:
    """8: one tool with executionMode sequential makes the whole batch sequential."""
    journal = Journal()
    tools = (tool("A", journal, delay_ms=60), tool("B", journal, execution_mode="sequential"))
    model = model_of(tool_turn(Call("c1", "A"), Call("c2", "B")), reply("ok"))
    ran = await run_root(root, make_input(model, tools=tools))
    assert after(ran.proj, "ME(toolUse)")[: len(SEQUENTIAL_BODY)] == SEQUENTIAL_BODY
    assert journal.of("prepare") == ["c1", "c2"]
    assert journal.entries.index(("done", "c1")) < journal.entries.index(("prepare", "c2"))


async def test_s08_parallel_mode_tool_does_not_force(root: Root) -> None:
    """A tool declaring "parallel" (or unknown tools) keeps the default parallel batch."""
    journal = Journal()
    tools = (tool("A", journal, delay_ms=60, execution_mode="parallel"), tool("B", journal))
    model = model_of(tool_turn(Call("c1", "A"), Call("c2", "B"), Call("c3", "U")), reply("ok"))
    ran = await run_root(root, make_input(model, tools=tools))
    body = after(ran.proj, "ME(toolUse)")
    assert body[:6] == ["XS(c1)", "XS(c2)", "XS(c3)", "XE(c3!)", "XE(c2)", "XE(c1)"]


async def test_s09_unknown_tool_is_an_error_result_and_the_run_continues(root: Root) -> None:
    """9: an unknown tool gives an isError result; the model sees it in the next prompt."""
    model = model_of(tool_turn(Call("c1", "Nope", {"x": 1})), reply("sorry"))
    ran = await run_root(root, make_input(model))
    body = after(ran.proj, "ME(toolUse)")
    assert body == [
        "XS(c1)",
        "XE(c1!)",
        "MS(r:c1!)",
        "ME(r:c1!)",
        "TE(c1)",
        "TS",
        "MP(1)",
        *ASSISTANT_TEXT,
        "TE()",
        "RE(completed)",
    ]
    start = of_type(ran.events, ToolExecutionStart)[0]
    assert start.replay == "unsafe"
    result = of_type(ran.events, MessageEnd)[1].value
    assert type(result) is ToolResultMessage
    assert result.is_error
    assert result.content == (TextContent("Tool Nope not found"),)
    assert result.details == {}
    second_prompt = model.calls[1][1].messages
    assert second_prompt[-1] == result


# -- 10-12: the schema gate -----------------------------------------------------------------------

NUMBER_N: JsonObject = {
    "type": "object",
    "properties": {"n": {"type": "number"}},
    "required": ["n"],
}


async def test_s10_gate_failure_text_and_no_prepare(root: Root) -> None:
    """10: missing required `n`: Pi's validation text; prepare is never called."""
    journal = Journal()
    model = model_of(tool_turn(Call("c1", "V", {})), reply("ok"))
    ran = await run_root(root, make_input(model, tools=(tool("V", journal, params=NUMBER_N),)))
    assert after(ran.proj, "ME(toolUse)")[:4] == ["XS(c1)", "XE(c1!)", "MS(r:c1!)", "ME(r:c1!)"]
    end = of_type(ran.events, ToolExecutionEnd)[0]
    text = text_of(end.result)
    assert text.startswith('Validation failed for tool "V":\n')
    assert "  - n:" in text
    assert text.endswith("\n\nReceived arguments:\n{}")
    assert end.result.details == {}
    assert journal.entries == []


async def test_s11_gate_passes_and_prepare_gets_the_coerced_call(root: Root) -> None:
    """11: {"n": "5"} passes the gate; prepare receives the gate's 5 (Pi's validatedArgs).

    The events keep the model's call as it came.
    """
    journal = Journal()
    model = model_of(tool_turn(Call("c1", "V", {"n": "5"})), reply("ok"))
    ran = await run_root(root, make_input(model, tools=(tool("V", journal, params=NUMBER_N),)))
    assert "XE(c1)" in ran.proj
    assert journal.calls["c1"].arguments == {"n": 5}
    assert journal.calls["c1"].id == "c1"
    assert of_type(ran.events, ToolExecutionStart)[0].call.arguments == {"n": "5"}
    assert of_type(ran.events, ToolExecutionEnd)[0].call.arguments == {"n": "5"}


COERCE: JsonObject = {
    "type": "object",
    "properties": {
        "n": {"type": "number"},
        "s": {"type": "string"},
        "b": {"type": "boolean"},
        "h": {"type": "number"},
        "i": {"type": "integer"},
        "arr": {"type": "array", "items": {"type": "number"}},
        "u": {"anyOf": [{"type": "number"}, {"type": "boolean"}]},
    },
}
COERCIBLE: JsonObject = {
    "n": None,
    "s": None,
    "b": None,
    "h": "0x10",
    "i": "1.0",
    "arr": ["1", "2"],
    "u": "true",
}
# pi-schema 1.6.0: optional nulls are dropped, and anyOf[number, boolean] takes "true" as 1.
COERCED = {"h": 16, "i": 1, "arr": [1, 2], "u": 1}


def test_s12_coercion_values() -> None:
    """12: the gate's coercions (the values prepare would decode for itself)."""
    got = validate_tool_arguments(Tool("V", "", COERCE), ToolCall("c1", "V", COERCIBLE))
    assert got == COERCED
    with pytest.raises(ToolArgumentsError):
        validate_tool_arguments(Tool("V", "", COERCE), ToolCall("c1", "V", {"b": "yes"}))


async def test_s12_coercion_decides_the_gate(root: Root) -> None:
    """12: coercible arguments pass the gate (coerced values reach prepare); "yes"→bool fails."""
    journal = Journal()
    calls = (Call("c1", "V", COERCIBLE), Call("c2", "V", {"b": "yes"}))
    model = model_of(tool_turn(*calls), reply("ok"))
    ran = await run_root(root, make_input(model, tools=(tool("V", journal, params=COERCE),)))
    body = after(ran.proj, "ME(toolUse)")
    assert body[:4] == ["XS(c1)", "XS(c2)", "XE(c2!)", "XE(c1)"]
    assert journal.of("prepare") == ["c1"]
    assert journal.calls["c1"].arguments == COERCED


# -- 13-17: rejection and terminate ---------------------------------------------------------------


async def test_s13_rejection_is_an_immediate_error_result(root: Root) -> None:
    """13: prepare rejects "denied": XE isError, text "denied", details {}; execute never runs."""
    journal = Journal()
    model = model_of(tool_turn(Call("c1", "T")), reply("ok"))
    ran = await run_root(root, make_input(model, tools=(tool("T", journal, reject="denied"),)))
    assert after(ran.proj, "ME(toolUse)")[:5] == [
        "XS(c1)",
        "XE(c1!)",
        "MS(r:c1!)",
        "ME(r:c1!)",
        "TE(c1)",
    ]
    end = of_type(ran.events, ToolExecutionEnd)[0]
    assert end.result.content == (TextContent("denied"),)
    assert end.result.details == {}
    assert end.result.is_error
    assert journal.of("execute") == []
    msg = of_type(ran.events, MessageEnd)[1].value
    assert type(msg) is ToolResultMessage
    assert msg.details == {}
    assert msg.is_error


async def test_s14_all_terminate_ends_the_run(root: Root) -> None:
    """14: every result terminates: no further model call; outcome.message = the toolUse message."""
    tools = (tool("A", terminate=True), tool("B", terminate=True))
    model = model_of(tool_turn(Call("c1", "A"), Call("c2", "B")), reply("never"))
    ran = await run_root(root, make_input(model, tools=tools))
    assert ran.proj[-2:] == ["TE(c1,c2)", "RE(completed)"]
    assert ran.proj.count("MP(1)") == 1
    out = ran.ok
    assert out.message.stop_reason == "toolUse"
    assert out.message == of_type(ran.events, TurnEnd)[0].message
    assert [type(m).__name__ for m in out.messages] == [
        "AssistantMessage",
        "ToolResultMessage",
        "ToolResultMessage",
    ]
    assert len(model.calls) == 1


async def test_s15_partial_terminate_continues(root: Root) -> None:
    """15: only some results terminate: the next turn runs."""
    tools = (tool("A", terminate=True), tool("B"))
    model = model_of(tool_turn(Call("c1", "A"), Call("c2", "B")), reply("next"))
    ran = await run_root(root, make_input(model, tools=tools))
    assert after(ran.proj, "TE(c1,c2)") == ["TS", "MP(1)", *ASSISTANT_TEXT, "TE()", "RE(completed)"]
    assert text_of(ran.ok.message) == "next"


async def test_s15_terminate_false_is_not_terminate(root: Root) -> None:
    """terminate=False on every result does not end the run."""
    model = model_of(tool_turn(Call("c1", "A")), reply("next"))
    ran = await run_root(root, make_input(model, tools=(tool("A", terminate=False),)))
    assert ran.proj.count("TS") == 2


async def test_s16_terminate_with_queued_steering_starts_a_turn(root: Root) -> None:
    """16: all terminate, but steering is queued: a new turn with it, then a model call."""
    steering = Queue([(), (user("steer"),)])
    model = model_of(tool_turn(Call("c1", "A")), reply("ok"))
    inp = make_input(model, tools=(tool("A", terminate=True),), get_steering_messages=steering)
    ran = await run_root(root, inp)
    assert after(ran.proj, "TE(c1)") == [
        "TS",
        "MS(u:steer)",
        "ME(u:steer)",
        "MP(1)",
        *ASSISTANT_TEXT,
        "TE()",
        "RE(completed)",
    ]
    assert steering.calls == 3
    assert model.calls[1][1].messages[-1] == user(
        "steer", at=model.calls[1][1].messages[-1].timestamp
    )


async def test_s17_rejections_with_terminate_end_the_batch(root: Root) -> None:
    """17: every call rejected with terminate:true: the batch terminates."""
    tools = (
        tool("A", reject="no", reject_terminate=True),
        tool("B", reject="nope", reject_terminate=True),
    )
    model = model_of(tool_turn(Call("c1", "A"), Call("c2", "B")), reply("never"))
    ran = await run_root(root, make_input(model, tools=tools))
    assert after(ran.proj, "ME(toolUse)") == [
        "XS(c1)",
        "XE(c1!)",
        "XS(c2)",
        "XE(c2!)",
        "MS(r:c1!)",
        "ME(r:c1!)",
        "MS(r:c2!)",
        "ME(r:c2!)",
        "TE(c1,c2)",
        "RE(completed)",
    ]
    assert len(model.calls) == 1


async def test_s17_mixed_rejection_and_result_terminate(root: Root) -> None:
    """Terminate counts rejections too: a terminating rejection plus a terminating result ends."""
    tools = (tool("A", reject="no", reject_terminate=True), tool("B", terminate=True))
    model = model_of(tool_turn(Call("c1", "A"), Call("c2", "B")), reply("never"))
    ran = await run_root(root, make_input(model, tools=tools))
    assert ran.proj[-2:] == ["TE(c1,c2)", "RE(completed)"]


# -- 18-22: steering, follow-ups, stop hook --------------------------------------------------------


async def test_s18_initial_steering_joins_the_first_turn(root: Root) -> None:
    """18: initial steering [u]: RS TS MS(u) ME(u) MP(1), with one TS only."""
    steering = Queue([(user("s"),)])
    model = model_of(reply("hi"))
    ran = await run_root(root, make_input(model, get_steering_messages=steering))
    assert ran.proj == [
        "RS",
        "TS",
        "MS(u:s)",
        "ME(u:s)",
        "MP(1)",
        *ASSISTANT_TEXT,
        "TE()",
        "RE(completed)",
    ]
    assert [type(m).__name__ for m in ran.ok.messages] == ["UserMessage", "AssistantMessage"]
    assert [text_of(m) for m in without_system_messages(model.calls[0][1].messages)] == ["go", "s"]


async def test_s19_steering_after_a_final_answer_opens_a_turn(root: Root) -> None:
    """19: after a final answer, steering [u]: TE TS MS(u) ME(u) MP."""
    steering = Queue([(), (user("more"),)])
    model = model_of(reply("first"), reply("second"))
    ran = await run_root(root, make_input(model, get_steering_messages=steering))
    assert ran.proj == [
        "RS",
        "TS",
        "MP(1)",
        *ASSISTANT_TEXT,
        "TE()",
        "TS",
        "MS(u:more)",
        "ME(u:more)",
        "MP(1)",
        *ASSISTANT_TEXT,
        "TE()",
        "RE(completed)",
    ]
    assert steering.calls == 3
    turns = of_type(ran.events, TurnStart)
    injected = of_type(ran.events, MessageStart)[1]
    assert injected.turn is turns[1].turn


async def test_s20_follow_ups_open_one_turn_after_steering_polls(root: Root) -> None:
    """20: follow-ups [f1, f2] open one turn with both; steering is polled before follow-ups."""
    order: list[str] = []
    steering = Queue()
    follow = Queue([(user("f1"), user("f2"))])

    async def steer(signal):  # type: ignore[no-untyped-def]
        order.append("S")
        return await steering(signal)

    async def follow_up(signal):  # type: ignore[no-untyped-def]
        order.append("F")
        return await follow(signal)

    model = model_of(reply("a"), reply("b"))
    inp = make_input(model, get_steering_messages=steer, get_follow_up_messages=follow_up)
    ran = await run_root(root, inp)
    assert ran.proj == [
        "RS",
        "TS",
        "MP(1)",
        *ASSISTANT_TEXT,
        "TE()",
        "TS",
        "MS(u:f1)",
        "ME(u:f1)",
        "MS(u:f2)",
        "ME(u:f2)",
        "MP(1)",
        *ASSISTANT_TEXT,
        "TE()",
        "RE(completed)",
    ]
    assert order == ["S", "S", "F", "S", "F"]
    assert [text_of(m) for m in ran.ok.messages] == ["a", "f1", "f2", "b"]


async def test_s21_stop_hook_ends_after_a_tool_turn(root: Root) -> None:
    """21: the stop hook says stop after a tool turn: RE right after TE, no polls; its context."""
    stop = StopHook([True])
    steering, follow = Queue(), Queue()
    first = user("go")
    model = model_of(tool_turn(Call("c1", "A")), reply("never"))
    inp = make_input(
        model,
        messages=(first,),
        tools=(tool("A"),),
        should_stop_after_turn=stop,
        get_steering_messages=steering,
        get_follow_up_messages=follow,
    )
    ran = await run_root(root, inp)
    assert ran.proj[-2:] == ["TE(c1)", "RE(completed)"]
    assert steering.calls == 1  # only the initial poll
    assert follow.calls == 0
    (turn,) = stop.seen
    te = of_type(ran.events, TurnEnd)[0]
    assert turn.message == te.message
    assert turn.tool_results == te.tool_results
    assert without_system_messages(turn.context) == (first, te.message, *te.tool_results)
    out = ran.ok
    assert turn.new_messages == out.messages
    assert out.message == te.message


async def test_s21_stop_hook_false_continues_and_sees_each_turn(root: Root) -> None:
    """A stop hook answering False lets the run go on; it is consulted after every turn."""
    stop = StopHook()
    model = model_of(tool_turn(Call("c1", "A")), reply("done"))
    ran = await run_root(root, make_input(model, tools=(tool("A"),), should_stop_after_turn=stop))
    assert ran.proj.count("TS") == 2
    assert len(stop.seen) == 2
    assert stop.seen[1].new_messages == ran.ok.messages
    assert stop.seen[1].tool_results == ()


async def test_s22_error_turn_skips_the_stop_hook(root: Root) -> None:
    """22: an error turn never reaches the stop hook."""
    stop = StopHook()
    ran = await run_root(
        root, make_input(model_of(error_reply("bad request")), should_stop_after_turn=stop)
    )
    assert ran.failed.phase == "model"
    assert stop.seen == []


# -- 34-37: stream edges, updates, raising tools, result messages ----------------------------------


async def test_s34_block_events_before_start_and_after_done_are_ignored(root: Root) -> None:
    """34: a text_delta before `start` gives no MU; events after `done` are ignored."""
    late_partial = assistant(TextContent("late"))
    late = TextDeltaEvent(content_index=0, delta="late", partial=late_partial)
    script = Reply(blocks=(Text(("hi",)),), before_start=("text_delta",), trailing=(late,))
    ran = await run_root(root, make_input(model_of(script)))
    assert ran.proj == ["RS", "TS", "MP(1)", *ASSISTANT_TEXT, "TE()", "RE(completed)"]
    assert text_of(ran.ok.message) == "hi"


async def test_s34_no_start_then_done(root: Root) -> None:
    """A stream whose only event is `done` still gives MS and ME."""
    ran = await run_root(root, make_input(model_of(Reply(blocks=(Text(("x",)),), start=False))))
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "ME(stop)", "TE()", "RE(completed)"]


async def test_s35_updates_then_result(root: Root) -> None:
    """35: update parts u1, u2 then a result: XU XU XE; updates never enter the transcript."""
    journal = Journal()
    model = model_of(tool_turn(Call("c1", "A")), reply("ok"))
    ran = await run_root(root, make_input(model, tools=(tool("A", journal, updates=("u1", "u2")),)))
    assert after(ran.proj, "ME(toolUse)")[:4] == ["XS(c1)", "XU(c1)", "XU(c1)", "XE(c1)"]
    updates = of_type(ran.events, ToolExecutionUpdate)
    assert [text_of(u.result) for u in updates] == ["u1", "u2"]
    texts = [text_of(m) for m in ran.ok.messages]
    assert "u1" not in texts
    assert "u2" not in texts
    sent = without_system_messages(model.calls[1][1].messages)
    assert [text_of(m) for m in sent] == ["go", "", "A:c1"]
    # The first result is final: the executor is closed, never pulled again.
    assert journal.of("pulled-after-result") == []
    assert journal.of("closed") == ["c1"]


@pytest.mark.parametrize("how", ["execute-raises", "prepare-raises", "prepare-fails", "no-result"])
async def test_s36_tool_failures_fail_the_run(root: Root, how: str) -> None:
    """36: execute/prepare raising, a Failure from prepare, or no result part: MuleError(tool)."""
    from mule.effects import MuleError
    from tests.effects.kit import ToolBoom

    boom = ToolBoom("kaput")
    own = MuleError("tool", "prepare said no", "why")
    kwargs: dict[str, object] = {
        "execute-raises": {"execute_raises": boom},
        "prepare-raises": {"prepare_raises": boom},
        "prepare-fails": {"prepare_fails": own},
        "no-result": {"no_result": True},
    }[how]  # type: ignore[assignment]
    model = model_of(tool_turn(Call("c1", "A")), reply("never"))
    ran = await run_root(root, make_input(model, tools=(tool("A", **kwargs),)))  # type: ignore[arg-type]
    err = ran.failed
    assert err.phase == "tool"
    assert ran.proj[-2:] == ["XS(c1)", "RE(failed)"]
    assert "TE(c1)" not in ran.proj
    if how in ("execute-raises", "prepare-raises"):
        assert err.cause is boom
        assert "kaput" in err.message
    if how == "prepare-fails":
        assert err == own
    assert len(model.calls) == 1


async def test_s37_tool_result_messages(root: Root) -> None:
    """37: result messages take id/name from the call; details/usage only when given; timestamps."""
    usage = Usage(input=1, output=2, total_tokens=3)
    tools = (tool("A", details={"k": 1}, usage=usage), tool("B", is_error=True, delay_ms=20))
    model = model_of(tool_turn(Call("c1", "A"), Call("c2", "B")), reply("ok"))
    ran = await run_root(root, make_input(model, tools=tools))
    results = of_type(ran.events, TurnEnd)[0].tool_results
    a, b = results
    assert (a.tool_call_id, a.tool_name, a.is_error, a.details, a.usage) == (
        "c1",
        "A",
        False,
        {"k": 1},
        usage,
    )
    assert (b.tool_call_id, b.tool_name, b.is_error, b.details, b.usage) == (
        "c2",
        "B",
        True,
        None,
        None,
    )
    toolUse = of_type(ran.events, TurnEnd)[0].message
    stamps = [toolUse.timestamp, a.timestamp, b.timestamp]
    assert stamps == sorted(stamps)
    # Every message in the run, in event order, has a non-decreasing timestamp.
    ends = [e.value.timestamp for e in of_type(ran.events, MessageEnd)]
    assert ends == sorted(ends)


async def test_model_prompt_system_prompt_and_context(root: Root) -> None:
    """model_prompt carries the exact system prompt of the call context; tools are described."""
    model = model_of(tool_turn(Call("c1", "A")), reply("ok"))
    ran = await run_root(root, make_input(model, tools=(tool("A"),)))
    prompts = of_type(ran.events, ModelPrompt)
    assert [p.system_prompt for p in prompts] == [SYSTEM, SYSTEM]
    for _, ctx, _ in model.calls:
        # Pi 1.6.0: the prompt and the tools are the transcript's leading system message.
        assert get_current_system_prompt(ctx.messages) == SYSTEM
        assert [t.name for t in get_current_tools(ctx.messages)] == ["A"]
        assert type(ctx.messages[0]) is SystemMessage
    assert all(m is MODEL for m, _, _ in model.calls)


async def test_no_tools_means_no_tool_descriptors(root: Root) -> None:
    """A run without tools sends no tool list."""
    model = model_of(reply("ok"))
    await run_root(root, make_input(model))
    assert not get_current_tools(model.calls[0][1].messages)


async def test_message_update_snapshots_are_immune(root: Root) -> None:
    """Each message_update value is the response so far at that event (A22)."""
    ran = await run_root(root, make_input(model_of(reply(Text(("a", "b", "c"))))))
    texts = [text_of(u.value) for u in of_type(ran.events, MessageUpdate)]
    assert texts == ["", "a", "ab", "abc", "abc"]


# -- 39: identities -------------------------------------------------------------------------------


async def test_s39_identities(root: Root) -> None:
    """39: kinds, parents, uniqueness, and the same identity object across start/update/end."""
    steering = Queue([(user("s"),)])
    model = model_of(tool_turn(Call("c1", "A"), Call("c2", "A")), reply("ok"))
    ran = await run_root(
        root, make_input(model, tools=(tool("A", updates=("u",)),), get_steering_messages=steering)
    )
    events = ran.events
    out = ran.ok
    run_id = events[0].run
    assert run_id.kind == "run"
    assert run_id.parent is None
    assert all(e.run is run_id for e in events)
    assert out.run == run_id
    turns = [e.turn for e in of_type(events, TurnStart)]
    assert all(t.kind == "turn" and t.parent == run_id for t in turns)
    # Messages: the same identity object from start to end; parent = the turn.
    by_message: dict[str, list[MuleIdentity]] = {}
    for e in events:
        if isinstance(e, MessageStart | MessageUpdate | MessageEnd):
            by_message.setdefault(e.message.value, []).append(e.message)
    for idents in by_message.values():
        assert all(i is idents[0] for i in idents)
    assistant_ids = [
        e.message for e in of_type(events, MessageStart) if type(e.value) is AssistantMessage
    ]
    user_ids = [
        e.message for e in of_type(events, MessageStart) if type(e.value).__name__ == "UserMessage"
    ]
    result_ids = [
        e.message for e in of_type(events, MessageStart) if type(e.value) is ToolResultMessage
    ]
    assert all(i.kind == "message" and i.parent in turns for i in assistant_ids + user_ids)
    # Tool calls: one identity across XS/XU/XE; parent = the assistant message identity.
    by_call: dict[str, list[MuleIdentity]] = {}
    for e in events:
        if isinstance(e, ToolExecutionStart | ToolExecutionUpdate | ToolExecutionEnd):
            by_call.setdefault(e.call.id, []).append(e.tool_call)
    assert set(by_call) == {"c1", "c2"}
    for idents in by_call.values():
        assert len(idents) == 3
        assert all(i is idents[0] for i in idents)
        assert idents[0].kind == "tool_call"
        assert idents[0].parent is assistant_ids[0]
    # Tool results: kind tool_result, parent = the call's identity.
    assert [r.kind for r in result_ids] == ["tool_result", "tool_result"]
    assert [r.parent for r in result_ids] == [by_call["c1"][0], by_call["c2"][0]]
    # The terminal.
    end = events[-1]
    assert type(end) is RunEnd
    assert end.terminal.kind == "terminal"
    assert end.terminal.parent == run_id
    assert out.terminal == end.terminal
    # Uniqueness: one identity per value.
    seen: dict[str, MuleIdentity] = {}
    for ident in identities(events):
        assert seen.setdefault(ident.value, ident) == ident
    kinds = {i.kind for i in seen.values()}
    assert kinds == {"run", "turn", "message", "tool_call", "terminal", "tool_result"}
    assert (
        len(seen) == 1 + 2 + 1 + 2 + 2 + 2 + 1
    )  # run, turns, user, assistants, calls, results, terminal


async def test_length_stop_with_calls_runs_none_of_them(root: Root) -> None:
    """1.6.0: a "length" stop's calls never run; each gets an error result, then a new turn."""
    journal = Journal()
    model = model_of(
        Reply(blocks=(Call("c1", "A"), Call("c2", "B")), stop_reason="length"), reply("ok")
    )
    ran = await run_root(root, make_input(model, tools=(tool("A", journal), tool("B", journal))))
    assert after(ran.proj, "ME(length)")[:10] == [
        "XS(c1)",
        "XE(c1!)",
        "MS(r:c1!)",
        "ME(r:c1!)",
        "XS(c2)",
        "XE(c2!)",
        "MS(r:c2!)",
        "ME(r:c2!)",
        "TE(c1,c2)",
        "TS",
    ]
    assert journal.of("prepare") == journal.of("done") == []
    ends = of_type(ran.events, ToolExecutionEnd)
    assert [text_of(e.result) for e in ends] == [truncated_call_text(n) for n in "AB"]
    assert ran.ok.message.stop_reason == "stop"


async def test_pi_values_pass_through(root: Root) -> None:
    """message_update carries the Pi event unchanged; message_end the terminal's message."""
    model = model_of(reply("hi"))
    ran = await run_root(root, make_input(model))
    updates = of_type(ran.events, MessageUpdate)
    assert [u.event.type for u in updates] == ["text_start", "text_delta", "text_end"]
    end = of_type(ran.events, MessageEnd)[0]
    assert end.value == ran.ok.message
    assert end.value is ran.ok.messages[0]


async def test_run_without_listener() -> None:
    """The effects root runs without a listener."""
    from mule.effects import run

    res = await run(to_core(make_input(model_of(reply("hi")))))
    assert text_of(res.unwrap().message) == "hi"


async def test_duration_ms_is_set_for_calls_that_ran_only(root: Root) -> None:
    """1.6.0's durationMs: on an executed call's end and result message; none when it never ran."""
    model = model_of(
        tool_turn(Call("c1", "A"), Call("c2", "R"), Call("c3", "U")),
        reply("ok"),
    )
    tools = (tool("A", delay_ms=1), tool("R", reject="no"))
    ran = await run_root(root, make_input(model, tools=tools))
    ends = {e.call.id: e for e in of_type(ran.events, ToolExecutionEnd)}
    ran_ms = ends["c1"].duration_ms
    assert ran_ms is not None
    assert ran_ms >= 0
    assert ends["c2"].duration_ms is None  # rejected
    assert ends["c3"].duration_ms is None  # unknown tool
    results = {m.tool_call_id: m for m in ran.ok.messages if type(m) is ToolResultMessage}
    assert results["c1"].duration_ms == ran_ms
    assert results["c2"].duration_ms is None
    assert results["c3"].duration_ms is None


async def test_the_final_message_records_the_thinking_level_asked_for(root: Root) -> None:
    """1.6.0's loop sets thinkingLevel on the final message ("off" when none was asked)."""
    asked: tuple[tuple[ThinkingLevel | None, str], ...] = ((None, "off"), ("high", "high"))
    for reasoning, level in asked:
        model = model_of(reply("hi"))
        options = StreamOptions(reasoning=reasoning)
        ran = await run_root(root, make_input(model, stream_options=options))
        assert ran.ok.message.thinking_level == level
        end = of_type(ran.events, MessageEnd)[-1]
        assert end.value == ran.ok.message
