"""Stateful test of mule's pure loop machine against an independent model of Pi's loop.

The test plays the interpreter: it answers the commands `step` issues and interleaves any
fact the world may produce (model events, tool parts in any order, hook answers, failures,
cancellation, listener failures), then checks the machine against `tests/effects/machine_model.py`
and against structural invariants of the event stream.

Tests the private rule `mule.effects._transition.step` itself (from `initial_state`), with the
machine's own facts and commands (`mule.effects._protocol`) and state (`mule.effects._state`): the
pure machine has no public face of its own.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)
from returns.result import Failure

from mule.effects import (
    EVENT_TYPES,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelPrompt,
    MuleCallPreparation,
    MuleError,
    MuleEvent,
    MuleIdentity,
    MuleIdentityKind,
    MuleResume,
    MuleToolCheckpoint,
    MuleToolDeclaration,
    MuleToolExecutionPart,
    MuleToolPrepared,
    MuleToolRejection,
    MuleToolResult,
    RunEnd,
    RunStart,
    ToolCompleted,
    ToolExecution,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolPending,
    ToolStarted,
    TurnEnd,
    TurnStart,
)
from mule.effects._protocol import (
    AskFollowUp,
    AskRetryAfter,
    AskSteering,
    AskStop,
    Began,
    CallModel,
    CancelRequested,
    CloseModel,
    CloseTool,
    Command,
    Fact,
    Finish,
    KeyResolved,
    ListenerFailed,
    MessagesAnswered,
    PrepareTool,
    PullModel,
    PullTool,
    ResolveKey,
    RetryAfterAnswered,
    Sleep,
    Slept,
    StartTools,
    StopAnswered,
    StreamExhausted,
    StreamIdled,
    StreamOpened,
    ToolExhausted,
    ToolPartArrived,
    ToolPrepared,
    WorkFailed,
)
from mule.effects._state import Polling, RunConfig, RunState
from mule.effects._transition import initial_state, step
from mule.pi import (
    ZERO_USAGE,
    AbortSignal,
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    Message,
    RetryPolicy,
    StartEvent,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolResultMessage,
    ToolValidator,
    UserMessage,
    get_current_system_prompt,
    get_current_tools,
)
from tests.effects.machine_model import (
    ERROR_TEXTS,
    MODEL,
    SYSTEM_PROMPT,
    LoopModel,
    Setup,
    ToolSpec,
)

RUN = MuleIdentity("run", "run:0")
PARENT: dict[str, str | None] = {
    "run": None,
    "turn": "run",
    "message": "turn",
    "tool_call": "message",
    "tool_result": "tool_call",
    "terminal": "run",
}
# Commands the interpreter answers at once (or that end the run): only a step's last may be one.
ANSWERED = (
    ResolveKey,
    CallModel,
    PullModel,
    PrepareTool,
    AskSteering,
    AskFollowUp,
    AskStop,
    AskRetryAfter,
    Sleep,
    Finish,
)
EVENTS = tuple(EVENT_TYPES.values())


def _no_execute(signal: AbortSignal) -> ToolExecution:
    raise AssertionError("the pure machine never executes")


# -- strategies -------------------------------------------------------------------------------

ARGUMENTS: list[dict[str, Any]] = [{"n": 1}, {"n": 1}, {}, {"n": "x"}]


@st.composite
def tool_calls(draw: st.DrawFn, max_size: int = 3) -> tuple[ToolCall, ...]:
    """Tool-call blocks; names include an unknown tool, ids repeat across messages."""
    n = draw(st.sampled_from(range(max_size + 1)))
    return tuple(
        ToolCall(
            f"call_{j}",
            draw(st.sampled_from(["a", "b", "c", "a", "b", "zzz"])),
            dict(draw(st.sampled_from(ARGUMENTS))),
        )
        for j in range(n)
    )


results = st.builds(
    MuleToolResult,
    content=st.sampled_from([(TextContent("ok"),), (TextContent("out"), TextContent("more"))]),
    is_error=st.booleans(),
    details=st.sampled_from([None, {"k": 1}]),
    terminate=st.sampled_from([None, True, False]),
)


def _assistant(content: tuple[Any, ...], stop: str, error: str | None = None) -> AssistantMessage:
    return AssistantMessage(
        content=content,
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        usage=ZERO_USAGE,
        stop_reason=stop,  # type: ignore[arg-type]
        timestamp=7,
        error_message=error,
    )


@st.composite
def resumes(draw: st.DrawFn) -> MuleResume:
    """Draw a resumed assistant turn with a checkpoint (or none) per call."""
    calls = draw(tool_calls())
    message = _assistant(
        (TextContent("resumed"), *calls), draw(st.sampled_from(["stop", "toolUse", "length"]))
    )
    checkpoints: list[MuleToolCheckpoint] = []
    for call in calls:
        kind = draw(st.sampled_from(["none", "pending", "started", "completed", "committed"]))
        if kind == "pending":
            checkpoints.append(ToolPending(call))
        elif kind == "started":
            checkpoints.append(ToolStarted(call, draw(st.sampled_from(["safe", "unsafe"]))))
        elif kind in ("completed", "committed"):
            result = draw(results)
            committed = ToolResultMessage(
                call.id, call.name, result.content, result.is_error, 3, result.details
            )
            checkpoints.append(
                ToolCompleted(call, result, committed if kind == "committed" else None)
            )
    return MuleResume(message, tuple(checkpoints))


@st.composite
def setups(draw: st.DrawFn) -> Setup:
    """One run's configuration."""
    names = draw(st.sampled_from([("a", "b", "c"), ("a", "b"), ("b", "c"), ("a",), ()]))
    tools = {
        name: ToolSpec(
            draw(st.booleans()),
            draw(st.sampled_from([None, None, "parallel", "sequential"])),
            draw(st.sampled_from(["safe", "unsafe"])),
        )
        for name in names
    }
    retry = None
    if draw(st.integers(0, 3)) > 0:
        retry = RetryPolicy(
            enabled=draw(st.sampled_from([True, True, False])),
            max_retries=draw(st.integers(0, 2)),
            base_delay_ms=draw(st.sampled_from([1.0, 10.0, 250.0])),
            non_retryable_overrides=draw(st.sampled_from([(), ("quota",)])),
            max_agent_delay_ms=draw(st.sampled_from([60_000.0, 5.0])),
        )
    return Setup(
        tools=tools,
        sequential=draw(st.sampled_from([False, False, True])),
        retry=retry,
        key_hook=draw(st.booleans()),
        steering=draw(st.booleans()),
        follow_up=draw(st.booleans()),
        stop=draw(st.booleans()),
        retry_after=draw(st.booleans()),
        idle_ms=draw(st.sampled_from([None, 50])),
        resume=draw(resumes()) if draw(st.integers(0, 3)) == 3 else None,
        messages=(UserMessage("hello", 1),),
        api_key=draw(st.sampled_from([None, "from-options"])),
    )


