"""Hand-written conformance scenarios: digest section 6 and Pi 1.6.0's loop changes.

A scenario is plain JSON (so the Node harness reads the very same value):

- `messages`: the initial context (wire messages, system messages included); `systemPrompt`
  (optional): unless `messages` opens with a system message, both sides open the transcript
  with the initial one (the prompt and the tools), as Pi's Agent does.
- `tools`: `[{name, parameters?, executionMode?}]`; `toolExecution`: "parallel" | "sequential".
- `replies`: one per model call: `{blocks, stopReason?, errorMessage?, start?, raises?,
  noTerminal?, beforeStart?, trailing?}`; a block is `{type: "text"|"thinking", deltas}` or
  `{type: "toolCall", id, name, arguments, pieces?}`.
- `calls`: per tool-call id: `{reject?, rejectTerminate?, prepareRaises?, steps?, raises?,
  result?: {text?, isError?, details?, terminate?}}`; a step is `{sleep: ms}`, `{update: text}`
  or `{wait: slot}` (wait until every lower slot's tool event is out: see harness.mjs).
- `steering`, `followUp`: planned hook answers (lists of messages, or `{raises}`), then `[]`;
  `stop`: planned booleans (or `{raises}`), then false; `keys`: planned getApiKey answers,
  then null; `apiKey`: the options' key. Absent = no hook.
- `listenerRaises`: `{t, nth?}`: the listener throws at the nth Pi event of type `t`;
  `abortOn`: `{t, nth?}`: the run's signal aborts there.

Section-6 items not here, and why, are listed in docs/conformance.md.
"""

from __future__ import annotations

from typing import Any

from tests.conformance.runner import Scenario

NUMBER_N: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "number"}},
    "required": ["n"],
}


def user(text: str, at: int = 1) -> dict[str, Any]:
    """Return a user message (fixed timestamp: both sides see the same value)."""
    return {"role": "user", "content": text, "timestamp": at}


def text(*deltas: str) -> dict[str, Any]:
    """Return a text block streamed as `deltas`."""
    return {"type": "text", "deltas": list(deltas)}


def thinking(*deltas: str) -> dict[str, Any]:
    """Return a thinking block streamed as `deltas`."""
    return {"type": "thinking", "deltas": list(deltas)}


def call(
    cid: str, name: str, args: dict[str, Any] | None = None, pieces: int = 1
) -> dict[str, Any]:
    """Return a tool-call block."""
    return {"type": "toolCall", "id": cid, "name": name, "arguments": args or {}, "pieces": pieces}


