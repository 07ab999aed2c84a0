"""When is a prompt finished? A pure state machine over pi's run-level events.

pi may send several `agent_end`s for one prompt (auto-retry, overflow compaction). pi writes
`auto_retry_start`, `auto_retry_end{success:false}` and `compaction_start` synchronously right
after the `agent_end` that causes them, before it reads its next stdin line. So after each
`agent_end` the bridge sends a barrier command (`get_state`); if its response arrives and nothing
announced another attempt, the prompt is finished. No timers, no guessing.

pi >= 1.1 says so itself: every run ends with `agent_settled`, after its last `agent_end` and
whatever follows it (retries, compaction, queued messages that start another `agent_start`),
and the answer to a prompt says whether it `started` a run. A job of such a pi (`settles`,
learnt from pi's output: a `disposition`, `willRetry` or `agent_settled`) ends there, and
barriers are not sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias, final

from attrs import evolve, frozen

from mule.effects import RunStatus
from mule.pi import AssistantMessage
from mule.pirc._pi_events import AgentEnd, BridgeEvent, PiMessage

Phase: TypeAlias = Literal["waiting", "running", "settling", "retrying", "compacting", "done"]

# pi's `auto_retry_end.finalError` when its backoff was cancelled (`abort_retry`, or `abort`,
# which calls it). pi writes it from that path only (agent-session.js, `_handleRetryableError`),
# and never as a provider's error: those it retries match its retryable pattern, this does not.
RETRY_CANCELLED: Final = "Retry cancelled"


# Inputs: what the reader saw, in stdout order.
@final
@frozen
class Accepted:
    """pi accepted the prompt (its `response` arrived), with pi's `disposition` if it gave one.

    `started`: a run starts for it; `queued`: it went into the running one; `handled`: an
    extension took it and no run starts (pi >= 0.99 says which; None: an older pi).
    """

    disposition: str | None = None


@final
@frozen
class AgentStarted:
    """`agent_start`."""


@final
@frozen
class AgentEnded:
    """`agent_end` with this attempt's messages (and pi's `willRetry`, if it says)."""

    messages: tuple[PiMessage, ...]
    will_retry: bool | None = None


@final
@frozen
class RunSettled:
    """`agent_settled` (pi >= 1.1): the run is over, retries and queued messages included."""

    aborted: bool = False


@final
@frozen
class RetryStarted:
    """`auto_retry_start`."""


@final
@frozen
class RetryEnded:
    """`auto_retry_end`."""

    success: bool
    final_error: str | None = None


@final
@frozen
class CompactionStarted:
    """`compaction_start`."""


@final
@frozen
class CompactionEnded:
    """`compaction_end`; `will_retry` means pi starts a new run."""

    will_retry: bool


@final
@frozen
class BarrierPassed:
    """The response to barrier number `token`; `streaming` is pi's `isStreaming`."""

    token: int
    streaming: bool


@final
@frozen
class AbortRequested:
    """The host sent `abort` for this job."""


@final
@frozen
class ProcessGone:
    """pi exited (or the bridge tore it down)."""

    reason: str


JobInput: TypeAlias = (
    Accepted
    | AgentStarted
    | AgentEnded
    | RunSettled
    | RetryStarted
    | RetryEnded
    | CompactionStarted
    | CompactionEnded
    | BarrierPassed
    | AbortRequested
    | ProcessGone
)


# Outputs
@final
@frozen
class SendBarrier:
    """Send a barrier command tagged `token`."""

    token: int


@final
@frozen
class Finish:
    """The job is over."""

    outcome: RunStatus
    messages: tuple[PiMessage, ...]
    attempts: int
    error: str | None = None


JobAction: TypeAlias = SendBarrier | Finish


@final
@frozen
class JobState:
    """Where a job stands; `messages` are those of the latest `agent_end`.

    `settles`: pi writes `agent_settled` (>= 1.1), which alone ends the job; no barriers.
    `continued`: the current attempt is such a pi's continuation after an `agent_end` (queued
    messages), not a retry: its messages add to the last attempt's.
    """

    phase: Phase = "waiting"
    messages: tuple[PiMessage, ...] = ()
    attempts: int = 0
    barrier: int = 0
    aborted: bool = False
    retry_error: str | None = None
    settles: bool = False
    continued: bool = False


def outcome_of(
    messages: tuple[PiMessage, ...], aborted: bool, retry_error: str | None = None
) -> tuple[RunStatus, str | None]:
    """Classify a final attempt by its last assistant message."""
    last = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
    if last is None:
        return ("cancelled", "aborted") if aborted else ("completed", None)
    if last.stop_reason == "aborted":
        return "cancelled", last.error_message
    if last.stop_reason == "error":
        return ("cancelled" if aborted else "failed"), retry_error or last.error_message
    return "completed", None


