"""Section 6 scenarios 27, 29-32: cancellation, listener failures and hook failures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from returns.result import Failure, Result, Success

from mule.effects import MessageEnd, MuleCompletedTurn, MuleError, MuleEvent, RunEnd
from mule.pi import (
    AbortController,
    AbortError,
    AbortSignal,
    AssistantMessage,
    AssistantMessageEventStream,
    Context,
    Message,
    Model,
    RetryPolicy,
    StreamOptions,
    TextContent,
    ToolResultMessage,
)
from mule.pi.scripted import Call, Reply, Text, error_reply, reply
from tests.effects.kit import (
    MODEL,
    Journal,
    Queue,
    Recorder,
    Root,
    make_input,
    model_of,
    of_type,
    project,
    run_root,
    tool,
)

pytestmark = pytest.mark.anyio

STALLING = Reply(blocks=(Text(("a", "b")),), stall_after=3)  # start, text_start, delta, then waits


def abort_on(controller: AbortController, proj: str, reason: object) -> Callable[[MuleEvent], None]:
    """Return an on_event hook that aborts `controller` when an event projects to `proj`."""

    def hook(event: MuleEvent) -> None:
        if project([event]) == [proj]:
            controller.abort(reason)

    return hook


async def abort_later(
    controller: AbortController, seen: anyio.Event, reason: object, delay_s: float = 0.02
) -> None:
    """Abort `controller` a little after `seen` is set (from outside the run)."""
    await seen.wait()
    await anyio.sleep(delay_s)
    controller.abort(reason)


def cancelled_outcome_checks(message: AssistantMessage, reason_text: str) -> None:
    """Assert the synthetic Pi-Agent-style message of a cancelled run."""
    assert message.stop_reason == "aborted"
    assert message.error_message == reason_text
    assert message.content == (TextContent(""),)
    assert (message.api, message.provider, message.model) == (MODEL.api, MODEL.provider, MODEL.id)
    assert message.usage.total_tokens == 0


# -- 27: cancel during backoff ---------------------------------------------------------------------


async def test_s27_cancel_during_backoff(root: Root) -> None:
    """27: a cancel during the retry sleep: RE(cancelled), no MP(2)."""
    controller = AbortController()
    seen = anyio.Event()
    rec = Recorder(on_event=lambda e: seen.set() if e.type == "message_end" else None)
    model = model_of(error_reply("503"), reply("never"))
    inp = make_input(model, retry=RetryPolicy(True, 2, 5000))
    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_later, controller, seen, "user stop")
        with anyio.fail_after(4):  # the backoff is 5 s: finishing sooner proves it was cut short
            ran = await run_root(root, inp, rec, controller.signal)
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "ME(error)", "RE(cancelled)"]
    out = ran.ok
    assert out.status == "cancelled"
    assert out.messages == ()
    cancelled_outcome_checks(out.message, "user stop")
    assert len(model.calls) == 1


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ("stop now", "stop now"),
        (RuntimeError("halt"), "halt"),
        (None, "This operation was aborted"),
    ],
)
async def test_s27_abort_inside_the_listener_emits_only_run_end(
    root: Root, reason: object, text: str
) -> None:
    """An abort raised by the listener at ME(error) leaves nothing but RE(cancelled) after it."""
    controller = AbortController()
    rec = Recorder(on_event=abort_on(controller, "ME(error)", reason))
    model = model_of(error_reply("503"), reply("never"))
    ran = await run_root(
        root, make_input(model, retry=RetryPolicy(True, 2, 1)), rec, controller.signal
    )
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "ME(error)", "RE(cancelled)"]
    cancelled_outcome_checks(ran.ok.message, text)
    if reason is None:
        assert isinstance(controller.signal.reason, AbortError)


async def test_abort_at_a_non_retried_error_is_still_a_cancel(root: Root) -> None:
    """An abort at ME(error) of a final failure wins: RE(cancelled), not TE + RE(failed)."""
    controller = AbortController()
    rec = Recorder(on_event=abort_on(controller, "ME(error)", "enough"))
    ran = await run_root(root, make_input(model_of(error_reply("bad"))), rec, controller.signal)
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "ME(error)", "RE(cancelled)"]
    assert ran.ok.status == "cancelled"


# -- 29: cancel mid-stream -------------------------------------------------------------------------


async def test_s29_cancel_mid_stream(root: Root) -> None:
    """29: a cancel while streaming: only RE(cancelled) afterwards; the attempt signal aborts."""
    controller = AbortController()
    seen = anyio.Event()
    count = [0]

    def on_event(e: MuleEvent) -> None:
        count[0] += e.type == "message_update"
        if count[0] == 2:
            seen.set()

    rec = Recorder(on_event=on_event)
    model = model_of(STALLING)
    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_later, controller, seen, "user stop")
        ran = await run_root(root, make_input(model), rec, controller.signal)
    assert ran.proj == ["RS", "TS", "MP(1)", "MS", "MU", "MU", "RE(cancelled)"]
    out = ran.ok
    assert out.status == "cancelled"
    assert out.messages == ()
    attempt = model.calls[0][2].signal
    assert attempt is not None
    assert attempt.aborted
    # A21: the listener gets the run signal, already aborted at run_end(cancelled).
    assert rec.aborted_at[-1] is True
    assert not any(rec.aborted_at[:-1])
    end = ran.events[-1]
    assert type(end) is RunEnd
    assert end.terminal == out.terminal


async def test_cancel_keeps_committed_messages(root: Root) -> None:
    """A cancel in turn 2 keeps turn 1's committed messages in outcome.messages."""
    controller = AbortController()
    model = model_of(reply(Call("c1", "A")), STALLING)
    rec = Recorder()
    rec.on_event = _nth(rec, "MP(1)", 2, controller)
    ran = await run_root(root, make_input(model, tools=(tool("A"),)), rec, controller.signal)
    assert ran.proj[-2:] == ["MP(1)", "RE(cancelled)"]
    kinds = [type(m) for m in ran.ok.messages]
    assert kinds == [AssistantMessage, ToolResultMessage]