def reply(*blocks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """One model response."""
    return {"blocks": list(blocks), **extra}


def tools(*names: str, **params: dict[str, Any]) -> list[dict[str, Any]]:
    """Tool specs; `params` maps a name to its parameters schema."""
    return [{"name": n, **({"parameters": params[n]} if n in params else {})} for n in names]


def after(ms: int, **result: Any) -> dict[str, Any]:
    """Return a call plan that sleeps `ms` and then returns `result`."""
    return {"steps": [{"sleep": ms}], "result": result}


def at_slot(k: int, **result: Any) -> dict[str, Any]:
    """Return a call plan that returns `result` once every lower slot's event is out."""
    return {"steps": [{"wait": k}], "result": result}


def declared(name: str) -> dict[str, Any]:
    """Return a tool's declaration as the scenario tools declare it (see harness.mjs)."""
    return {"name": name, "description": f"the {name} tool", "parameters": {"type": "object"}}


def system(content: str, added: list[str] | None = None) -> dict[str, Any]:
    """Return a system message (Pi 1.6.0), declaring `added` tools if given."""
    m: dict[str, Any] = {"role": "system", "content": content, "timestamp": 1}
    if added:
        m["toolsAdded"] = [declared(n) for n in added]
    return m


def scenario(**fields: Any) -> Scenario:
    """Return a scenario with one user message unless `messages` is given."""
    return {"messages": [user("go")], **fields}


DONE = reply(text("done"))

SCENARIOS: dict[str, Scenario] = {
    "s01_text_stop": scenario(replies=[reply(text("h", "i", "!"))]),
    "s01_thinking_and_two_texts": scenario(
        replies=[reply(thinking("let ", "me see"), text("a"), text("b", "c"))]
    ),
    "s02_no_messages": scenario(messages=[], replies=[DONE]),
    "s02_trailing_assistant": scenario(
        messages=[
            user("go"),
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "old"}],
                "api": "scripted-api",
                "provider": "scripted",
                "model": "scripted-1",
                "usage": {
                    "input": 0,
                    "output": 0,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 0,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
                },
                "stopReason": "stop",
                "timestamp": 1,
            },
        ],
        replies=[DONE],
    ),
    "s03_error_without_start": scenario(
        replies=[reply(stopReason="error", errorMessage="429 Too Many Requests", start=False)]
    ),
    "s04_error_after_start_with_calls": scenario(
        tools=tools("A"),
        replies=[
            reply(text("x"), call("c1", "A"), stopReason="error", errorMessage="boom"),
        ],
    ),
    "s04_aborted_without_cancellation": scenario(
        replies=[reply(text("x"), stopReason="aborted", errorMessage="Request was aborted")]
    ),
    "s05_parallel_completion_order": scenario(
        tools=tools("A", "B"),
        replies=[reply(call("a", "A"), call("b", "B")), DONE],
        calls={"a": after(40), "b": after(10)},
    ),
    "s06_parallel_unknown_first_pass": scenario(
        tools=tools("A"),
        replies=[
            reply(call("c1", "A"), call("c2", "A"), call("c3", "U"), call("c4", "A")),
            DONE,
        ],
        calls={
            "c1": {"steps": [{"wait": 1}, {"update": "p1"}, {"wait": 4}]},
            "c2": at_slot(2),
            "c4": {"steps": [{"wait": 3}, {"update": "p4"}, {"wait": 5}]},
        },
    ),
    "s07_sequential_setting": scenario(
        tools=tools("A", "B"),
        toolExecution="sequential",
        replies=[reply(call("a", "A"), call("b", "B"), call("c", "A")), DONE],
        calls={"a": after(30), "b": after(5)},
    ),
    "s08_one_sequential_tool": scenario(
        tools=[{"name": "A"}, {"name": "S", "executionMode": "sequential"}],
        replies=[reply(call("a", "A"), call("s", "S")), DONE],
        calls={"a": after(30), "s": after(5)},
    ),
    "s08_sequential_tool_not_called": scenario(
        tools=[{"name": "A"}, {"name": "S", "executionMode": "sequential"}],
        replies=[reply(call("a1", "A"), call("a2", "A")), DONE],
        calls={"a1": after(30), "a2": after(5)},
    ),
    "s09_unknown_tool_continues": scenario(
        replies=[reply(call("c1", "Nope")), DONE],
    ),
    "s10_validation_missing_number": scenario(
        tools=tools("V", V=NUMBER_N), replies=[reply(call("c1", "V", {})), DONE]
    ),
    "s10_validation_wrong_type": scenario(
        tools=tools("V", V=NUMBER_N), replies=[reply(call("c1", "V", {"n": "x", "m": [1]})), DONE]
    ),
    "s11_coercible_string_passes": scenario(
        tools=tools("V", V=NUMBER_N), replies=[reply(call("c1", "V", {"n": "5"})), DONE]
    ),
    "s12_coercions": scenario(
        tools=tools(
            "N",
            "I",
            "B",
            "L",
            "Y",
            N={"type": "object", "properties": {"a": {"type": "number"}, "s": {"type": "string"}}},
            I={"type": "object", "properties": {"i": {"type": "integer"}}},
            B={"type": "object", "properties": {"b": {"type": "boolean"}}},
            L={
                "type": "object",
                "properties": {"l": {"type": "array", "items": {"type": "number"}}},
            },
            Y={
                "type": "object",
                "properties": {"y": {"anyOf": [{"type": "number"}, {"type": "boolean"}]}},
            },
        ),
        replies=[
            reply(
                call("n1", "N", {"a": None, "s": None}),
                call("n2", "N", {"a": "0x10"}),
                call("i1", "I", {"i": "1.0"}),
                call("i2", "I", {"i": "3.5"}),
                call("b1", "B", {"b": "yes"}),
                call("b2", "B", {"b": None}),
                call("l1", "L", {"l": ["1", "2"]}),
                call("y1", "Y", {"y": "true"}),
            ),
            DONE,
        ],
        # Parallel completions at the same instant have no defined order: one slot each.
        calls={
            cid: at_slot(k)
            for k, cid in enumerate(["n1", "n2", "i1", "i2", "b1", "b2", "l1", "y1"], 1)
        },
    ),
    "s13_rejection": scenario(
        tools=tools("A"), replies=[reply(call("c1", "A")), DONE], calls={"c1": {"reject": "denied"}}
    ),
    "s13_empty_rejection": scenario(
        tools=tools("A"), replies=[reply(call("c1", "A")), DONE], calls={"c1": {"reject": ""}}
    ),
    "s13_rejection_among_parallel": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A"), call("c3", "A")), DONE],
        calls={"c1": at_slot(2), "c2": {"reject": "no"}, "c3": at_slot(1)},
    ),
    "s14_all_terminate": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        calls={"c1": at_slot(1, terminate=True), "c2": at_slot(2, terminate=True)},
    ),
    "s15_some_terminate": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        calls={"c1": at_slot(1, terminate=True), "c2": at_slot(2)},
    ),
    "s15_rejection_breaks_terminate": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        calls={"c1": after(5, terminate=True), "c2": {"reject": "no"}},
    ),
    "s16_terminate_with_steering": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), DONE],
        calls={"c1": after(5, terminate=True)},
        steering=[[], [user("steer")]],
    ),
    "s16_terminate_with_follow_up": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), DONE],
        calls={"c1": after(5, terminate=True)},
        followUp=[[user("more")]],
    ),
    "s18_initial_steering": scenario(
        replies=[DONE], steering=[[user("s1"), user("s2")]], followUp=[]
    ),
    "s19_steering_after_answer": scenario(
        replies=[reply(text("first")), DONE], steering=[[], [user("u")]]
    ),
    "s19_steering_after_tool_turn": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), reply(text("x")), DONE],
        calls={"c1": after(5)},
        steering=[[], [user("u")], []],
        followUp=[],
    ),
    "s20_follow_ups": scenario(
        replies=[reply(text("first")), DONE],
        followUp=[[user("f1"), user("f2")]],
        steering=[],
    ),
    "s20_follow_up_then_steering": scenario(
        replies=[reply(text("a")), reply(text("b")), reply(text("c")), DONE],
        followUp=[[user("f1")], [user("f2")]],
        steering=[[], [], [user("s")]],
    ),
    "s21_stop_after_tool_turn": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), DONE],
        calls={"c1": after(5)},
        stop=[True],
        steering=[[user("never polled")]],
        followUp=[[user("never polled")]],
    ),
    "s21_stop_second_turn": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), reply(call("c2", "A")), DONE],
        calls={"c1": after(5), "c2": after(5)},
        stop=[False, True],
    ),
    "s22_error_turn_skips_stop_hook": scenario(
        replies=[reply(stopReason="error", errorMessage="503", start=False)], stop=[True]
    ),
    "s31_listener_raises_on_turn_start": scenario(
        replies=[DONE], listenerRaises={"t": "turn_start"}
    ),
    "s31_listener_raises_on_second_turn": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), DONE],
        listenerRaises={"t": "turn_start", "nth": 2},
    ),
    "s31_listener_raises_on_tool_start": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        listenerRaises={"t": "tool_execution_start", "nth": 2},
    ),
    "s31_listener_raises_on_agent_end": scenario(replies=[DONE], listenerRaises={"t": "agent_end"}),
    "s33_api_key_per_call": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), reply(call("c2", "A")), DONE],
        apiKey="from-options",
        keys=["", "resolved", None],
    ),
    "s33_api_key_without_hook": scenario(replies=[DONE], apiKey="from-options"),
    "x_duplicate_tool_names": scenario(tools=tools("A", "A"), replies=[DONE]),
    "s29_cancel_mid_stream": scenario(
        replies=[reply(text("a", "b", "c"))], abortOn={"t": "message_update", "nth": 2}
    ),
    "s29_cancel_at_tool_start": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        calls={"c1": after(20), "c2": after(5)},
        abortOn={"t": "tool_execution_start"},
    ),
    "s29_cancel_at_tool_update": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), DONE],
        calls={"c1": {"steps": [{"update": "u"}, {"sleep": 5}]}},
        abortOn={"t": "tool_execution_update"},
    ),
    "s29_cancel_at_turn_end": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), DONE],
        stop=[False],
        steering=[],
        abortOn={"t": "turn_end"},
    ),
    "s32_stream_function_raises": scenario(replies=[reply(raises="socket closed")]),
    "s32_stream_without_terminal": scenario(replies=[reply(text("x"), noTerminal=True)]),
    "s32_out_of_replies": scenario(
        tools=tools("A"), replies=[reply(call("c1", "A"))], calls={"c1": after(5)}
    ),
    "s34_delta_before_start": scenario(replies=[reply(text("a"), beforeStart=2)]),
    "s34_delta_before_start_no_start": scenario(
        replies=[reply(stopReason="error", errorMessage="e", start=False, beforeStart=1)]
    ),
    "s34_events_after_done": scenario(replies=[reply(text("a"), trailing=3)]),
    "s35_updates": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), DONE],
        calls={"c1": {"steps": [{"update": "u1"}, {"sleep": 5}, {"update": "u2"}]}},
    ),
    "s35_parallel_updates_interleave": scenario(
        tools=tools("A"),
        replies=[reply(call("a", "A"), call("b", "A")), DONE],
        calls={
            "a": {
                "steps": [{"wait": 1}, {"update": "a1"}, {"wait": 3}, {"update": "a2"}, {"wait": 5}]
            },
            "b": {"steps": [{"wait": 2}, {"update": "b1"}, {"wait": 4}]},
        },
    ),
    "s36_execute_raises": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        calls={"c1": {"steps": [{"wait": 2}], "raises": "kaput"}, "c2": at_slot(1)},
    ),
    "s36_prepare_raises": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        calls={"c2": {"prepareRaises": "no door"}},
    ),
    "s36_sequential_execute_raises": scenario(
        tools=tools("A"),
        toolExecution="sequential",
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        calls={"c2": {"raises": "kaput"}},
    ),
    "s37_result_fields": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A"), call("c3", "A")), DONE],
        calls={
            "c1": at_slot(1, text="plain"),
            "c2": at_slot(2, text="bad", isError=True, details={"why": [1, 2]}),
            "c3": at_slot(3, details={"k": "v"}),
        },
    ),
    "x_length_with_calls_runs_none": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A", {"q": "tr"}), stopReason="length"), DONE],
        calls={"c1": after(5)},
    ),
    "x_multi_turn_tool_loop": scenario(
        tools=tools("A", "B"),
        replies=[
            reply(text("t1"), call("c1", "A", {"k": 1}, pieces=3)),
            reply(thinking("hm"), call("c2", "B"), call("c3", "A")),
            reply(text("end")),
        ],
        calls={"c1": after(5), "c2": at_slot(2), "c3": at_slot(1)},
    ),
    "x_steering_hook_raises": scenario(
        replies=[reply(text("a")), DONE], steering=[[], {"raises": "queue broke"}]
    ),
    "x_follow_up_hook_raises": scenario(replies=[DONE], followUp=[{"raises": "queue broke"}]),
    "x_stop_hook_raises": scenario(replies=[DONE], stop=[{"raises": "hook broke"}]),
    # Pi 1.6.0 asks finishTurn on a failed turn too; mule does not ask its stop hook there.
    "v16_stop_hook_raises_on_error_turn": scenario(
        replies=[reply(text("x"), stopReason="error", errorMessage="boom")],
        stop=[{"raises": "hook broke"}],
    ),
    # -- Pi 1.6.0 -------------------------------------------------------------------------------
    # The second steering poll: empty after turn 1, so Pi asks again before turn 2, and the
    # message queued for that poll lands in turn 2 (0.73.1: in turn 3).
    "v16_second_steering_poll": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), reply(call("c2", "A")), DONE],
        calls={"c1": after(1), "c2": after(1)},
        steering=[[], [], [user("u")], [], []],
    ),
    "v16_second_steering_poll_then_follow_up": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A")), reply(text("x")), DONE],
        calls={"c1": after(1)},
        steering=[[], [], []],
        followUp=[[user("f")]],
    ),
    "v16_length_two_calls_parallel": scenario(
        tools=tools("A", "B"),
        replies=[
            reply(text("cut"), call("c1", "A", {"q": 1}), call("c2", "B"), stopReason="length"),
            DONE,
        ],
        calls={"c1": after(1), "c2": after(1)},
        stop=[False, False],
    ),
    # 1.6.0: a block may carry terminate; it counts towards the batch's terminate (A1).
    "v16_rejection_terminates": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        calls={"c1": {"reject": "no", "rejectTerminate": True}, "c2": after(1, terminate=True)},
    ),
    "v16_rejection_terminate_false": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        calls={"c1": {"reject": "no", "rejectTerminate": False}, "c2": after(1, terminate=True)},
    ),
    "v16_length_unknown_tool": scenario(
        tools=tools("A"),
        replies=[reply(call("c1", "U"), stopReason="length"), DONE],
    ),
    "v16_abort_mid_sequential_batch": scenario(
        tools=tools("A"),
        toolExecution="sequential",
        replies=[reply(call("c1", "A"), call("c2", "A")), DONE],
        calls={"c1": {"steps": [{"update": "u"}, {"sleep": 2}]}, "c2": after(1)},
        abortOn={"t": "tool_execution_update"},
    ),
    # Transcripts that open with their own system message: Pi declares the run's tools in a
    # new system message (message_start/end, among the new messages) before the first call.
    "v16_system_message_without_tools": scenario(
        messages=[system("Base."), user("go")],
        tools=tools("A"),
        replies=[reply(call("c1", "A")), DONE],
        calls={"c1": after(1)},
    ),
    "v16_system_message_declares_other_tools": scenario(
        messages=[system("Base.", added=["B", "A"]), user("go")],
        tools=tools("A", "C"),
        replies=[DONE],
    ),
    "v16_system_message_same_tools": scenario(
        messages=[system("Base.", added=["A"]), user("go")],
        tools=tools("A"),
        replies=[DONE],
    ),
    "v16_system_sections_and_later_text": scenario(
        messages=[
            {**system(""), "sections": {"a": "<a>one</a>", "b": "<b>two</b>"}},
            user("go"),
            {**system("Later."), "sections": {"a": None}},
        ],
        replies=[DONE],
    ),
    "v16_no_prompt_no_tools": scenario(systemPrompt="", replies=[DONE]),
    "v16_no_prompt_with_tools": scenario(
        systemPrompt="", tools=tools("A"), replies=[reply(call("c1", "A")), DONE]
    ),
    # A queued system message's own tool fields are intent: Pi replaces them with the
    # difference to the run's tools (here none, so they go).
    "v16_steering_system_message": scenario(
        tools=tools("A"),
        replies=[reply(text("a")), DONE],
        steering=[[], [system("Be brief.", added=["X"]), user("u")], []],
    ),
    "v16_follow_up_system_message_only": scenario(
        tools=tools("A"),
        replies=[reply(text("a")), DONE],
        followUp=[[system("Now also this.")]],
    ),
    "x_context_ends_with_tool_result": scenario(
        messages=[
            user("go"),
            {
                "role": "toolResult",
                "toolCallId": "old",
                "toolName": "A",
                "content": [{"type": "text", "text": "r"}],
                "isError": False,
                "timestamp": 1,
            },
        ],
        replies=[DONE],
    ),
}

__all__ = [
    "NUMBER_N",
    "SCENARIOS",
    "call",
    "declared",
    "reply",
    "scenario",
    "system",
    "text",
    "thinking",
    "user",
]