def _finish(state: JobState, error: str | None = None) -> tuple[JobState, tuple[JobAction, ...]]:
    outcome, why = outcome_of(state.messages, state.aborted, state.retry_error)
    done = evolve(state, phase="done")
    return done, (Finish(outcome, state.messages, state.attempts, error or why),)


def _barrier(state: JobState, phase: Phase) -> tuple[JobState, tuple[JobAction, ...]]:
    token = state.barrier + 1
    return evolve(state, phase=phase, barrier=token), (SendBarrier(token),)


def step(state: JobState, event: JobInput) -> tuple[JobState, tuple[JobAction, ...]]:
    """Advance a job by one input; `done` absorbs everything."""
    phase = state.phase
    if phase == "done":
        return state, ()
    match event:
        case ProcessGone(reason=reason):
            done = evolve(state, phase="done")
            outcome: RunStatus = "cancelled" if state.aborted else "failed"
            return done, (Finish(outcome, state.messages, state.attempts, reason),)
        case AbortRequested():
            return evolve(state, aborted=True), ()
        case Accepted(disposition=disposition):
            if disposition is not None:
                state = evolve(state, settles=True)
                if disposition == "handled" and phase == "waiting":
                    return _finish(state)  # an extension took it: no run, no agent_settled
                return state, ()
            # A prompt handled without an agent run (an extension command) ends at this barrier.
            return _barrier(state, phase) if phase == "waiting" else (state, ())
        case AgentStarted():
            # A pi that settles goes on after an agent_end with what was queued too late for
            # its last turn: the same attempt, continued (a retry comes from "retrying").
            continued = phase == "settling" and state.settles and state.attempts > 0
            return evolve(state, phase="running", retry_error=None, continued=continued), ()
        case AgentEnded(messages=messages, will_retry=again):
            if state.continued:
                settled = evolve(state, messages=state.messages + messages, continued=False)
            else:
                settled = evolve(state, messages=messages, attempts=state.attempts + 1)
            if again is not None or state.settles:
                return evolve(settled, phase="settling", settles=True), ()
            return _barrier(settled, "settling")
        case RunSettled(aborted=aborted):
            return _finish(evolve(state, aborted=state.aborted or aborted))
        case RetryStarted():
            return evolve(state, phase="retrying"), ()
        case RetryEnded(success=ok, final_error=err):
            if ok:
                return state, ()
            if phase not in ("retrying", "settling"):
                return evolve(state, retry_error=err), ()
            # A cancelled backoff ends the job cancelled, whatever the host saw when it asked:
            # pi may read `abort_retry` in a backoff whose start the bridge has not read yet.
            cancelled = state.aborted or err == RETRY_CANCELLED
            ended = evolve(state, retry_error=err, aborted=cancelled)
            if state.settles:  # `agent_settled` follows
                return evolve(ended, phase="settling"), ()
            return _finish(ended)
        case CompactionStarted():
            return (evolve(state, phase="compacting"), ()) if phase == "settling" else (state, ())
        case CompactionEnded(will_retry=again):
            if phase != "compacting":
                return state, ()
            if again:
                return evolve(state, phase="retrying"), ()
            return (evolve(state, phase="settling"), ()) if state.settles else _finish(state)
        case BarrierPassed(token=token, streaming=streaming):
            if token != state.barrier or state.settles:
                return state, ()
            if phase == "settling" or (phase == "waiting" and not streaming):
                return _finish(state)
            return state, ()
    raise AssertionError(f"unhandled job input {event!r}")


def job_input(
    kind: object, record: Mapping[str, Any], events: Sequence[BridgeEvent]
) -> JobInput | None:
    """Return what a pi event record of type `kind` tells the job machine (None: nothing)."""
    match kind:
        case "agent_start":
            return AgentStarted()
        case "agent_end":
            ends = [e for e in events if isinstance(e, AgentEnd)]
            if not ends:
                return AgentEnded(())
            return AgentEnded(ends[0].messages, ends[0].will_retry)
        case "agent_settled":
            return RunSettled(record.get("aborted") is True)
        case "auto_retry_start":
            return RetryStarted()
        case "auto_retry_end":
            err = record.get("finalError")
            return RetryEnded(record.get("success") is True, err if isinstance(err, str) else None)
        case "compaction_start":
            return CompactionStarted()
        case "compaction_end":
            return CompactionEnded(record.get("willRetry") is True)
    return None


__all__ = [
    "RETRY_CANCELLED",
    "AbortRequested",
    "Accepted",
    "AgentEnded",
    "AgentStarted",
    "BarrierPassed",
    "CompactionEnded",
    "CompactionStarted",
    "Finish",
    "JobAction",
    "JobInput",
    "JobState",
    "Phase",
    "ProcessGone",
    "RetryEnded",
    "RetryStarted",
    "RunSettled",
    "SendBarrier",
    "job_input",
    "outcome_of",
    "step",
]