def _nth(
    rec: Recorder, proj: str, n: int, controller: AbortController
) -> Callable[[MuleEvent], None]:
    def hook(event: MuleEvent) -> None:
        if project(rec.events).count(proj) == n and project([event]) == [proj]:
            controller.abort("later")

    return hook


# -- cancellation during tools ---------------------------------------------------------------------


async def test_cancel_during_tools(root: Root) -> None:
    """A cancel while a tool runs: the tool sees its signal abort; only RE(cancelled) follows."""
    controller = AbortController()
    journal = Journal()
    tools = (tool("Slow", journal, wait_for_abort=True), tool("Fast", journal))
    model = model_of(reply(Call("c1", "Slow"), Call("c2", "Fast")), reply("never"))
    seen = anyio.Event()
    rec = Recorder(on_event=lambda e: seen.set() if e.type == "tool_execution_end" else None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_later, controller, seen, "user stop")
        ran = await run_root(root, make_input(model, tools=tools), rec, controller.signal)
    assert ran.proj[-4:] == ["XS(c1)", "XS(c2)", "XE(c2)", "RE(cancelled)"]
    assert journal.signals["c1"].aborted
    assert ("saw-abort", "c1") in journal.entries
    assert ("closed", "c1") in journal.entries  # the executor was unwound
    assert len(model.calls) == 1
    (tool_use,) = of_type(ran.events, MessageEnd)
    assert ran.ok.messages == (tool_use.value,)


async def test_cancel_in_a_sequential_batch_starts_no_further_call(root: Root) -> None:
    """A cancel during call 1 of a sequential batch never prepares call 2."""
    controller = AbortController()
    journal = Journal()
    tools = (tool("Slow", journal, wait_for_abort=True), tool("Fast", journal))
    model = model_of(reply(Call("c1", "Slow"), Call("c2", "Fast")), reply("never"))
    seen = anyio.Event()
    rec = Recorder(on_event=lambda e: seen.set() if e.type == "tool_execution_start" else None)
    inp = make_input(model, tools=tools, tool_execution="sequential")
    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_later, controller, seen, "stop", 0.05)
        ran = await run_root(root, inp, rec, controller.signal)
    assert ran.proj[-2:] == ["XS(c1)", "RE(cancelled)"]
    assert journal.of("prepare") == ["c1"]


