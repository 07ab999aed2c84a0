"""Section 6 scenario 38 and section 5.5: resuming a recovered assistant turn, and its checks.

The expected text of an interrupted call is the private rule
`mule.effects._batch.truncated_call_text`.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve

from mule.effects import (
    INTERRUPTED_UNSAFE,
    MessageStart,
    MuleResume,
    MuleToolCheckpoint,
    MuleToolResult,
    ToolCompleted,
    ToolExecutionStart,
    ToolPending,
    ToolStarted,
    TurnEnd,
    TurnStart,
)
from mule.effects._batch import truncated_call_text
from mule.pi import TextContent, ToolCall, ToolResultMessage, without_system_messages
from mule.pi.scripted import reply
from tests.effects.kit import (
    Journal,
    Queue,
    Root,
    assistant,
    make_input,
    model_of,
    of_type,
    run_root,
    text_of,
    tool,
    user,
)

pytestmark = pytest.mark.anyio

CALLS = tuple(ToolCall(f"c{i}", "S" if i == 4 else "T", {"i": i}) for i in range(1, 6))
RESUMED = assistant(TextContent("working"), *CALLS)
FIRST = user("go", at=0)


def done(i: int, text: str | None = None, terminate: bool | None = None) -> MuleToolResult:
    """Return the recorded result of call `c<i>`."""
    return MuleToolResult(content=(TextContent(text or f"done c{i}"),), terminate=terminate)


def committed(i: int, text: str | None = None) -> ToolResultMessage:
    """Return the committed result message of call `c<i>`."""
    return ToolResultMessage(
        tool_call_id=f"c{i}",
        tool_name="T",
        content=(TextContent(text or f"done c{i}"),),
        is_error=False,
        timestamp=5,
    )


def mixed() -> tuple[MuleToolCheckpoint, ...]:
    """Return scenario 38's checkpoints: c1 committed, c2 completed, c3/c4 started, c5 pending."""
    return (
        ToolCompleted(CALLS[0], done(1), committed(1)),
        ToolCompleted(CALLS[1], done(2)),
        ToolStarted(CALLS[2], "unsafe"),
        ToolStarted(CALLS[3], "safe"),
    )


def resume_input(journal: Journal, checkpoints: tuple[MuleToolCheckpoint, ...], **kw: Any) -> Any:
    """Return a resume run input with tools T and S (slow), both replay-safe."""
    tools = (
        tool("T", journal, replay="safe"),
        tool("S", journal, replay="safe", delay_ms=40),
    )
    model = kw.pop("model", None) or model_of(reply("all done"))
    return make_input(
        model,
        messages=(FIRST,),
        tools=tools,
        resume=MuleResume(RESUMED, checkpoints),
        **kw,
    )


async def test_s38_resume_mixed_checkpoints(root: Root) -> None:
    """38: only c4 (safe) and c5 (pending) run; results go out for c2-c5; TE has all five."""
    journal = Journal()
    steering = Queue()
    model = model_of(reply("all done"))
    cps = mixed()
    inp = resume_input(journal, cps, model=model, get_steering_messages=steering)
    ran = await run_root(root, inp)
    assert ran.proj == [
        "RS",
        "TS",
        "XS(c4)",
        "XS(c5)",
        "XE(c5)",
        "XE(c4)",
        "MS(r:c2)",
        "ME(r:c2)",
        "MS(r:c3!)",
        "ME(r:c3!)",
        "MS(r:c4)",
        "ME(r:c4)",
        "MS(r:c5)",
        "ME(r:c5)",
        "TE(c1,c2,c3,c4,c5)",
        "TS",
        "MP(1)",
        "MS",
        "MU",
        "MU",
        "MU",
        "ME(stop)",
        "TE()",
        "RE(completed)",
    ]
    assert journal.of("prepare") == ["c4", "c5"]
    starts = of_type(ran.events, ToolExecutionStart)
    assert [s.replay for s in starts] == ["safe", "safe"]
    te = of_type(ran.events, TurnEnd)[0]
    assert te.message == RESUMED
    r1, r2, r3, r4, r5 = te.tool_results
    first = cps[0]
    assert type(first) is ToolCompleted
    assert r1 is first.message  # reused verbatim
    assert (r2.tool_call_id, r2.tool_name, text_of(r2), r2.is_error) == (
        "c2",
        "T",
        "done c2",
        False,
    )
    assert r3.is_error
    assert text_of(r3) == INTERRUPTED_UNSAFE
    assert r3.details == {}
    assert (text_of(r4), text_of(r5)) == ("S:c4", "T:c5")
    out = ran.ok
    assert out.messages[:4] == (r2, r3, r4, r5)
    assert len(out.messages) == 5
    assert text_of(out.message) == "all done"
    # The next prompt holds the input, the resumed message and all five results.
    assert without_system_messages(model.calls[0][1].messages) == (
        FIRST,
        RESUMED,
        r1,
        r2,
        r3,
        r4,
        r5,
    )
    # A17: no initial steering poll; the first poll follows the resumed turn_end.
    assert steering.calls == 3  # after each turn, and once more before the second (Pi 1.6.0)


