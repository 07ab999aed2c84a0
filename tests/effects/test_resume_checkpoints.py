"""Resume through the real core (section 5.5): each checkpoint state, on both roots and loops."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Literal, TypeAlias

import anyio
import pytest
from attrs import define, field
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

import mule.promise as promise
from mule.effects import (
    INTERRUPTED_UNSAFE,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelPrompt,
    MuleCallPreparation,
    MuleError,
    MuleEvent,
    MulePortsInput,
    MuleResume,
    MuleRunOutcome,
    MuleToolCheckpoint,
    MuleToolDeclaration,
    MuleToolExecutionPart,
    MuleToolPrepared,
    MuleToolResult,
    Ports,
    PreparePort,
    Replay,
    RunEnd,
    RunStart,
    ToolCompleted,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolPending,
    ToolStarted,
    TurnEnd,
    TurnStart,
)
from mule.effects import run as effects_run
from mule.pi import (
    ZERO_USAGE,
    AbortSignal,
    AssistantMessage,
    Message,
    Model,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    without_system_messages,
)
from mule.pi.scripted import ScriptedModel, reply

Root: TypeAlias = Literal["effects", "promise"]
ROOTS: tuple[Root, ...] = ("effects", "promise")
MODEL = Model(
    id="scripted-1", name="Scripted", api="scripted-api", provider="scripted", base_url=""
)
SYSTEM = "You resume."
USER = UserMessage("go", 1)
REPLAYS: tuple[Replay, ...] = ("safe", "unsafe")  # one tool of each, named after its replay


def assistant(*blocks: TextContent | ToolCall, stop: str | None = None) -> AssistantMessage:
    """Return a committed assistant message (toolUse when it holds calls)."""
    reason = stop or ("toolUse" if any(type(b) is ToolCall for b in blocks) else "stop")
    return AssistantMessage(
        content=tuple(blocks),
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        usage=ZERO_USAGE,
        stop_reason=reason,  # type: ignore[arg-type]
        timestamp=2,
    )


def call(cid: str, name: str = "safe") -> ToolCall:
    """Return a tool call with no arguments."""
    return ToolCall(cid, name, {})


def result(text: str, **kwargs: object) -> MuleToolResult:
    """Return a text tool result."""
    return MuleToolResult(content=(TextContent(text),), **kwargs)  # type: ignore[arg-type]


def committed(c: ToolCall, r: MuleToolResult) -> ToolResultMessage:
    """Return the result message an owner committed earlier for `c`."""
    return ToolResultMessage(
        tool_call_id=c.id,
        tool_name=c.name,
        content=r.content,
        is_error=r.is_error,
        timestamp=3,
        details=r.details,
    )


def text_of(m: Message | MuleToolResult) -> str:
    """Return the concatenated text of a message or result."""
    content = m.content
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if type(b) is TextContent)


@define
class Log:
    """What the test tools did: ("prepare"|"execute", call id)."""

    entries: list[tuple[str, str]] = field(factory=list)

    def of(self, what: str) -> list[str]:
        """Return the call ids of one kind of entry, in order."""
        return [who for w, who in self.entries if w == what]


def core_tool(name: str, replay: Replay) -> MuleToolDeclaration:
    """Return the core's declaration of a tool (its door is `core_prepare`)."""
    return MuleToolDeclaration(descriptor=Tool(name, name, {"type": "object"}), replay=replay)


def core_prepare(log: Log, terminate: bool | None = None) -> PreparePort:
    """Return the Result-form prepare port: every tool answers `<name>:<call id>`."""

    async def prepare(c: ToolCall, signal: AbortSignal) -> Result[MuleCallPreparation, MuleError]:
        log.entries.append(("prepare", c.id))
        name = c.name

        async def execute(
            s: AbortSignal,
        ) -> AsyncIterator[Result[MuleToolExecutionPart, MuleError]]:
            log.entries.append(("execute", c.id))
            yield Success(
                MuleToolExecutionPart("result", result(f"{name}:{c.id}", terminate=terminate))
            )

        return Success(MuleToolPrepared(execute))

    return prepare