# -- 30: already aborted ---------------------------------------------------------------------------


async def test_s30_aborted_before_start(root: Root) -> None:
    """30: a signal aborted before the call: cancelled at once, no events, no model call."""
    model = model_of(reply("never"))
    ran = await run_root(root, make_input(model), None, AbortSignal.abort("too late"))
    assert ran.events == []
    out = ran.ok
    assert out.status == "cancelled"
    assert out.messages == ()
    cancelled_outcome_checks(out.message, "too late")
    assert out.terminal.kind == "terminal"
    assert out.terminal.parent == out.run
    assert model.calls == []


async def test_s30_bad_input_wins_over_an_aborted_signal(root: Root) -> None:
    """Input checks come first: bad input with an aborted signal is still a control error."""
    ran = await run_root(root, make_input(model_of(), messages=()), None, AbortSignal.abort())
    assert ran.failed.phase == "control"
    assert ran.events == []


# -- task cancellation -----------------------------------------------------------------------------


async def cancel_later(scope: anyio.CancelScope, seen: anyio.Event) -> None:
    """Cancel `scope` a little after `seen` is set (from another task)."""
    await seen.wait()
    await anyio.sleep(0.02)
    scope.cancel()


async def test_task_cancellation_emits_run_end_and_reraises(root: Root) -> None:
    """Cancelling the calling task mid-stream emits only RE(cancelled) and re-raises."""
    model = model_of(STALLING)
    seen = anyio.Event()
    rec = Recorder()
    rec.on_event = lambda e: seen.set() if len(rec.events) == 6 else None  # the second MU
    reached = False
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(cancel_later, scope, seen)
            await run_root(root, make_input(model), rec)
            reached = True
    assert scope.cancelled_caught
    assert not reached
    assert project(rec.events) == ["RS", "TS", "MP(1)", "MS", "MU", "MU", "RE(cancelled)"]
    attempt = model.calls[0][2].signal
    assert attempt is not None
    assert attempt.aborted
    assert rec.aborted_at[-1] is True


async def test_task_cancellation_during_tools_aborts_the_tool(root: Root) -> None:
    """Cancelling the task while a tool runs aborts the tool's signal too."""
    journal = Journal()
    model = model_of(reply(Call("c1", "Slow")), reply("never"))
    rec = Recorder()
    inp = make_input(model, tools=(tool("Slow", journal, wait_for_abort=True),))

    async def when_executing() -> None:
        await journal.wait_for("execute", "c1")
        scope.cancel()

    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(when_executing)
            await run_root(root, inp, rec)
    assert scope.cancelled_caught
    assert project(rec.events)[-2:] == ["XS(c1)", "RE(cancelled)"]
    assert journal.signals["c1"].aborted


async def test_task_cancellation_from_the_listener(root: Root) -> None:
    """A cancel scope cancelled by the listener itself ends the same way."""
    model = model_of(STALLING)
    holder: list[anyio.CancelScope] = []
    rec = Recorder(on_event=lambda e: holder[0].cancel() if e.type == "message_start" else None)
    with anyio.CancelScope() as scope:
        holder.append(scope)
        await run_root(root, make_input(model), rec)
    assert scope.cancelled_caught
    assert project(rec.events) == ["RS", "TS", "MP(1)", "MS", "RE(cancelled)"]


