"""The job state machine: a prompt is done at the last agent_end that no retry follows.

Tests the private rule `mule.pirc._job.step` (the job machine: `JobState`, its inputs and actions)
on recorded pi output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mule.pi import AssistantMessage, Usage
from mule.pirc import EventMapper
from mule.pirc._job import (
    AbortRequested,
    Accepted,
    AgentEnded,
    AgentStarted,
    BarrierPassed,
    CompactionEnded,
    CompactionStarted,
    Finish,
    JobAction,
    JobInput,
    JobState,
    ProcessGone,
    RetryEnded,
    RetryStarted,
    SendBarrier,
    job_input,
    step,
)

RECORDED = Path(__file__).parent / "recorded"
# Records pi writes synchronously after an agent_end, before it reads stdin again.
SYNC_AFTER_END = {"auto_retry_start", "auto_retry_end", "compaction_start"}


def records(name: str) -> list[dict[str, Any]]:
    lines = (RECORDED / f"{name}.jsonl").read_bytes().split(b"\n")
    return [json.loads(line) for line in lines if line]


def replay(recs: list[dict[str, Any]]) -> tuple[JobState, list[Finish]]:
    """Feed a recorded stream; a barrier answer lands where pi would write it."""
    state = JobState()
    finishes: list[Finish] = []
    barrier: int | None = None
    mapper = EventMapper()
    mapper.begin()

    def run(inp: JobInput) -> None:
        nonlocal state, barrier
        state, actions = step(state, inp)
        for a in actions:
            if isinstance(a, SendBarrier):
                barrier = a.token
            elif isinstance(a, Finish):
                finishes.append(a)

    for rec in recs:
        if rec["type"] == "response":
            if rec.get("id") == "p1":
                run(Accepted())
            continue
        if rec["type"] != "agent_start" and barrier is not None:
            nxt = rec["type"]
            if nxt not in SYNC_AFTER_END:
                run(BarrierPassed(barrier, False))
                barrier = None
        inp = job_input(rec["type"], rec, mapper.map(rec))
        if inp is not None:
            run(inp)
        if rec["type"] == "agent_start":
            barrier = None  # the accept barrier answered with isStreaming=true
    if barrier is not None:
        run(BarrierPassed(barrier, False))
    return state, finishes


def last_text(fin: Finish) -> str:
    msg = fin.messages[-1]
    assert isinstance(msg, AssistantMessage)
    return "".join(getattr(b, "text", "") for b in msg.content)


def test_text_run_finishes_once_completed() -> None:
    """One agent_end with stop: completed, with its messages."""
    state, fins = replay(records("text"))
    assert state.phase == "done"
    assert [f.outcome for f in fins] == ["completed"]
    assert last_text(fins[0]) == "hello there"
    assert fins[0].attempts == 1


def test_tool_run_finishes_after_the_final_turn() -> None:
    """A tool turn then a text turn: one job, four messages."""
    _, fins = replay(records("tool"))
    assert len(fins) == 1
    assert fins[0].outcome == "completed"
    assert [type(m).__name__ for m in fins[0].messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
    ]


def test_retry_then_success_takes_the_last_agent_end() -> None:
    """500 then success: two agent_ends, the job completes with the retry's answer."""
    _, fins = replay(records("retry_ok"))
    assert len(fins) == 1
    assert fins[0].outcome == "completed"
    assert fins[0].attempts == 2
    assert last_text(fins[0]) == "recovered"


def test_retries_exhausted_fail_with_the_final_error() -> None:
    """Every attempt fails: the job fails once, after the last agent_end, with pi's error."""
    _, fins = replay(records("retry_exhausted"))
    assert len(fins) == 1
    assert fins[0].outcome == "failed"
    assert fins[0].attempts == 3
    assert fins[0].error == "500 boom"


def test_non_retryable_error_fails_at_the_barrier() -> None:
    """A 400 is not retried: nothing follows agent_end, the barrier finishes the job as failed."""
    _, fins = replay(records("not_retryable"))
    assert [(f.outcome, f.error) for f in fins] == [("failed", "400 bad request")]


def test_an_early_barrier_would_be_wrong_so_order_matters() -> None:
    """The barrier answer only counts if it is the latest one sent."""
    s, acts = step(JobState(phase="running"), AgentEnded(()))
    assert acts == (SendBarrier(1),)
    s, _ = step(s, RetryStarted())
    s, acts = step(s, BarrierPassed(1, False))
    assert acts == ()  # retrying: the barrier does not end the job
    s, _ = step(s, AgentStarted())
    s, acts = step(s, AgentEnded(()))
    assert acts == (SendBarrier(2),)
    s, acts = step(s, BarrierPassed(1, False))
    assert acts == ()  # stale token
    s, acts = step(s, BarrierPassed(2, False))
    assert isinstance(acts[0], Finish)


def msg(stop: str, error: str | None = None) -> AssistantMessage:
    return AssistantMessage(
        content=(),
        api="a",
        provider="p",
        model="m",
        usage=Usage(),
        stop_reason=stop,  # type: ignore[arg-type]
        timestamp=0,
        error_message=error,
    )


@pytest.mark.parametrize(
    ("inputs", "outcome"),
    [
        # abort during a run: aborted message → cancelled
        (
            [
                AgentStarted(),
                AbortRequested(),
                AgentEnded((msg("aborted", "x"),)),
                BarrierPassed(1, False),
            ],
            "cancelled",
        ),
        # abort during the retry backoff: pi ends the retry with "Retry cancelled"
        (
            [
                AgentStarted(),
                AgentEnded((msg("error", "500"),)),
                RetryStarted(),
                AbortRequested(),
                RetryEnded(False, "Retry cancelled"),
            ],
            "cancelled",
        ),
        # overflow compaction that retries, then success
        (
            [
                AgentStarted(),
                AgentEnded((msg("error", "context overflow"),)),
                CompactionStarted(),
                CompactionEnded(will_retry=True),
                AgentStarted(),
                AgentEnded((msg("stop"),)),
                BarrierPassed(2, False),
            ],
            "completed",
        ),
        # pi dies mid-run
        ([AgentStarted(), ProcessGone("killed")], "failed"),
    ],
)
def test_recorded_edge_sequences(inputs: list[JobInput], outcome: str) -> None:
    """Abort, abort during backoff, overflow compaction and process death end as expected."""
    s = JobState()
    fins: list[JobAction] = []
    for inp in inputs:
        s, acts = step(s, inp)
        fins += [a for a in acts if isinstance(a, Finish)]
    assert len(fins) == 1
    assert isinstance(fins[0], Finish)
    assert fins[0].outcome == outcome


def test_a_prompt_without_agent_run_ends_at_its_barrier() -> None:
    """An extension command that starts no run: accepted, barrier says not streaming → done."""
    s, acts = step(JobState(), Accepted())
    assert acts == (SendBarrier(1),)
    s2, acts = step(s, BarrierPassed(1, True))
    assert acts == ()  # pi is streaming: agent_start is on its way
    s3, acts = step(s, BarrierPassed(1, False))
    assert s3.phase == "done"
    assert acts == (Finish("completed", (), 0, None),)
    del s2


def test_done_absorbs_everything() -> None:
    """Nothing restarts a finished job."""
    done = JobState(phase="done")
    for inp in (AgentStarted(), AgentEnded(()), ProcessGone("x"), BarrierPassed(0, False)):
        assert step(done, inp) == (done, ())