async def test_s38_resume_identities(root: Root) -> None:
    """The resumed message gets a message identity (no events); its calls hang off it."""
    journal = Journal()
    ran = await run_root(root, resume_input(journal, mixed()))
    turn1 = of_type(ran.events, TurnStart)[0].turn
    starts = of_type(ran.events, ToolExecutionStart)
    parent = starts[0].tool_call.parent
    assert parent is not None
    assert parent.kind == "message"
    assert parent.parent == turn1
    assert all(s.tool_call.parent is parent for s in starts)
    # No message events for the resumed message itself.
    assert all(
        type(e.value).__name__ != "AssistantMessage" for e in of_type(ran.events, MessageStart)[:4]
    )
    values = [e.message.value for e in of_type(ran.events, MessageStart)]
    assert parent.value not in values
    results = [e.message for e in of_type(ran.events, MessageStart)][:4]
    assert [r.parent.kind for r in results if r.parent is not None] == ["tool_call"] * 4


async def test_s38_unsafe_is_stable_across_resumes(root: Root) -> None:
    """A second resume of the same unsafe call synthesises the same error result again."""
    texts = []
    for _ in range(2):
        ran = await run_root(root, resume_input(Journal(), mixed()))
        texts.append(text_of(of_type(ran.events, TurnEnd)[0].tool_results[2]))
    assert texts == [INTERRUPTED_UNSAFE, INTERRUPTED_UNSAFE]


async def test_s38_explicit_pending_checkpoint(root: Root) -> None:
    """An explicit `pending` checkpoint is the same as none."""
    journal = Journal()
    checkpoints = (*mixed(), ToolPending(CALLS[4]))
    ran = await run_root(root, resume_input(journal, checkpoints))
    assert journal.of("prepare") == ["c4", "c5"]
    assert "TE(c1,c2,c3,c4,c5)" in ran.proj


async def test_s38_resume_sequential(root: Root) -> None:
    """Sequential resume: each result in source order, replayed calls in place."""
    journal = Journal()
    ran = await run_root(root, resume_input(journal, mixed(), tool_execution="sequential"))
    assert ran.proj[:15] == [
        "RS",
        "TS",
        "MS(r:c2)",
        "ME(r:c2)",
        "MS(r:c3!)",
        "ME(r:c3!)",
        "XS(c4)",
        "XE(c4)",
        "MS(r:c4)",
        "ME(r:c4)",
        "XS(c5)",
        "XE(c5)",
        "MS(r:c5)",
        "ME(r:c5)",
        "TE(c1,c2,c3,c4,c5)",
    ]


async def test_resume_all_committed_emits_no_tool_events(root: Root) -> None:
    """Every call committed: no tool or message events, straight to turn_end and the next call."""
    journal = Journal()
    checkpoints = tuple(
        ToolCompleted(c, done(i + 1), committed(i + 1)) for i, c in enumerate(CALLS)
    )
    ran = await run_root(root, resume_input(journal, checkpoints))
    assert ran.proj[:4] == ["RS", "TS", "TE(c1,c2,c3,c4,c5)", "TS"]
    assert journal.entries == []
    assert [type(m).__name__ for m in ran.ok.messages] == ["AssistantMessage"]


async def test_resume_terminate_counts_every_result(root: Root) -> None:
    """Terminate counts all of the resumed turn's results, recorded ones included."""
    journal = Journal()
    call = ToolCall("c1", "T", {})
    pending = ToolCall("c2", "T", {})
    msg = assistant(call, pending)
    model = model_of(reply("never"))
    inp = make_input(
        model,
        messages=(FIRST,),
        tools=(tool("T", journal, terminate=True),),
        resume=MuleResume(msg, (ToolCompleted(call, done(1, terminate=True)),)),
    )
    ran = await run_root(root, inp)
    assert ran.proj == [
        "RS",
        "TS",
        "XS(c2)",
        "XE(c2)",
        "MS(r:c1)",
        "ME(r:c1)",
        "MS(r:c2)",
        "ME(r:c2)",
        "TE(c1,c2)",
        "RE(completed)",
    ]
    assert model.calls == []
    assert ran.ok.message == msg