@pytest.mark.parametrize("at", ["run_start", "turn_start", "message_end"])
async def test_task_cancellation_from_the_listener_mid_step(root: Root, at: str) -> None:
    """Cancelled by the listener at an event with more behind it in its step: run_end is next."""
    model = model_of(reply(Call("c1", "Echo")), reply("never"))
    holder: list[anyio.CancelScope] = []
    rec = Recorder(on_event=lambda e: holder[0].cancel() if e.type == at else None)
    inp = make_input(model, tools=(tool("Echo", Journal()),))
    with anyio.CancelScope() as scope:
        holder.append(scope)
        await run_root(root, inp, rec)
    assert scope.cancelled_caught
    seen = project(rec.events)
    assert seen[-1] == "RE(cancelled)"
    assert [e.type for e in rec.events[:-1]][-1] == at


# -- 31: listener failures -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["failure", "raise"])
async def test_s31_listener_fails_on_turn_start(root: Root, mode: str) -> None:
    """31: the listener fails on TS: no RE, no model call, MuleError(listener)."""
    rec = Recorder(fail_on="turn_start", fail_mode=mode)  # type: ignore[arg-type]
    model = model_of(reply("never"))
    ran = await run_root(root, make_input(model), rec)
    assert ran.proj == ["RS", "TS"]
    assert model.calls == []
    err = ran.failed
    assert err.phase == "listener"
    if mode == "raise":
        assert err.cause is rec.error
        assert "listener broke" in err.message
    else:
        assert err == MuleError("listener", "listener refused", rec.error)


@pytest.mark.parametrize("mode", ["failure", "raise"])
@pytest.mark.parametrize("outcome", ["completed", "failed", "cancelled"])
async def test_listener_fails_on_run_end(root: Root, mode: str, outcome: str) -> None:
    """A listener failing on run_end still fails the run with MuleError(listener)."""
    controller = AbortController()
    script = {"completed": reply("hi"), "failed": error_reply("bad"), "cancelled": STALLING}[
        outcome
    ]
    rec = Recorder(fail_on="run_end", fail_mode=mode)  # type: ignore[arg-type]
    if outcome == "cancelled":
        rec.on_event = abort_on(controller, "MU", "stop")
    ran = await run_root(root, make_input(model_of(script)), rec, controller.signal)
    assert ran.proj[-1] == f"RE({outcome})"
    assert ran.proj.count(f"RE({outcome})") == 1
    assert ran.failed.phase == "listener"


async def test_listener_failure_aborts_tools_in_flight(root: Root) -> None:
    """A listener failure while parallel tools run aborts the ones still in flight."""
    journal = Journal()
    tools = (tool("Slow", journal, wait_for_abort=True), tool("Fast", journal))
    model = model_of(reply(Call("c1", "Slow"), Call("c2", "Fast")), reply("never"))
    rec = Recorder(fail_on="tool_execution_end")
    ran = await run_root(root, make_input(model, tools=tools), rec)
    assert ran.failed.phase == "listener"
    assert ran.proj[-1] == "XE(c2)"
    assert journal.signals["c1"].aborted


# -- 32: model failures without a message ----------------------------------------------------------


@pytest.mark.parametrize("how", ["raises", "async-raises", "no-terminal", "not-a-stream"])
async def test_s32_stream_function_failures(root: Root, how: str) -> None:
    """32: a raising stream function or a stream with no terminal: MuleError(model), RE(failed)."""
    boom = ConnectionError("refused")

    async def rejects(
        model: Model, ctx: Context, opts: StreamOptions
    ) -> AssistantMessageEventStream:
        raise boom

    def wrong(model: Model, ctx: Context, opts: StreamOptions) -> AssistantMessageEventStream:
        return "nope"  # type: ignore[return-value]

    stream = {
        "raises": model_of(Reply(raises=boom)),
        "async-raises": rejects,
        "no-terminal": model_of(Reply(blocks=(Text(("a",)),), no_terminal=True)),
        "not-a-stream": wrong,
    }[how]
    with anyio.fail_after(5):  # a hang guard: Pi would wait forever on a missing terminal
        ran = await run_root(root, make_input(None, stream=stream))
    err = ran.failed
    assert err.phase == "model"
    assert ran.proj[-1] == "RE(failed)"
    assert "TE()" not in ran.proj
    if how in ("raises", "async-raises"):
        assert err.cause is boom
        assert ran.proj == ["RS", "TS", "MP(1)", "RE(failed)"]
    if how == "no-terminal":
        assert ran.proj == ["RS", "TS", "MP(1)", "MS", "MU", "MU", "MU", "RE(failed)"]