# After how many facts cancellation or a listener failure may strike (mostly never).
interrupts = st.sampled_from([10**9] * 5) | st.integers(1, 40)


def config(setup: Setup) -> RunConfig:
    """Return the machine's configuration for a drawn setup."""
    tools = {
        name: MuleToolDeclaration(
            descriptor=spec.descriptor(name),
            replay=spec.replay,
            execution_mode=spec.mode,
        )
        for name, spec in setup.tools.items()
    }
    return RunConfig(
        run=RUN,
        model=MODEL,
        system_prompt=SYSTEM_PROMPT,
        stream_options=StreamOptions(api_key=setup.api_key),
        tools=tools,
        validators={n: ToolValidator.for_tool(t.descriptor) for n, t in tools.items()},
        descriptors=tuple(t.descriptor for t in tools.values()) or None,
        sequential=setup.sequential,
        retry=setup.retry,
        resume=setup.resume,
        has_key_hook=setup.key_hook,
        has_steering=setup.steering,
        has_follow_up=setup.follow_up,
        has_stop=setup.stop,
        has_retry_after=setup.retry_after,
        idle_timeout_ms=None if setup.idle_ms is None else float(setup.idle_ms),
    )


def pick(data: st.DataObject, common: list[Any], rare: list[Any], odds: int = 16) -> Any:
    """Draw an answer: one of `rare` (failures, odd values) about once in `odds` draws."""
    if data.draw(st.integers(0, odds - 1), label="rare?") == odds - 1:
        return data.draw(st.sampled_from(rare), label="rare")
    return data.draw(st.sampled_from(common), label="answer")


