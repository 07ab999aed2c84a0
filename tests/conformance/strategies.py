"""Hypothesis strategies for random conformance scenarios.

Random turn scripts (text/thinking deltas, tool calls, stop reasons, provider errors with and
without `start`, raising or unterminated streams), tool sets (per-tool sequential mode, a
number schema for the gate, unknown names), per-call plans (rejections, raises, error results,
terminate, details, updates), steering / follow-up / stop-hook schedules and, now and then,
the point where the run's signal aborts.

Order is made deterministic without trusting the clock: every timed tool event (each update
and each completion) gets its own slot, and a tool waits for all lower slots' events before
producing its next one (`{wait: k}` steps, see `makeSlots` in harness.mjs). Within a parallel
batch the slots interleave the calls at random; in a sequential batch they follow the calls.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.conformance.runner import Scenario
from tests.conformance.scenarios import NUMBER_N, system

TOOL_NAMES = ("A", "B", "C")

_words = st.text(alphabet="abcdefgh xyz", min_size=0, max_size=6)
_deltas = st.lists(_words, min_size=1, max_size=3)
_user = st.builds(
    lambda t, at: {"role": "user", "content": t, "timestamp": at},
    st.text(alphabet="uvw", min_size=1, max_size=4),
    st.integers(1, 9),
)
_USAGE = {
    "input": 0,
    "output": 0,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 0,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}
_OLD_CALL = {"type": "toolCall", "id": "old_1", "name": "A", "arguments": {"q": 1}}
_ASSISTANT = {
    "role": "assistant",
    "content": [{"type": "text", "text": "earlier"}, _OLD_CALL],
    "api": "scripted-api",
    "provider": "scripted",
    "model": "scripted-1",
    "usage": _USAGE,
    "stopReason": "toolUse",
    "timestamp": 1,
}
_RESULT = {
    "role": "toolResult",
    "toolCallId": "old_1",
    "toolName": "A",
    "content": [{"type": "text", "text": "old result"}],
    "isError": False,
    "timestamp": 1,
}
_BLOCKS_USER = {
    "role": "user",
    "content": [{"type": "text", "text": "look"}, {"type": "text", "text": "twice"}],
    "timestamp": 1,
}
_GO = {"role": "user", "content": "go", "timestamp": 1}
# Starting contexts Pi's continue rules accept (the last message is not an assistant's). Pi
# 1.6.0: one that opens with its own system message keeps it, and gets the run's tools
# declared by a new one when it declares others (or none).
_contexts = st.sampled_from(
    [
        [_GO],
        [_BLOCKS_USER],
        [_GO, _ASSISTANT, _RESULT],
        [_RESULT],
        [system("Base."), _GO],
        [system("Base.", added=["A"]), _GO],
        [system("", added=["B", "Z"]), _GO, _ASSISTANT, _RESULT],
        [system("Base."), _GO, system("Later.", added=["A"])],
    ]
)
# Injected messages are usually user messages; Pi injects whatever the queue returns
# (system messages too: their tool fields are replaced by what the run's tools need).
_injected = st.one_of(
    *[_user] * 8,
    st.just(_RESULT),
    st.just(_BLOCKS_USER),
    st.just(system("Be brief.")),
    st.just(system("", added=["Z"])),
)
_batch = st.lists(_injected, min_size=0, max_size=2)
# A rare raise (Hypothesis favours edge branches of one_of, so pick it by an inner value).
_hook_answer = st.tuples(st.integers(0, 40), _batch).map(
    lambda t: {"raises": "hook broke"} if t[0] == 17 else t[1]
)


def _schedule(answer: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any] | None]:
    return st.one_of(st.none(), st.lists(answer, max_size=4))


@st.composite
def _args(draw: st.DrawFn, numeric: bool) -> dict[str, Any]:
    if numeric:
        return draw(
            st.sampled_from(
                [{"n": 1}, {"n": 2.5}, {"n": "5"}, {}, {"n": "x"}, {"n": None}, {"n": 3, "k": "v"}]
            )
        )
    return draw(
        st.dictionaries(
            st.sampled_from(["q", "k", "path"]),
            st.one_of(st.integers(-5, 99), _words, st.booleans(), st.none()),
            max_size=2,
        )
    )


@st.composite
def _plan(draw: st.DrawFn, updates: int) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            ["ok"] * 12
            + ["reject", "reject", "error", "error", "terminate", "terminate", "terminate"]
            + ["raises", "prepareRaises"]
        )
    )
    plan: dict[str, Any] = {}
    if kind == "reject":
        plan["reject"] = draw(st.sampled_from(["denied", "not allowed here", ""]))
        if draw(st.integers(0, 2)) == 0:
            plan["rejectTerminate"] = draw(st.booleans())
    elif kind == "prepareRaises":
        plan["prepareRaises"] = "prepare broke"
    elif kind == "raises":
        plan["raises"] = "execute broke"
    result: dict[str, Any] = {}
    if draw(st.booleans()):
        result["text"] = draw(_words)
    if kind == "error":
        result["isError"] = True
    if kind == "terminate" or (kind == "error" and draw(st.booleans())):
        result["terminate"] = True
    if draw(st.integers(0, 3)) == 0:
        result["details"] = draw(st.sampled_from([{}, {"a": 1}, {"list": [1, "x", None]}]))
    if result:
        plan["result"] = result
    plan["updates"] = updates
    return plan


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """Draw a random scenario: a few turns of model replies, tools, plans and hook schedules."""
    n_tools = draw(st.integers(1, 3))
    tools: list[dict[str, Any]] = []
    for name in TOOL_NAMES[:n_tools]:
        spec: dict[str, Any] = {"name": name}
        if draw(st.integers(0, 3)) == 0:
            spec["parameters"] = NUMBER_N
        if draw(st.integers(0, 7)) == 0:
            spec["executionMode"] = "sequential"
        tools.append(spec)
    numeric = {t["name"] for t in tools if "parameters" in t}
    sequential_tools = {t["name"] for t in tools if "executionMode" in t}
    names = [t["name"] for t in tools]
    sequential = draw(st.integers(0, 3)) == 0
    slot = 0

    replies: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    next_id = 0
    for _ in range(draw(st.integers(1, 4))):
        blocks: list[dict[str, Any]] = []
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(["text", "text", "thinking"]))
            blocks.append({"type": kind, "deltas": draw(_deltas)})
        timed: list[tuple[str, int]] = []
        for _ in range(draw(st.integers(0, 3))):
            next_id += 1
            cid = f"call_{next_id}"
            name = draw(st.sampled_from([*names, *names, "Unknown"]))
            blocks.append(
                {
                    "type": "toolCall",
                    "id": cid,
                    "name": name,
                    "arguments": draw(_args(name in numeric)),
                    "pieces": draw(st.integers(1, 3)),
                }
            )
            plan = draw(_plan(draw(st.sampled_from([0, 0, 0, 1, 2]))))
            calls[cid] = plan
            timed.extend([(cid, 0)] * (plan["updates"] + 1))
        # One slot per timed event: interleaved across a parallel batch's calls, in call
        # order for a sequential batch (Pi's rule: the setting, or any sequential tool).
        called = {b["name"] for b in blocks if b["type"] == "toolCall"}
        in_order = sequential or bool(called & sequential_tools)
        order = timed if in_order else draw(st.permutations(timed))
        steps: dict[str, list[dict[str, Any]]] = {cid: [] for cid, _ in timed}
        for cid, _ in order:
            slot += 1
            steps[cid].append({"wait": slot})
            if len(steps[cid]) <= calls[cid]["updates"] * 2:
                steps[cid].append({"update": f"{cid}@{slot}"})
        for cid, s in steps.items():
            calls[cid]["steps"] = s
        r: dict[str, Any] = {"blocks": blocks}
        ending = draw(
            st.sampled_from(
                ["default"] * 30
                + ["length"] * 3
                + ["stop", "toolUse", "error", "error0", "aborted", "raise"]
            )
        )
        if ending in ("length", "stop", "toolUse"):
            # Pi runs the calls of any non-error response but a `length` one (1.6.0: none run).
            r["stopReason"] = ending
        elif ending in ("error", "error0", "aborted"):
            r["stopReason"] = "aborted" if ending == "aborted" else "error"
            r["errorMessage"] = "503 Service Unavailable"
            if ending == "error0":
                r = {"blocks": [], "stopReason": "error", "errorMessage": "429", "start": False}
        elif ending == "raise":
            r = {"blocks": [], "raises": "connection reset"}
        replies.append(r)
    # Final answers, so most scenarios complete (running out is the A16 path, also fine).
    replies.extend({"blocks": [{"type": "text", "deltas": ["fin"]}]} for _ in range(2))
    for plan in calls.values():
        del plan["updates"]

    sc: Scenario = {
        "systemPrompt": draw(st.sampled_from(["You are a test.", "You are a test.", ""])),
        "messages": draw(_contexts),
        "tools": tools,
        "replies": replies,
        "calls": calls,
    }
    if sequential:
        sc["toolExecution"] = "sequential"
    for key, answer in (("steering", _hook_answer), ("followUp", _hook_answer)):
        schedule = draw(_schedule(answer))
        if schedule is not None:
            sc[key] = schedule
    stop = draw(_schedule(st.sampled_from([False] * 6 + [True, True, {"raises": "stop broke"}])))
    if stop is not None:
        sc["stop"] = stop
    if draw(st.integers(0, 7)) == 3:
        where = [
            "turn_start",
            "message_update",
            "message_end",
            "tool_execution_start",
            "tool_execution_update",
            "tool_execution_end",
            "turn_end",
        ]
        sc["abortOn"] = {"t": draw(st.sampled_from(where)), "nth": draw(st.integers(1, 3))}
    return sc


__all__ = ["scenarios"]
