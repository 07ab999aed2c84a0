"""pi 1.6.0's RPC protocol, replayed from real recordings (tests/pirc/recorded/pi-1.6.0).

Deltas only on `message_update` (the bridge builds the response so far), `agent_settled` ends a
run, prompt answers carry a `disposition`, and new events and commands are typed.

Tests the private rules `mule.pirc._job.step` (the job machine) and
`mule.pirc._session_data.disposition_of` on pi 1.6.0's records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.effects import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    RunEnd,
    RunStart,
    ToolExecutionEnd,
)
from mule.pi import (
    AssistantMessage,
    Message,
    TextContent,
    TextDeltaEvent,
    ThinkingContent,
    ToolCall,
    ToolCallStartEvent,
    UserMessage,
    text_of,
)
from mule.pirc import (
    AgentEnd,
    AgentSettled,
    BashExecutionUpdate,
    BridgeEvent,
    ClearedQueue,
    EntryAppended,
    EventMapper,
    LineDecoder,
    OtherPiEvent,
    QueueUpdate,
    SessionEntries,
    SessionTree,
    StreamedDelta,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
    TreeNode,
    delta_record,
)
from mule.pirc._job import (
    Accepted,
    AgentEnded,
    AgentStarted,
    BarrierPassed,
    Finish,
    JobInput,
    JobState,
    RetryEnded,
    RetryStarted,
    RunSettled,
    SendBarrier,
    job_input,
    step,
)
from mule.pirc._session_data import disposition_of

RECORDED = Path(__file__).parent / "recorded" / "pi-1.6.0"
ALL = sorted(RECORDED.glob("*.jsonl"))


def records(name: str) -> list[dict[str, Any]]:
    lines = (RECORDED / f"{name}.jsonl").read_bytes().split(b"\n")
    return [json.loads(line) for line in lines if line]


def replay(recs: list[dict[str, Any]]) -> tuple[JobState, list[Finish], list[BridgeEvent]]:
    """Feed a recorded run to the job machine and the mapper, as the bridge does."""
    state, finishes, events = JobState(), [], []
    mapper = EventMapper()
    mapper.begin()

    def feed(inp: JobInput) -> None:
        nonlocal state
        state, actions = step(state, inp)
        assert not any(isinstance(a, SendBarrier) for a in actions)  # pi says when it is over
        for a in actions:
            if isinstance(a, Finish):
                finishes.append(a)
                events.extend(mapper.finish(a.outcome))

    for rec in recs:
        if rec["type"] == "response":
            if rec.get("id") == "p1":
                feed(Accepted(disposition_of(rec.get("data"))))
            continue
        evs = mapper.map(rec)
        events.extend(evs)
        inp = job_input(rec["type"], rec, evs)
        if inp is not None and state.phase != "done":
            feed(inp)
    return state, finishes, events


def last_text(fin: Finish) -> str:
    msg = fin.messages[-1]
    assert isinstance(msg, AssistantMessage)
    return text_of(msg)


@pytest.mark.parametrize(
    ("name", "outcome", "text", "attempts"),
    [
        ("text", "completed", "hello there", 1),
        ("thinking", "completed", "thought it over", 1),
        ("tool", "completed", "done", 1),
        ("tool_pieces", "completed", "ok", 1),
        ("bash_tool", "completed", "ran", 1),
        ("retry_ok", "completed", "recovered", 2),
        ("ext_ui_details", "completed", "answered", 1),
        ("large_output", "completed", "big done", 1),
        ("steer_follow_up", "completed", "followed", 1),
        ("abort", "cancelled", "", 1),
    ],
)
def test_recorded_runs_end_once_at_agent_settled(
    name: str, outcome: str, text: str, attempts: int
) -> None:
    """Each job ends exactly once, at pi's `agent_settled`, with the last `agent_end`'s messages."""
    recs = records(name)
    state, fins, events = replay(recs)
    assert state.phase == "done"
    assert [f.outcome for f in fins] == [outcome]
    assert fins[0].attempts == attempts
    if text:
        assert last_text(fins[0]) == text
    assert sum(isinstance(e, RunStart) for e in events) == 1
    assert sum(isinstance(e, RunEnd) for e in events) == 1
    # ... and not before: everything up to agent_settled was read first
    settled = max(i for i, r in enumerate(recs) if r["type"] == "agent_settled")
    assert replay(recs[:settled])[1] == []


def test_exhausted_and_refused_retries_fail_with_pis_error() -> None:
    """Retries exhausted: failed after three attempts; a 400 is not retried."""
    _, fins, _ = replay(records("retry_exhausted"))
    assert [(f.outcome, f.attempts) for f in fins] == [("failed", 3)]
    assert fins[0].error is not None
    assert fins[0].error.startswith("500")
    _, fins, _ = replay(records("not_retryable"))
    assert [(f.outcome, f.attempts) for f in fins] == [("failed", 1)]
    assert fins[0].error is not None
    assert fins[0].error.startswith("400")


def test_steer_and_follow_up_run_inside_the_job_before_it_settles() -> None:
    """Pi runs queued messages between `agent_end` and `agent_settled`: one job, three answers."""
    _, _, events = replay(records("steer_follow_up"))
    answers = [
        text_of(e.value)
        for e in events
        if isinstance(e, MessageEnd) and isinstance(e.value, AssistantMessage)
    ]
    assert answers == ["first answer", "steered", "followed"]
    assert {e.run for e in events if e.run is not None} == {events[0].run}


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_every_delta_is_an_update_whose_partial_ends_as_message_end(path: Path) -> None:
    """The response built from deltas is, at its last update, what `message_end` holds."""
    mapper = EventMapper()
    mapper.begin()
    last: MessageUpdate | None = None
    checked = 0
    for rec in records(path.stem):
        if rec["type"] == "response":
            continue
        evs = mapper.map(rec)
        if rec["type"] == "message_update":
            assert [type(e) for e in evs] == [MessageUpdate], rec
            (last,) = evs  # type: ignore[assignment]
        if isinstance(rec.get("message"), dict) and rec["message"].get("role") == "assistant":
            if rec["type"] == "message_start":
                last = None
            elif rec["type"] == "message_end" and last is not None:
                (end,) = evs
                assert isinstance(end, MessageEnd)
                final = end.value
                assert isinstance(final, AssistantMessage)
                partial = last.value
                assert [_block(b) for b in partial.content] == [_block(b) for b in final.content]
                assert partial.usage == final.usage
                assert (partial.api, partial.provider, partial.model, partial.timestamp) == (
                    final.api,
                    final.provider,
                    final.model,
                    final.timestamp,
                )
                checked += 1
    if any(r.get("type") == "message_update" for r in records(path.stem)):
        assert checked > 0


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_the_bridge_maps_a_delta_from_its_parts_as_from_its_record(path: Path) -> None:
    """`LineDecoder.read` + `EventMapper.delta` (the bridge's) make what json.loads + map make."""
    by_record, by_parts = EventMapper(), EventMapper()
    by_record.begin()
    by_parts.begin()
    read = LineDecoder().read
    parts = 0
    for line in path.read_bytes().splitlines():
        rec = json.loads(line)
        if rec["type"] == "response":
            continue
        got = read(line)
        assert got is not None
        if isinstance(got, tuple):
            parts += 1
            assert delta_record(got) == rec
            assert [by_parts.delta(got)] == by_record.map(rec), rec
        else:
            assert by_parts.map(got) == by_record.map(rec), rec
    if any(b'_delta"' in line for line in path.read_bytes().splitlines()):
        assert parts > 0


def test_a_delta_out_of_place_maps_as_its_record() -> None:
    """A delta with no assistant message streaming is passed on raw, as `map` passes its record."""
    parts: StreamedDelta = ("text_delta", 0, "hi", {"input": 1})
    for begun in (False, True):
        by_record, by_parts = EventMapper(), EventMapper()
        if begun:
            by_record.begin()
            by_parts.begin()
        got = by_parts.delta(parts)
        assert isinstance(got, OtherPiEvent)
        assert [got] == by_record.map(delta_record(parts))


def _block(b: object) -> object:
    """Return a block's content (text, thinking, or a call's id, name and arguments)."""
    if isinstance(b, TextContent):
        return ("text", b.text)
    if isinstance(b, ThinkingContent):
        return ("thinking", b.thinking)
    assert isinstance(b, ToolCall)
    return ("toolCall", b.id, b.name, b.arguments)


def test_streaming_snapshots_are_immutable_and_lazy() -> None:
    """Each update's partial is the response as of that delta, however later ones grow it."""
    _, _, events = replay(records("steer_follow_up"))
    updates = [e for e in events if isinstance(e, MessageUpdate)]
    texts = [text_of(u.value) for u in updates if isinstance(u.event, TextDeltaEvent)]
    first = [t for t in texts if "first answer".startswith(t) and t]
    assert first == sorted(first, key=len)
    assert first[-1] == "first answer"
    assert len(set(first)) == len(first)


def test_tool_call_start_names_the_call() -> None:
    """`toolcall_start`'s `id` and `toolName` (pi >= 0.84.3) are in the partial at once."""
    _, _, events = replay(records("tool"))
    (start,) = [
        e
        for e in events
        if isinstance(e, MessageUpdate) and isinstance(e.event, ToolCallStartEvent)
    ]
    (call,) = start.value.content
    assert isinstance(call, ToolCall)
    assert (call.id, call.name) == ("call_1", "ls")


def test_usage_on_updates_reaches_the_partial() -> None:
    """The top-level `usage` of an update is the partial's usage."""
    _, _, events = replay(records("thinking"))
    usages = [e.value.usage.total_tokens for e in events if isinstance(e, MessageUpdate)]
    assert usages[-1] == 42
    thinking = [e for e in events if isinstance(e, MessageUpdate)][-1].value.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking == "let me think"


def test_new_events_are_typed() -> None:
    """agent_settled, willRetry, queue_update and bash_execution_update pass through typed."""
    _, _, events = replay(records("abort"))
    (settled,) = [e for e in events if isinstance(e, AgentSettled)]
    assert settled.aborted
    assert [e.will_retry for e in events if isinstance(e, AgentEnd)] == [False]
    _, _, events = replay(records("retry_ok"))
    assert [e.will_retry for e in events if isinstance(e, AgentEnd)] == [True, False]
    _, _, events = replay(records("steer_follow_up"))
    assert any(isinstance(e, QueueUpdate) and e.steering == ("change course",) for e in events)
    mapper = EventMapper()
    bash = [e for r in records("commands") if r["type"] != "response" for e in mapper.map(r)]
    updates = [e for e in bash if isinstance(e, BashExecutionUpdate)]
    assert [(e.id, e.delta) for e in updates] == [("c5", "out\n"), ("c5", "err\n")]


# mule.pi's messages: pi 1.6.0's system message maps as the others once the model has it
# (the loop16 branch adds `SystemMessage` to `Message`); until then it passes raw.
MODELS_SYSTEM = "system" in {cls.role for cls in get_args(Message)}


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_no_event_passes_raw(path: Path) -> None:
    """Every event of pi 1.6.0 maps to a mule or typed pi event (system messages: see above)."""
    _, _, events = replay(records(path.stem))
    raw = [e for e in events if isinstance(e, OtherPiEvent)]
    if MODELS_SYSTEM:
        assert raw == []
    else:
        assert all(e.data.get("message", {}).get("role") == "system" for e in raw), raw[:1]


def test_command_answers_are_typed() -> None:
    """clear_queue, get_entries, get_tree, get_available_thinking_levels as pi answered them."""
    answers = {r["command"]: r for r in records("commands") if r["type"] == "response"}
    assert answers["get_available_thinking_levels"]["data"] == {"levels": ["off"]}
    assert ClearedQueue.from_data(answers["clear_queue"]["data"]) == ClearedQueue(
        steering=(), follow_up=()
    )
    entries = SessionEntries.from_data(answers["get_entries"]["data"])
    assert entries.entries
    assert entries.leaf_id == entries.entries[-1]["id"]
    tree = SessionTree.from_data(answers["get_tree"]["data"])
    assert tree.leaf_id == entries.leaf_id
    ids, stack = [], list(tree.roots)
    while stack:
        node = stack.pop()
        ids.append(node.entry["id"])
        stack.extend(node.children)
    assert sorted(ids) == sorted(e["id"] for e in entries.entries)
    assert answers["no_such_command"]["id"] == "c7"  # 1.6.0 echoes the id of an unknown command


def test_a_session_tree_deeper_than_the_recursion_limit_is_read() -> None:
    """A long linear session nests as deep as it has entries: read without recursion."""
    node: dict[str, Any] = {"entry": {"id": "e0"}, "children": []}
    root = node
    for i in range(1, 5000):
        child: dict[str, Any] = {"entry": {"id": f"e{i}"}, "children": []}
        node["children"].append(child)
        node = child
    tree = SessionTree.from_data({"tree": [root], "leafId": "e4999"})
    depth, cur = 0, tree.roots[0]
    while cur.children:
        (cur,) = cur.children
        depth += 1
    assert (depth, cur.entry["id"], tree.leaf_id) == (4999, "e4999", "e4999")


@given(
    st.recursive(
        st.none() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_malformed_command_answers_never_raise(data: Any) -> None:
    """Whatever pi answers, the typed readers return a value."""
    for cls in (ClearedQueue, SessionEntries, SessionTree):
        cls.from_data(data)
        cls.from_data({"tree": data, "entries": data, "steering": data, "followUp": data})
    assert disposition_of(data) is None or disposition_of(data) in ("started", "queued", "handled")


def test_settling_jobs_follow_dispositions_and_ignore_barriers() -> None:
    """A `handled` prompt ends at once; a settling job ignores a barrier and ends at settled."""
    state, actions = step(JobState(), Accepted("handled"))
    assert state.phase == "done"
    assert [type(a) for a in actions] == [Finish]
    state, _ = step(JobState(), Accepted("started"))
    for inp in (AgentStarted(), AgentEnded((), will_retry=True), RetryStarted()):
        state, actions = step(state, inp)
        assert actions == ()
    state, _ = step(state, AgentStarted())
    state, actions = step(state, AgentEnded((), will_retry=False))
    assert (state.phase, actions) == ("settling", ())
    state, actions = step(state, BarrierPassed(state.barrier, False))
    assert state.phase == "settling"
    state, actions = step(state, RetryEnded(False, "Retry cancelled"))
    assert state.phase == "settling"
    state, actions = step(state, RunSettled(aborted=False))
    assert state.phase == "done"
    assert [(a.outcome, a.attempts) for a in actions if isinstance(a, Finish)] == [("cancelled", 2)]


def test_message_start_of_the_assistant_maps() -> None:
    """The assistant's `message_start` (`stopReason: "pending"`) is a `MessageStart`."""
    _, _, events = replay(records("text"))
    starts = [e.value for e in events if isinstance(e, MessageStart)]
    (start,) = [m for m in starts if isinstance(m, AssistantMessage)]
    assert (start.stop_reason, start.content) == ("pending", ())


def test_tree_nodes_are_frozen() -> None:
    """Typed answers are values."""
    node = TreeNode(entry={"id": "x"}, children=())
    assert node == TreeNode(entry={"id": "x"}, children=())


def test_a_continuation_after_agent_end_adds_its_messages() -> None:
    """Messages queued too late for the last turn run after `agent_end`: one attempt, all kept."""
    first, second = (UserMessage("a", timestamp=1),), (UserMessage("b", timestamp=2),)
    state, _ = step(JobState(), Accepted("started"))
    inputs: tuple[JobInput, ...] = (AgentStarted(), AgentEnded(first, will_retry=False))
    for inp in (*inputs, AgentStarted()):
        state, _ = step(state, inp)
    state, _ = step(state, AgentEnded(second, will_retry=False))
    state, actions = step(state, RunSettled(aborted=False))
    (fin,) = actions
    assert isinstance(fin, Finish)
    assert (fin.messages, fin.attempts) == (first + second, 1)
    # a retry replaces the failed attempt's messages instead
    state, _ = step(JobState(), Accepted("started"))
    inputs = (AgentStarted(), AgentEnded(first, will_retry=True), RetryStarted(), AgentStarted())
    for inp in inputs:
        state, _ = step(state, inp)
    state, _ = step(state, AgentEnded(second, will_retry=False))
    _, (fin,) = step(state, RunSettled(aborted=False))
    assert isinstance(fin, Finish)
    assert (fin.messages, fin.attempts) == (second, 2)


def test_tool_ends_carry_duration_and_structured_content() -> None:
    """The bash tool's end: its `durationMs` and `structuredContent` (pi >= 0.84) are mapped."""
    _, _, events = replay(records("bash_tool"))
    (end,) = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert end.duration_ms is not None
    assert end.duration_ms >= 0
    assert end.result.structured_content == {
        "output": "hi\noops\n",
        "truncated": False,
        "exit_code": 0,
        "wall_time_seconds": 0,
    }
    _, _, events = replay(records("tool"))
    (end,) = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert end.result.structured_content is None


def test_session_events_map_typed_with_their_run() -> None:
    """entry_appended (a retry's context edit) and summarization retries, inside a job's run."""
    _, _, events = replay(records("retry_ok"))
    (run,) = {e.run for e in events if isinstance(e, RunStart)}
    edits = [e for e in events if isinstance(e, EntryAppended)]
    assert edits
    assert all(e.run == run and e.entry["type"] == "context_edit" for e in edits)
    mapper = EventMapper()
    run = mapper.begin()
    recs: list[dict[str, Any]] = [
        {
            "type": "summarization_retry_scheduled",
            "attempt": 1,
            "maxAttempts": 3,
            "delayMs": 20,
            "errorMessage": "503",
        },
        {"type": "summarization_retry_attempt_start", "source": "compaction", "reason": "overflow"},
        {"type": "summarization_retry_attempt_start", "source": "branchSummary"},
        {"type": "summarization_retry_finished"},
    ]
    out = [e for r in recs for e in mapper.map(r)]
    assert out == [
        SummarizationRetryScheduled(
            run=run, attempt=1, max_attempts=3, delay_ms=20, error_message="503"
        ),
        SummarizationRetryAttemptStart(run=run, source="compaction", reason="overflow"),
        SummarizationRetryAttemptStart(run=run, source="branchSummary", reason=None),
        SummarizationRetryFinished(run=run),
    ]