ANSWERS = {
    "key": "resolve_key",
    "call": "open_stream",
    "pull": "model_event",
    "prepare": "prepare",
    "steering": "poll",
    "steering_again": "poll",
    "follow_up": "poll",
    "stop": "stop_hook",
    "retry_after": "retry_after",
    "sleep": "sleep_over",
}


# -- the machine ------------------------------------------------------------------------------


class LoopMachine(RuleBasedStateMachine):
    """Drives `step` as the interpreter would and compares it with `LoopModel`."""

    def __init__(self) -> None:
        super().__init__()
        self.over = True
        self.runs = 0

    # -- run lifecycle --------------------------------------------------------------------------

    @initialize(setup=setups(), interrupt_after=interrupts, now=st.integers(0, 50))
    def first_run(self, setup: Setup, interrupt_after: int, now: int) -> None:
        """Begin the first run of the example."""
        self._start(setup, interrupt_after, now)

    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        """Answer what the machine waits for (or interrupt it); after a run, begin another.

        One rule that dispatches keeps hypothesis from filtering rules by precondition.
        """
        if self.over:
            setup = data.draw(setups(), label="setup")
            self._start(setup, data.draw(interrupts, label="interrupt after"), self.now)
            return
        actions = []
        if self.awaiting:
            actions.append(ANSWERS[str(self.awaiting[0])])
        if self.waiting:
            actions.append("tool_part")
        if self.facts >= self.interrupt_after:
            actions.append("interrupt")
        action = data.draw(st.sampled_from(actions), label="action")
        getattr(self, action)(data)

    def _start(self, setup: Setup, interrupt_after: int, now: int) -> None:
        self.runs += 1
        self.setup = setup
        self.cfg = config(setup)
        self.state: RunState = initial_state(self.cfg, setup.messages)
        self.model = LoopModel(setup)
        self.over = False
        self.finish: Finish | None = None
        self.interrupt_after = interrupt_after
        self.facts = 0
        self.now = now
        self.awaiting: tuple[object, ...] = ()
        self.waiting: set[int] = set()  # tools that owe a part
        self.active: set[int] = set()  # tools started and not closed
        self.projection: list[tuple[object, ...]] = []
        self.checked = 0
        self.delivered: list[MuleEvent] = []
        self.ids: dict[str, MuleIdentity] = {}
        self.turn: MuleIdentity | None = None
        self.open: dict[str, Message] = {}
        self.tool_calls: dict[str, ToolCall] = {}
        self.tool_ended: set[str] = set()
        self.partial: AssistantMessage | None = None
        self.text = ""
        self.listener_error: MuleError | None = None
        self.last_fact: Fact | None = None
        self.model.tick(now)
        self.model.began()
        self.feed(Began(now), None)

    # -- feeding facts ----------------------------------------------------------------------------

    def feed(self, fact: Fact, data: st.DataObject | None) -> None:
        """Step the machine; maybe let the listener fail on one of the events it emits."""
        self.facts += 1
        self.state, cmds = step(self.state, fact)
        answered = [k for k, c in enumerate(cmds) if isinstance(c, ANSWERED)]
        assert answered in ([], [len(cmds) - 1]), f"an answered command is not last: {cmds}"
        events = [k for k, c in enumerate(cmds) if isinstance(c, EVENTS)]
        if data is not None and events and data.draw(st.integers(0, 199), label="fail?") == 199:
            at = data.draw(st.sampled_from(events), label="listener fails at")
            self.perform(cmds[: at + 1])
            self.delivered.pop()  # its listener raised: it does not count as delivered
            assert self.projection == self.model.log[: len(self.projection)]
            self.listener_fails()
            return
        self.perform(cmds)
        self.compare()

    def listener_fails(self) -> None:
        """Fail the listener: the run fails with that error and nothing else."""
        error = MuleError("listener", "listener raised")
        self.listener_error = error
        self.model.listener_failed()
        self.state, cmds = step(self.state, ListenerFailed(error))
        assert cmds == (Finish(Failure(error)),), f"after a listener failure: {cmds}"
        self.projection = list(self.model.log[: len(self.projection)])
        self.perform(cmds)

    def perform(self, cmds: tuple[Command, ...]) -> None:
        """Play the interpreter's part for one step's commands."""
        self.awaiting = ()
        for c in cmds:
            if isinstance(c, EVENTS):
                self.on_event(c)
            elif isinstance(c, StartTools):
                self.projection.append(("start_tools", c.indices))
                assert not (set(c.indices) & self.active)
                self.waiting |= set(c.indices)
                self.active |= set(c.indices)
            elif isinstance(c, PullTool):
                assert c.index in self.active
                assert c.index not in self.waiting
                self.waiting.add(c.index)
            elif isinstance(c, CloseTool):
                assert c.index in self.active
                assert c.index not in self.waiting
                self.active.discard(c.index)
            elif isinstance(c, CloseModel):
                pass
            elif isinstance(c, ResolveKey):
                assert c.provider == MODEL.provider
                self.awaiting = ("key",)
            elif isinstance(c, CallModel):
                assert c.context.messages == tuple(self.model.context)
                messages = c.context.messages
                assert get_current_system_prompt(messages) == self.cfg.system_prompt
                assert get_current_tools(messages) == (self.cfg.descriptors or ())
                assert c.options.api_key == self.model.key
                self.partial, self.text = None, ""
                self.awaiting = ("call",)
            elif isinstance(c, PullModel):
                self.awaiting = ("pull",)
            elif isinstance(c, PrepareTool):
                assert c.call == self.model.calls[c.index]
                self.awaiting = ("prepare", c.index)
            elif isinstance(c, AskSteering):
                # The state says which poll: after a turn, or Pi 1.6.0's second one before it.
                again = type(self.state.phase) is Polling and self.state.phase.kind != "steering"
                self.awaiting = ("steering_again",) if again else ("steering",)
            elif isinstance(c, AskFollowUp):
                self.awaiting = ("follow_up",)
            elif isinstance(c, AskStop):
                assert c.turn == self.model.completed_turn()
                self.awaiting = ("stop",)
            elif isinstance(c, AskRetryAfter):
                assert c.message == self.model.log[-1][1]
                self.awaiting = ("retry_after",)
            elif isinstance(c, Sleep):
                self.awaiting = ("sleep", c.ms)
            elif isinstance(c, Finish):
                self.awaiting = ("over",)
                self.finish = c
                self.over = True
                self.on_finish(c)
            else:
                raise AssertionError(f"unknown command {c!r}")

    def compare(self) -> None:
        """Check the machine against the model after a step."""
        new = self.projection[self.checked :]
        assert new == self.model.log[self.checked :], "the event log departs from the model"
        self.checked = len(self.projection)
        assert self.awaiting == self.model.expect
        if not self.over:
            assert self.active == self.model.running
            # Liveness: something must owe the machine an answer.
            assert self.awaiting or self.waiting

    # -- structural checks on events -------------------------------------------------------------

    def register(self, ident: MuleIdentity, kind: MuleIdentityKind, fresh: bool) -> None:
        """Check an identity's kind, parent and uniqueness; remember it."""
        assert ident.kind == kind
        known = self.ids.get(ident.value)
        if known is not None:
            assert not fresh, f"identity {ident.value} reused"
            assert known == ident
            return
        parent_kind = PARENT[kind]
        if parent_kind is None:
            assert ident.parent is None
        else:
            parent = ident.parent
            assert parent is not None
            assert parent.kind == parent_kind
            if parent.value in self.ids:
                assert self.ids[parent.value] == parent
            else:
                # Only the resumed turn has identities without events (its message, and
                # the calls that settle from checkpoints).
                assert kind in ("tool_call", "tool_result")
                assert self.setup.resume is not None
                self.register(parent, parent_kind, fresh=True)
                if parent_kind == "message":
                    assert parent.parent == self.turn
        self.ids[ident.value] = ident

    def on_event(self, ev: MuleEvent) -> None:
        """Record one emitted event and check it against what came before."""
        self.delivered.append(ev)
        assert ev.run == RUN
        if isinstance(ev, RunStart):
            assert not self.ids
            self.register(ev.run, "run", fresh=True)
            self.projection.append(("run_start",))
            return
        if isinstance(ev, RunEnd):
            self.register(ev.terminal, "terminal", fresh=True)
            self.projection.append(("run_end", ev.outcome))
            return
        if isinstance(ev, TurnStart):
            assert not self.open
            self.register(ev.turn, "turn", fresh=True)
            self.turn = ev.turn
            self.projection.append(("turn_start",))
            return
        assert ev.turn == self.turn
        if isinstance(ev, ModelPrompt):
            assert ev.system_prompt == self.cfg.system_prompt
            self.projection.append(("prompt", ev.attempt))
        elif isinstance(ev, MessageStart):
            kind: MuleIdentityKind = (
                "tool_result" if isinstance(ev.value, ToolResultMessage) else "message"
            )
            self.register(ev.message, kind, fresh=True)
            if kind == "message":
                assert ev.message.parent == self.turn
            else:
                call = self.tool_calls.get(ev.message.parent.value)  # type: ignore[union-attr]
                if call is not None:
                    assert call.id == ev.value.tool_call_id  # type: ignore[union-attr]
            self.open[ev.message.value] = ev.value
        elif isinstance(ev, MessageUpdate):
            assert isinstance(self.open.get(ev.message.value), AssistantMessage)
            assert self.ids[ev.message.value] == ev.message
            assert ev.value == ev.event.partial  # type: ignore[union-attr]
        elif isinstance(ev, MessageEnd):
            start = self.open.pop(ev.message.value)
            assert self.ids[ev.message.value] == ev.message
            if not isinstance(start, AssistantMessage):
                assert ev.value == start
            self.projection.append(("end", ev.value))
        elif isinstance(ev, ToolExecutionStart):
            self.register(ev.tool_call, "tool_call", fresh=True)
            self.tool_calls[ev.tool_call.value] = ev.call
            self.projection.append(("tstart", ev.call, ev.replay))
        elif isinstance(ev, ToolExecutionUpdate | ToolExecutionEnd):
            assert self.tool_calls[ev.tool_call.value] == ev.call
            assert self.ids[ev.tool_call.value] == ev.tool_call
            assert ev.tool_call.value not in self.tool_ended
            if isinstance(ev, ToolExecutionEnd):
                self.tool_ended.add(ev.tool_call.value)
                self.projection.append(("tend", ev.call, ev.result))
            else:
                self.projection.append(("tupdate", ev.call, ev.result))
        elif isinstance(ev, TurnEnd):
            assert not self.open
            assert self.tool_ended == set(self.tool_calls)
            self.projection.append(("turn_end", ev.message, ev.tool_results))
        else:
            raise AssertionError(f"unknown event {ev!r}")

    def committed(self) -> list[Message]:
        """Return the messages an owner commits from the events.

        An error attempt followed by the next `model_prompt` (a retry) or by `run_end(cancelled)`
        (cancelled during the retry's backoff) is superseded; a committed one gets `turn_end`.
        """
        out: list[Message] = []
        retried = False
        for ev in self.delivered:
            if isinstance(ev, MessageEnd):
                out.append(ev.value)
                retried = isinstance(ev.value, AssistantMessage) and ev.value.stop_reason == "error"
            elif retried and (
                (isinstance(ev, ModelPrompt) and ev.attempt > 1)
                or (isinstance(ev, RunEnd) and ev.outcome == "cancelled")
            ):
                out.pop()
                retried = False
            elif not isinstance(ev, MessageStart | MessageUpdate):
                retried = False
        return out

    def on_finish(self, fin: Finish) -> None:
        """Check the run's end against the model; nothing may follow it."""
        m = self.model
        ends = [ev for ev in self.delivered if isinstance(ev, RunEnd)]
        if m.failed_phase == "listener":
            assert fin.outcome is None
            assert fin.error is self.listener_error
            assert not ends
        else:
            assert len(ends) == 1
            assert self.delivered[-1] is ends[0]
            assert ends[0].outcome == m.status
        if m.status == "failed":
            assert fin.outcome is None
            assert fin.error is not None
            assert fin.error.phase == m.failed_phase
            if m.failed_phase != "listener" and isinstance(self.last_fact, WorkFailed):
                assert fin.error is self.last_fact.error
        else:
            out = fin.outcome
            assert fin.error is None
            assert out is not None
            assert out.status == m.status
            assert out.run == RUN
            assert out.terminal == ends[0].terminal
            assert out.messages == tuple(m.new) == tuple(self.committed())
            if m.status == "completed":
                assert out.message == m.outcome_message()
                assert self.tool_ended == set(self.tool_calls)
            else:
                assert out.message.stop_reason == "aborted"
                assert out.message.error_message == "stop requested"
                assert out.message.timestamp == m.clock
                assert out.message.content == (TextContent(""),)
        for fact in (Began(), Slept(), StreamExhausted(), StopAnswered(True)):
            assert step(self.state, fact) == (self.state, ())
        # The interpreter may still cancel a run whose `run_end` it has not delivered: the
        # cancellation replaces that end (and the interpreter must not deliver both).
        _, cmds = step(self.state, CancelRequested("late", 1))
        assert [type(c) for c in cmds] == [RunEnd, Finish]
        assert cmds[0].outcome == "cancelled"  # type: ignore[union-attr]

    # -- helpers for rules --------------------------------------------------------------------

    def give(self, fact: Fact, data: st.DataObject | None) -> None:
        """Feed a fact the model already knows about."""
        self.last_fact = fact
        self.feed(fact, data)

    def clock(self, data: st.DataObject) -> int:
        """Draw a fact's time: usually later, sometimes earlier (the machine keeps the max)."""
        self.now = max(0, self.now + data.draw(st.integers(-5, 20), label="dt"))
        self.model.tick(self.now)
        return self.now

    def failure(self, phase: str) -> WorkFailed:
        """Return a typed failure of the awaited work."""
        self.model.fail(phase)
        return WorkFailed(MuleError(phase, f"{phase} work failed"))  # type: ignore[arg-type]

    # -- answers and interruptions (dispatched by `advance`) -----------------------------------

    def interrupt(self, data: st.DataObject) -> None:
        """Cancel the run or fail its listener, whatever the machine is waiting for."""
        if data.draw(st.booleans(), label="listener fails"):
            self.listener_fails()
            return
        self.now += 1
        self.model.cancel(self.now)
        self.state, cmds = step(self.state, CancelRequested("stop requested", self.now))
        assert [type(c) for c in cmds] == [RunEnd, Finish], cmds
        self.perform(cmds)
        self.compare()

    def resolve_key(self, data: st.DataObject) -> None:
        """`resolve_api_key` answers a key (falsy ones fall back) or fails."""
        key = pick(data, [None, "", "hook-key"], ["fail"])
        if key == "fail":
            self.give(self.failure("model"), data)
            return
        self.model.key_resolved(key)
        self.give(KeyResolved(key), data)

    def open_stream(self, data: st.DataObject) -> None:
        """Answer the stream call: a stream, a failure, or a timeout first."""
        choice = pick(data, ["open"], ["fail", "idle"])
        if choice == "idle" and self.setup.idle_ms is not None:
            now = self.clock(data)
            self.model.idled(None, now)
            self.give(StreamIdled(None, now), data)
        elif choice == "fail":
            self.give(self.failure("model"), data)
        else:
            self.model.opened()
            self.give(StreamOpened(), data)

    def _partial(self) -> AssistantMessage:
        self.partial = _assistant((TextContent(self.text),), "stop")
        return self.partial

    def model_event(self, data: st.DataObject) -> None:
        """Answer a pull: an event, the end, an idle timeout, a protocol break or a raise."""
        kind = pick(
            data,
            ["start", "start", "text", "thinking", "toolcall", "end", "end"],
            ["exhausted", "idle", "fail", "not-assistant"],
            odds=48,  # a response takes several pulls
        )
        if kind == "start":
            self.model.start()
            self.give(StartEvent(partial=self._partial()), data)
        elif kind in ("text", "thinking", "toolcall"):
            self.text += "x"
            partial = self._partial()
            event = {
                "text": TextDeltaEvent(content_index=0, delta="x", partial=partial),
                "thinking": ThinkingDeltaEvent(content_index=0, delta="x", partial=partial),
                "toolcall": ToolCallDeltaEvent(content_index=0, delta="{", partial=partial),
            }[kind]
            self.model.expect = ("pull",)
            self.give(event, data)  # type: ignore[arg-type]
        elif kind == "end":
            stop = pick(
                data, ["stop", "toolUse", "toolUse", "toolUse", "length", "error"], ["aborted"]
            )
            error = None
            if stop in ("error", "aborted"):
                error = pick(
                    data,
                    [text for text, ok in ERROR_TEXTS if ok],
                    [text for text, ok in ERROR_TEXTS if not ok],
                )
            calls = data.draw(tool_calls())
            body = (ThinkingContent("hm"),) if data.draw(st.booleans()) else ()
            final = _assistant((*body, TextContent(self.text), *calls), stop, error)
            self.model.settled(final)
            if data.draw(st.booleans()):
                self.give(DoneEvent(reason="stop", message=final), data)
            else:
                self.give(ErrorEvent(reason="error", error=final), data)
        elif kind == "exhausted":
            self.model.fail("model")
            self.give(StreamExhausted(), data)
        elif kind == "idle" and self.setup.idle_ms is not None:
            now = self.clock(data)
            self.model.idled(self.partial, now)
            self.give(StreamIdled(self.partial, now), data)
        elif kind == "not-assistant":
            # A hand-written stream may end with anything: a protocol violation.
            self.model.fail("model")
            wrong: Any = UserMessage("not an assistant message", 0)
            self.give(DoneEvent(reason="stop", message=wrong), data)
        else:
            self.give(self.failure("model"), data)

    def prepare(self, data: st.DataObject) -> None:
        """Answer `prepare`: an executor, a rejection, or a failure."""
        i = self.awaiting[1]
        assert isinstance(i, int)
        kind = pick(data, ["prepared", "prepared", "prepared", "rejected"], ["fail"])
        if kind == "fail":
            self.give(self.failure("tool"), data)
            return
        now = self.clock(data)
        prep: MuleCallPreparation
        if kind == "prepared":
            prep = MuleToolPrepared(_no_execute)
            self.model.prepared_ok(i)
        else:
            terminate = data.draw(st.sampled_from([None, True, False]))
            prep = MuleToolRejection("not allowed", terminate)
            self.model.rejected(i, "not allowed", terminate)
        self.give(ToolPrepared(i, prep, now), data)

    def tool_part(self, data: st.DataObject) -> None:
        """Answer any running tool, in any order: a part, no result, or a failure."""
        i = data.draw(st.sampled_from(sorted(self.waiting)), label="tool")
        result = data.draw(results, label="result")
        kind = pick(data, ["update", "result", "result"], ["exhausted", "fail"])
        self.waiting.discard(i)
        if kind == "exhausted":
            self.model.fail("tool")
            self.give(ToolExhausted(i), data)
            return
        if kind == "fail":
            self.give(self.failure("tool"), data)
            return
        now = self.clock(data)
        if kind == "update":
            self.model.update(i, result)
        else:
            self.model.result(i, result)
        part = MuleToolExecutionPart(kind, result)
        self.give(ToolPartArrived(i, part, now), data)

    def poll(self, data: st.DataObject) -> None:
        """Answer a steering or follow-up poll with messages (maybe none), or fail it."""
        count = pick(data, [0, 0, 1, 2], [-1])
        if count < 0:
            self.give(self.failure("control"), data)
            return
        messages = tuple(UserMessage(f"queued {self.facts}.{k}", self.facts) for k in range(count))
        self.model.polled(messages)
        self.give(MessagesAnswered(messages), data)

    def stop_hook(self, data: st.DataObject) -> None:
        """Answer the stop hook, or fail it."""
        answer = pick(data, [False, False, False, True], [None])
        if answer is None:
            self.give(self.failure("control"), data)
            return
        self.model.stop_answered(answer)
        self.give(StopAnswered(answer), data)

    def retry_after(self, data: st.DataObject) -> None:
        """`retry_after_ms` answers a value (odd ones are ignored), or fails."""
        ms = pick(data, [None, float("nan"), -5.0, 0.0, 3.0, 1e6, float("inf")], ["fail"])
        if isinstance(ms, str):
            self.give(self.failure("control"), data)
            return
        self.model.retry_after(ms)
        self.give(RetryAfterAnswered(ms), data)

    def sleep_over(self, data: st.DataObject) -> None:
        """End a backoff sleep."""
        self.model.slept()
        self.give(Slept(), data)

    @invariant()
    def machine_is_over_exactly_when_the_model_is(self) -> None:
        """Check that the machine and the model agree on whether the run is over."""
        assert self.over == (self.model.status is not None)


LoopMachine.TestCase.settings = settings(
    max_examples=500,
    stateful_step_count=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLoopMachine = LoopMachine.TestCase

# 500 examples of 100 steps take about 30 s on a quiet machine but over 300 s (the suite's
# per-test timeout) on a loaded 2-core one; a timeout mid-example surfaces as a misleading
# FlakyStrategyDefinition, so this test gets a wider hang guard of its own.
pytestmark = pytest.mark.timeout(1200)