# -- hook failures ---------------------------------------------------------------------------------


async def _raise(*args: object) -> Result[object, MuleError]:
    raise RuntimeError("hook broke")


async def _fail(*args: object) -> Result[object, MuleError]:
    return Failure(MuleError("control", "hook said no"))


@pytest.mark.parametrize("hook", [_raise, _fail], ids=["raises", "failure"])
@pytest.mark.parametrize("which", ["steering", "follow_up", "stop"])
async def test_hook_failures_are_control_errors(root: Root, which: str, hook: Any) -> None:
    """A steering, follow-up or stop hook that fails ends the run with MuleError(control)."""
    names = {
        "steering": "get_steering_messages",
        "follow_up": "get_follow_up_messages",
        "stop": "should_stop_after_turn",
    }
    ran = await run_root(root, make_input(model_of(reply("hi")), **{names[which]: hook}))
    assert ran.failed.phase == "control"
    want = {
        "steering": ["RS", "TS", "RE(failed)"],
        "follow_up": [
            "RS",
            "TS",
            "MP(1)",
            "MS",
            "MU",
            "MU",
            "MU",
            "ME(stop)",
            "TE()",
            "RE(failed)",
        ],
        # The stop hook is asked before turn_end (where Pi 1.6.0 calls finishTurn).
        "stop": ["RS", "TS", "MP(1)", "MS", "MU", "MU", "MU", "ME(stop)", "RE(failed)"],
    }[which]
    assert ran.proj == want


async def test_hooks_get_the_run_signal(root: Root) -> None:
    """Steering, follow-up and stop hooks all receive the same (run) signal."""
    signals: list[AbortSignal] = []

    class Spy(Queue):
        async def __call__(self, signal: AbortSignal) -> Result[tuple[Message, ...], MuleError]:
            signals.append(signal)
            return await super().__call__(signal)

    async def stop(turn: MuleCompletedTurn, signal: AbortSignal) -> Result[bool, MuleError]:
        signals.append(signal)
        return Success(False)

    rec = Recorder()
    inp = make_input(
        model_of(reply("hi")),
        get_steering_messages=Spy(),
        get_follow_up_messages=Spy(),
        should_stop_after_turn=stop,
    )
    caller = AbortController()
    ran = await run_root(root, inp, rec, caller.signal)
    assert ran.ok.status == "completed"
    assert len(signals) == 4
    assert all(s is signals[0] for s in signals)


@pytest.mark.parametrize("status", ["completed", "failed"])
async def test_abort_during_run_end_changes_nothing(root: Root, status: str) -> None:
    """An abort raised while run_end is being delivered leaves that run_end the only terminal."""
    controller = AbortController()
    script = reply("hi") if status == "completed" else error_reply("bad")
    rec = Recorder(on_event=abort_on(controller, f"RE({status})", "late"))
    ran = await run_root(root, make_input(model_of(script)), rec, controller.signal)
    assert ran.proj[-2:] == ["TE()", f"RE({status})"]
    if status == "completed":
        assert ran.ok.status == "completed"
    else:
        assert ran.failed.phase == "model"


async def test_task_cancelled_during_run_end_emits_no_second_run_end(root: Root) -> None:
    """A task cancel while run_end(completed) is out re-raises without a second run_end."""
    holder: list[anyio.CancelScope] = []
    rec = Recorder(on_event=lambda e: holder[0].cancel() if e.type == "run_end" else None)
    with anyio.CancelScope() as scope:
        holder.append(scope)
        await run_root(root, make_input(model_of(reply("hi"))), rec)
    assert scope.cancelled_caught
    assert project(rec.events)[-2:] == ["TE()", "RE(completed)"]


@pytest.fixture
def root() -> Root:
    """Run these on the Result root: the facade raises on cancel instead (see test_promise)."""
    return "effects"
