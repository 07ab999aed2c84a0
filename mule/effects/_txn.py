"""One step's transaction and the run's verdicts (complete, fail, cancel)."""

from __future__ import annotations

from returns.result import Failure, Result, Success

from mule.effects._errors import MuleError
from mule.effects._identity import MuleIdentity, MuleIdentityKind
from mule.effects._lifecycle import (
    RunEnd,
    RunStatus,
)
from mule.effects._outcome import MuleRunOutcome
from mule.effects._protocol import (
    CancelRequested,
    Command,
    Finish,
)
from mule.effects._state import (
    Over,
    Phase,
    RunConfig,
    RunState,
)
from mule.effects._tools import (
    MuleToolResult,
)
from mule.pi import ZERO_USAGE, AssistantMessage, TextContent


class Txn:
    """The changes of one step, applied to a copy of the state at the end (local mutation only)."""

    __slots__ = (
        "cfg",
        "clock",
        "cmds",
        "context",
        "first_turn",
        "last_assistant",
        "limit",
        "more",
        "new",
        "next_id",
        "phase",
        "replay",
        "state",
        "turn",
        "turns",
        "usage",
    )

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.cfg: RunConfig = state.cfg  # read-only by convention (a slot reads faster)
        self.phase: Phase = state.phase
        self.next_id = state.next_id
        self.clock = state.clock
        self.context = state.context
        self.new = state.new
        self.turn = state.turn
        self.first_turn = state.first_turn
        self.more = state.more
        self.last_assistant = state.last_assistant
        self.usage = state.usage
        self.turns = state.turns
        self.limit = state.limit
        self.replay = state.replay
        self.cmds: list[Command] = []

    def ident(self, kind: MuleIdentityKind, parent: MuleIdentity | None) -> MuleIdentity:
        n = self.next_id
        self.next_id = n + 1
        return MuleIdentity(kind=kind, value=f"{kind}:{n}", parent=parent)

    def current_turn(self) -> MuleIdentity:
        assert self.turn is not None
        return self.turn

    def commit(self) -> tuple[RunState, tuple[Command, ...]]:
        return (
            RunState(
                cfg=self.cfg,
                phase=self.phase,
                next_id=self.next_id,
                clock=self.clock,
                context=self.context,
                new=self.new,
                turn=self.turn,
                first_turn=self.first_turn,
                more=self.more,
                last_assistant=self.last_assistant,
                usage=self.usage,
                turns=self.turns,
                limit=self.limit,
                lead=self.state.lead,
                replay=self.replay,
            ),
            tuple(self.cmds),
        )


def _finish(t: Txn, result: Result[MuleRunOutcome, MuleError]) -> None:
    t.phase = Over()
    t.cmds.append(Finish(result))


def _terminal(t: Txn, status: RunStatus) -> MuleIdentity:
    terminal = t.ident("terminal", t.cfg.run)
    t.cmds.append(RunEnd(run=t.cfg.run, terminal=terminal, outcome=status))
    return terminal


def complete_run(t: Txn) -> None:
    terminal = _terminal(t, "completed")
    message = t.last_assistant  # a resumed run sets it to resume.message before its turn ends
    assert message is not None
    outcome = MuleRunOutcome(
        status="completed",
        run=t.cfg.run,
        terminal=terminal,
        message=message,
        messages=t.new,
        all_messages=t.context[t.state.lead :],
        usage=t.usage,
        limit=t.limit,
    )
    _finish(t, Success(outcome))


def fail_run(t: Txn, error: MuleError) -> None:
    _terminal(t, "failed")
    _finish(t, Failure(error))


def cancel_run(t: Txn, fact: CancelRequested) -> None:
    t.clock = max(t.clock, fact.now_ms)
    terminal = _terminal(t, "cancelled")
    outcome = MuleRunOutcome(
        status="cancelled",
        run=t.cfg.run,
        terminal=terminal,
        message=_synthetic(t, "aborted", fact.reason),
        messages=t.new,
        all_messages=t.context[t.state.lead :],
        usage=t.usage,
    )
    _finish(t, Success(outcome))


def _synthetic(t: Txn, stop: str, reason: str) -> AssistantMessage:
    """Pi's Agent-style stand-in message for a run that ended without one."""
    m = t.cfg.model
    return AssistantMessage(
        content=(TextContent(""),),
        api=m.api,
        provider=m.provider,
        model=m.id,
        usage=ZERO_USAGE,
        stop_reason="aborted" if stop == "aborted" else "error",
        timestamp=t.clock,
        error_message=reason,
    )


def error_result(text: str, terminate: bool | None = None) -> MuleToolResult:
    return MuleToolResult(
        content=(TextContent(text),), details={}, is_error=True, terminate=terminate
    )