async def test_resume_without_calls_may_end_without_a_model_call(root: Root) -> None:
    """A resumed message with no tool calls: TE([]) and the run ends; outcome.message is it."""
    final = assistant(TextContent("finished"))
    model = model_of(reply("never"))
    ran = await run_root(root, make_input(model, resume=MuleResume(final)))
    assert ran.proj == ["RS", "TS", "TE()", "RE(completed)"]
    out = ran.ok
    assert out.message == final
    assert out.messages == ()
    assert model.calls == []


async def test_resume_without_calls_then_follow_up(root: Root) -> None:
    """A follow-up after a resumed final answer opens a new turn with a model call."""
    final = assistant(TextContent("finished"))
    follow = Queue([(user("and?"),)])
    model = model_of(reply("more"))
    inp = make_input(
        model, messages=(FIRST,), resume=MuleResume(final), get_follow_up_messages=follow
    )
    ran = await run_root(root, inp)
    assert ran.proj[:8] == ["RS", "TS", "TE()", "TS", "MS(u:and?)", "ME(u:and?)", "MP(1)", "MS"]
    assert without_system_messages(model.calls[0][1].messages)[:2] == (FIRST, final)


# -- control errors (section 5.5) ------------------------------------------------------------------


def _bad_inputs() -> dict[str, dict[str, Any]]:
    call = CALLS[0]
    one = assistant(call)
    errored = assistant(TextContent("x"), stop="error")
    other = ToolCall("zz", "T", {})
    return {
        "messages-end-with-assistant": {
            "messages": (FIRST, assistant(TextContent("earlier"))),
            "resume": MuleResume(one),
        },
        "result-already-present": {
            "messages": (FIRST, committed(1)),
            "resume": MuleResume(one),
        },
        "error-stop-reason": {"resume": MuleResume(errored)},
        "not-an-assistant": {"resume": MuleResume(FIRST)},  # type: ignore[arg-type]
        "unknown-checkpoint": {"resume": MuleResume(one, (ToolStarted(other, "safe"),))},
        "two-checkpoints": {
            "resume": MuleResume(one, (ToolPending(call), ToolStarted(call, "safe"))),
        },
        "message-for-another-call": {
            "resume": MuleResume(one, (ToolCompleted(call, done(1), committed(2)),)),
        },
        "duplicate-call-ids": {"resume": MuleResume(assistant(call, call))},
    }


@pytest.mark.parametrize("case", list(_bad_inputs()))
async def test_resume_control_errors(root: Root, case: str) -> None:
    """An inconsistent resume is a control error before run_start: no events, no calls."""
    kwargs = {"messages": (FIRST,), **_bad_inputs()[case]}
    journal = Journal()
    model = model_of(reply("never"))
    ran = await run_root(root, make_input(model, tools=(tool("T", journal),), **kwargs))
    assert ran.failed.phase == "control"
    assert ran.events == []
    assert model.calls == []
    assert journal.entries == []


async def test_resume_with_no_prior_messages_is_allowed(root: Root) -> None:
    """With a resume, an empty message prefix is fine (the resumed message is the context)."""
    final = assistant(TextContent("finished"))
    ran = await run_root(root, make_input(model_of(), messages=(), resume=MuleResume(final)))
    assert ran.ok.status == "completed"


async def test_resume_of_a_length_stopped_turn_runs_none_of_its_calls(root: Root) -> None:
    """1.6.0: a recovered `length` turn's calls never run; committed results stand."""
    journal = Journal()
    cut = evolve(RESUMED, stop_reason="length")
    inp = resume_input(journal, (ToolCompleted(CALLS[0], done(1), committed(1)),))
    inp = evolve(inp, resume=MuleResume(cut, inp.resume.tools))
    ran = await run_root(root, inp)
    assert journal.of("prepare") == journal.of("execute") == []
    te = of_type(ran.events, TurnEnd)[0]
    assert te.tool_results[0] == committed(1)  # reused
    rest = te.tool_results[1:]
    assert [r.tool_call_id for r in rest] == ["c2", "c3", "c4", "c5"]
    assert all(r.is_error for r in rest)
    assert [text_of(r) for r in rest] == [truncated_call_text(c.name) for c in CALLS[1:]]
    assert ran.ok.message.content == (TextContent("all done"),)