def promise_tool(
    name: str, log: Log, replay: Replay, terminate: bool | None = None
) -> promise.MuleTool:
    """Return the same tool in the promise facade's form."""

    async def prepare(c: ToolCall, signal: AbortSignal) -> promise.MuleToolPreparation:
        log.entries.append(("prepare", c.id))

        async def execute(s: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            log.entries.append(("execute", c.id))
            yield MuleToolExecutionPart("result", result(f"{name}:{c.id}", terminate=terminate))

        return promise.MuleToolPrepared(execute)

    return promise.MuleTool(
        descriptor=Tool(name, name, {"type": "object"}), prepare=prepare, replay=replay
    )


@define
class Ran:
    """Events and result of one run, the same shape for both roots."""

    events: list[MuleEvent]
    outcome: MuleRunOutcome | None
    error: MuleError | None
    model: ScriptedModel
    log: Log
    polls: list[str] = field(factory=list)  # the event type just before each steering poll

    @property
    def ok(self) -> MuleRunOutcome:
        """The outcome of a run that must have completed."""
        assert self.error is None, self.error
        assert self.outcome is not None
        return self.outcome

    @property
    def proj(self) -> list[str]:
        """A compact projection of the events."""
        return project(self.events)


async def go(
    root: Root,
    *,
    resume: MuleResume | None,
    messages: Sequence[Message] = (USER,),
    replies: Sequence[str] = ("done",),
    sequential: bool = False,
    terminate: bool | None = None,
    steering: list[tuple[Message, ...]] | None = None,
) -> Ran:
    """Run with a `safe` and an `unsafe` tool; return what happened."""
    log = Log()
    model = ScriptedModel([reply(r) for r in replies])
    events: list[MuleEvent] = []
    polls: list[str] = []
    batches = list(steering or [])
    common: dict[str, object] = {
        "model": MODEL,
        "system_prompt": SYSTEM,
        "messages": tuple(messages),
        "stream": model,
        "resume": resume,
        "tool_execution": "sequential" if sequential else "parallel",
    }
    if root == "effects":

        async def listen(e: MuleEvent, s: AbortSignal) -> Result[None, MuleError]:
            events.append(e)
            return Success(None)

        async def steer(s: AbortSignal) -> Result[tuple[Message, ...], MuleError]:
            polls.append(events[-1].type)
            return Success(batches.pop(0) if batches else ())

        tools = tuple(core_tool(n, n) for n in REPLAYS)
        inp = MulePortsInput(
            **common,  # type: ignore[arg-type]
            tools=tools,
            ports=Ports(
                emit=listen,
                steering=steer if steering is not None else None,
                prepare_tool=core_prepare(log, terminate),
            ),
        )
        res = await effects_run(inp)
        if isinstance(res, Failure):
            return Ran(events, None, res.failure(), model, log, polls)
        return Ran(events, res.unwrap(), None, model, log, polls)

    async def psteer(s: AbortSignal) -> Sequence[Message]:
        polls.append(events[-1].type)
        return batches.pop(0) if batches else ()

    ptools = [promise_tool(n, log, n, terminate) for n in REPLAYS]
    pinp = promise.MuleRunInput(
        **common,  # type: ignore[arg-type]
        tools=ptools,
        get_steering_messages=psteer if steering is not None else None,
    )
    try:
        outcome = await promise.run(pinp, lambda e, s: events.append(e))
    except promise.MuleRunFailed as exc:
        return Ran(events, None, exc.error, model, log, polls)
    return Ran(events, outcome, None, model, log, polls)


def project(events: Sequence[MuleEvent]) -> list[str]:
    """RS TS MP MS MU ME(r:id!) XS(id:replay) XE(id!) TE(ids) RE(status); assistant ME = stop."""
    out: list[str] = []
    for e in events:
        if type(e) is RunStart:
            out.append("RS")
        elif type(e) is TurnStart:
            out.append("TS")
        elif type(e) is ModelPrompt:
            out.append(f"MP({e.attempt})")
        elif type(e) is MessageStart or type(e) is MessageEnd:
            v = e.value
            tag = "MS" if type(e) is MessageStart else "ME"
            if type(v) is ToolResultMessage:
                out.append(f"{tag}(r:{v.tool_call_id}{'!' if v.is_error else ''})")
            elif type(v) is UserMessage:
                out.append(f"{tag}(u)")
            else:
                out.append(tag)
        elif type(e) is MessageUpdate:
            continue  # the stream's own shape is not what resume is about
        elif type(e) is ToolExecutionStart:
            out.append(f"XS({e.call.id}:{e.replay})")
        elif type(e) is ToolExecutionUpdate:
            out.append(f"XU({e.call.id})")
        elif type(e) is ToolExecutionEnd:
            out.append(f"XE({e.call.id}{'!' if e.result.is_error else ''})")
        elif type(e) is TurnEnd:
            out.append("TE(" + ",".join(r.tool_call_id for r in e.tool_results) + ")")
        elif type(e) is RunEnd:
            out.append(f"RE({e.outcome})")
    return out


NEXT_TURN = ["TS", "MP(1)", "MS", "ME", "TE()", "RE(completed)"]


def turn_end(ran: Ran, index: int = 0) -> TurnEnd:
    """Return the index-th turn_end of a run."""
    return [e for e in ran.events if type(e) is TurnEnd][index]


pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("root", ROOTS)
async def test_completed_with_message_is_reused_verbatim_without_events(root: Root) -> None:
    """Completed + message: result and message reused as they are; no tool or message events."""
    c = call("a")
    r = result("kept", details={"k": 1})
    msg = committed(c, r)
    resumed = assistant(TextContent("calling"), c)
    ran = await go(root, resume=MuleResume(resumed, (ToolCompleted(c, r, msg),)))
    assert ran.proj == ["RS", "TS", "TE(a)", *NEXT_TURN]
    assert ran.log.entries == []
    assert turn_end(ran).tool_results[0] is msg
    assert turn_end(ran).message is resumed
    # The next model call sees the transcript with the reused result, unchanged.
    assert without_system_messages(ran.model.calls[0][1].messages) == (USER, resumed, msg)
    # outcome.messages: only what this run made (the final answer).
    final = ran.ok.messages
    assert [type(m) for m in final] == [AssistantMessage]
    assert text_of(final[0]) == "done"


@pytest.mark.parametrize("root", ROOTS)
async def test_completed_without_message_emits_only_result_message_events(root: Root) -> None:
    """completed, no message: no tool events; the message is built from the result."""
    c = call("a", "unsafe")
    r = MuleToolResult(
        content=(TextContent("was done"),),
        is_error=True,
        details={"x": [1]},
        usage=Usage(input=3, total_tokens=3),
    )
    before = int(time.time() * 1000)
    ran = await go(root, resume=MuleResume(assistant(c), (ToolCompleted(c, r),)))
    assert ran.proj == ["RS", "TS", "MS(r:a!)", "ME(r:a!)", "TE(a)", *NEXT_TURN]
    assert ran.log.entries == []
    built = turn_end(ran).tool_results[0]
    assert built.tool_call_id == "a"
    assert built.tool_name == "unsafe"
    assert built.content == r.content
    assert built.is_error is True
    assert built.details == {"x": [1]}
    assert built.usage == r.usage
    assert built.timestamp >= before  # "now", as Pi stamps results, even with no tool run
    assert ran.ok.messages[0] == built


@pytest.mark.parametrize("root", ROOTS)
async def test_started_safe_call_is_rerun_fully(root: Root) -> None:
    """Started + safe: start (replay safe), prepare, execute, end, message."""
    c = call("a", "safe")
    ran = await go(root, resume=MuleResume(assistant(c), (ToolStarted(c, "safe"),)))
    assert ran.proj == [
        "RS",
        "TS",
        "XS(a:safe)",
        "XE(a)",
        "MS(r:a)",
        "ME(r:a)",
        "TE(a)",
        *NEXT_TURN,
    ]
    assert ran.log.entries == [("prepare", "a"), ("execute", "a")]
    assert text_of(turn_end(ran).tool_results[0]) == "safe:a"


@pytest.mark.parametrize("root", ROOTS)
async def test_started_unsafe_call_is_never_rerun(root: Root) -> None:
    """Started + unsafe: a synthetic error result with only its message events, every resume."""
    c = call("a", "unsafe")
    resume = MuleResume(assistant(c), (ToolStarted(c, "unsafe"),))
    for _ in range(2):  # a second resume of the same checkpoint answers the same way
        ran = await go(root, resume=resume)
        assert ran.proj == ["RS", "TS", "MS(r:a!)", "ME(r:a!)", "TE(a)", *NEXT_TURN]
        assert ran.log.entries == []
        msg = turn_end(ran).tool_results[0]
        assert msg.is_error is True
        assert text_of(msg) == INTERRUPTED_UNSAFE
        assert msg.details == {}
        assert msg.tool_name == "unsafe"


@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("explicit", [True, False])
async def test_pending_call_runs_normally(root: Root, explicit: bool) -> None:
    """Pending (explicit or no checkpoint): the call runs like any other."""
    c = call("a", "unsafe")
    tools: tuple[MuleToolCheckpoint, ...] = (ToolPending(c),) if explicit else ()
    ran = await go(root, resume=MuleResume(assistant(c), tools))
    assert ran.proj[:7] == ["RS", "TS", "XS(a:unsafe)", "XE(a)", "MS(r:a)", "ME(r:a)", "TE(a)"]
    assert ran.log.entries == [("prepare", "a"), ("execute", "a")]


def mixed() -> tuple[MuleResume, ToolResultMessage]:
    """Five calls, one per state, in source order a..e."""
    a, b, c, d, e = (
        call("a", "safe"),
        call("b", "unsafe"),
        call("c", "safe"),
        call("d", "unsafe"),
        call("e", "unsafe"),
    )
    msg = committed(a, result("A"))
    checkpoints: tuple[MuleToolCheckpoint, ...] = (
        ToolPending(e),
        ToolStarted(d, "unsafe"),
        ToolStarted(c, "safe"),
        ToolCompleted(b, result("B")),
        ToolCompleted(a, result("A"), msg),
    )
    return MuleResume(assistant(a, b, c, d, e), checkpoints), msg


@pytest.mark.parametrize("root", ROOTS)
async def test_mixed_parallel_batch_results_in_source_order(root: Root) -> None:
    """Parallel: the calls that run form the batch; result messages and turn_end in source order."""
    resume, msg = mixed()
    ran = await go(root, resume=resume)
    proj = ran.proj
    assert sorted(proj[4:6]) == ["XE(c)", "XE(e)"]  # ends come in completion order
    assert proj[:4] + proj[6:] == [
        "RS",
        "TS",
        "XS(c:safe)",
        "XS(e:unsafe)",
        "MS(r:b)",
        "ME(r:b)",
        "MS(r:c)",
        "ME(r:c)",
        "MS(r:d!)",
        "ME(r:d!)",
        "MS(r:e)",
        "ME(r:e)",
        "TE(a,b,c,d,e)",
        *NEXT_TURN,
    ]
    assert ran.log.of("prepare") == ["c", "e"]  # prepare runs in source order
    assert sorted(ran.log.of("execute")) == ["c", "e"]
    results = turn_end(ran).tool_results
    assert results[0] is msg
    assert [text_of(m) for m in results] == ["A", "B", "safe:c", INTERRUPTED_UNSAFE, "unsafe:e"]
    # New messages: the results built in this run and the final answer, nothing reused.
    new = ran.ok.messages
    assert [m.tool_call_id for m in new if type(m) is ToolResultMessage] == ["b", "c", "d", "e"]
    assert resume.message not in new
    assert USER not in new


@pytest.mark.parametrize("root", ROOTS)
async def test_mixed_sequential_batch_keeps_source_order(root: Root) -> None:
    """Sequential: each position is settled in source order, running calls one by one."""
    resume, _ = mixed()
    ran = await go(root, resume=resume, sequential=True)
    assert ran.proj == [
        "RS",
        "TS",
        "MS(r:b)",
        "ME(r:b)",
        "XS(c:safe)",
        "XE(c)",
        "MS(r:c)",
        "ME(r:c)",
        "MS(r:d!)",
        "ME(r:d!)",
        "XS(e:unsafe)",
        "XE(e)",
        "MS(r:e)",
        "ME(r:e)",
        "TE(a,b,c,d,e)",
        *NEXT_TURN,
    ]


@pytest.mark.parametrize("root", ROOTS)
async def test_no_tool_calls_ends_without_a_model_call(root: Root) -> None:
    """A resumed text-only turn: turn_end([]) and the run completes with no model call."""
    resumed = assistant(TextContent("all done"))
    ran = await go(root, resume=MuleResume(resumed), replies=())
    assert ran.proj == ["RS", "TS", "TE()", "RE(completed)"]
    assert ran.model.calls == []
    assert ran.ok.message is resumed
    assert ran.ok.messages == ()


@pytest.mark.parametrize("root", ROOTS)
async def test_resume_only_run_with_empty_messages(root: Root) -> None:
    """Resume with no earlier messages is allowed (the turn itself is the transcript)."""
    ran = await go(root, resume=MuleResume(assistant(TextContent("x"))), messages=(), replies=())
    assert ran.proj == ["RS", "TS", "TE()", "RE(completed)"]


@pytest.mark.parametrize("root", ROOTS)
async def test_terminate_counts_reused_results(root: Root) -> None:
    """Terminate counts every result of the turn, reused ones too: all terminate, no model call."""
    a, b = call("a", "safe"), call("b", "safe")
    resume = MuleResume(
        assistant(a, b),
        (ToolCompleted(a, result("A", terminate=True)), ToolStarted(b, "safe")),
    )
    ran = await go(root, resume=resume, replies=(), terminate=True)
    assert ran.proj[-2:] == ["TE(a,b)", "RE(completed)"]
    assert ran.model.calls == []


@pytest.mark.parametrize("root", ROOTS)
async def test_initial_steering_poll_is_skipped(root: Root) -> None:
    """Nothing sits between calls and results: the first poll follows the resumed turn_end."""
    c = call("a", "safe")
    steer = UserMessage("steer", 5)
    ran = await go(root, resume=MuleResume(assistant(c), (ToolStarted(c, "safe"),)), steering=[])
    assert ran.proj[:7] == ["RS", "TS", "XS(a:safe)", "XE(a)", "MS(r:a)", "ME(r:a)", "TE(a)"]
    assert ran.polls[0] == "turn_end"
    ran = await go(
        root, resume=MuleResume(assistant(c), (ToolStarted(c, "safe"),)), steering=[(steer,)]
    )
    assert ran.proj[7:10] == ["TS", "MS(u)", "ME(u)"]
    assert ran.model.calls[0][1].messages[-1] == steer


@pytest.mark.parametrize("root", ROOTS)
async def test_resumed_identities(root: Root) -> None:
    """resume.message has a message identity (the calls' parent) but no message events."""
    c = call("a", "safe")
    ran = await go(root, resume=MuleResume(assistant(c), (ToolStarted(c, "safe"),)))
    start = next(e for e in ran.events if type(e) is ToolExecutionStart)
    parent = start.tool_call.parent
    assert parent is not None
    assert parent.kind == "message"
    assert start.tool_call.kind == "tool_call"
    named = {e.message for e in ran.events if type(e) in (MessageStart, MessageEnd)}  # type: ignore[union-attr]
    assert parent not in named
    result_start = next(
        e for e in ran.events if type(e) is MessageStart and type(e.value) is ToolResultMessage
    )
    assert result_start.message.kind == "tool_result"
    assert result_start.message.parent == start.tool_call


def _invalid_resumes() -> list[tuple[str, Sequence[Message], MuleResume]]:
    a = call("a")
    ok = assistant(a)
    return [
        ("unknown call", (USER,), MuleResume(ok, (ToolPending(call("zz")),))),
        ("two checkpoints", (USER,), MuleResume(ok, (ToolPending(a), ToolStarted(a, "safe")))),
        ("error stop", (USER,), MuleResume(assistant(a, stop="error"))),
        ("aborted stop", (USER,), MuleResume(assistant(a, stop="aborted"))),
        ("trailing assistant", (USER, assistant(TextContent("x"))), MuleResume(ok)),
        ("result already held", (USER, committed(a, result("r"))), MuleResume(ok)),
        ("duplicate ids", (USER,), MuleResume(assistant(a, a))),
        (
            "message answers another call",
            (USER,),
            MuleResume(ok, (ToolCompleted(a, result("r"), committed(call("b"), result("r"))),)),
        ),
    ]


@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize(
    ("why", "messages", "resume"), _invalid_resumes(), ids=[x[0] for x in _invalid_resumes()]
)
async def test_invalid_resume_is_a_control_error_before_run_start(
    root: Root, why: str, messages: Sequence[Message], resume: MuleResume
) -> None:
    """An inconsistent resume fails with MuleError(control) and emits nothing."""
    ran = await go(root, resume=resume, messages=messages)
    assert ran.error is not None
    assert ran.error.phase == "control"
    assert ran.events == []
    assert ran.log.entries == []
    assert ran.model.calls == []


States = Literal["pending", "none", "started-safe", "started-unsafe", "completed", "committed"]
STATES: tuple[States, ...] = (
    "pending",
    "none",
    "started-safe",
    "started-unsafe",
    "completed",
    "committed",
)


def _checkpoint(state: States, c: ToolCall) -> MuleToolCheckpoint | None:
    r = result(f"old:{c.id}")
    return {
        "pending": ToolPending(c),
        "none": None,
        "started-safe": ToolStarted(c, "safe"),
        "started-unsafe": ToolStarted(c, "unsafe"),
        "completed": ToolCompleted(c, r),
        "committed": ToolCompleted(c, r, committed(c, r)),
    }[state]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@given(
    plan=st.lists(st.tuples(st.sampled_from(STATES), st.booleans()), min_size=1, max_size=6),
    sequential=st.booleans(),
)
def test_any_checkpoint_mix_settles_each_call_once(
    backend: str, plan: list[tuple[States, bool]], sequential: bool
) -> None:
    """Any mix of states: only pending/started-safe calls run; one result per call, source order."""
    calls = [call(f"c{i}", "safe" if safe else "unsafe") for i, (_, safe) in enumerate(plan)]
    cps = tuple(
        cp for cp in (_checkpoint(s, c) for (s, _), c in zip(plan, calls, strict=True)) if cp
    )
    resume = MuleResume(assistant(*calls), cps)
    ran = anyio.run(lambda: go("effects", resume=resume, sequential=sequential), backend=backend)
    should_run = [c.id for (s, _), c in zip(plan, calls, strict=True) if s in STATES[:3]]
    assert sorted(ran.log.of("execute")) == sorted(should_run)
    results = turn_end(ran).tool_results
    assert [m.tool_call_id for m in results] == [c.id for c in calls]
    for (s, _), c, m in zip(plan, calls, results, strict=True):
        if s == "started-unsafe":
            assert text_of(m) == INTERRUPTED_UNSAFE
        elif s in ("completed", "committed"):
            assert text_of(m) == f"old:{c.id}"
        else:
            assert text_of(m) == f"{c.name}:{c.id}"
    starts = [e.call.id for e in ran.events if type(e) is ToolExecutionStart]
    assert sorted(starts) == sorted(should_run)
    built = [
        e.value.tool_call_id
        for e in ran.events
        if type(e) is MessageEnd and type(e.value) is ToolResultMessage
    ]
    assert built == [c.id for (s, _), c in zip(plan, calls, strict=True) if s != "committed"]
