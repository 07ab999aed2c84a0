"""The pure step is total: any fact in any phase gives a typed answer, never an exception.

Tests the private rules `mule.effects._transition.step` (with `PHASES`, `RULES` and `expects`;
its rule for a `StreamBatch` run on a `mule.effects._txn.Txn`) and
`mule.effects._checks.check_input`, over the facts of `mule.effects._protocol` in every phase of
`mule.effects._state`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from mule.effects import (
    MessageUpdate,
    MuleError,
    MuleIdentity,
    MulePortsInput,
    MuleRunOutcome,
    MuleToolExecutionPart,
    MuleToolRejection,
    MuleToolResult,
    RunEnd,
)
from mule.effects._checks import check_input
from mule.effects._protocol import (
    PULL_MODEL,
    Began,
    CancelRequested,
    Fact,
    Finish,
    KeyResolved,
    ListenerFailed,
    MessagesAnswered,
    RetryAfterAnswered,
    Slept,
    StopAnswered,
    StreamBatch,
    StreamExhausted,
    StreamIdled,
    StreamOpened,
    ToolExhausted,
    ToolPartArrived,
    ToolPrepared,
    WorkFailed,
)
from mule.effects._state import (
    AwaitingRetryAfter,
    AwaitingStop,
    BackingOff,
    NotStarted,
    Over,
    Phase,
    Polling,
    ResolvingKey,
    Streaming,
)
from mule.effects._transition import (
    EVENT_FACTS,
    RULES,
    expects,
    initial_state,
    step,
)
from mule.effects._transition import (
    PHASES as PHASE_TYPES,
)
from mule.effects._txn import Txn
from mule.pi import (
    ZERO_USAGE,
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    Model,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    UserMessage,
)

MODEL = Model(id="m", name="M", api="a", provider="p", base_url="")
TURN = MuleIdentity("turn", "turn:1")
MESSAGE = MuleIdentity("message", "message:2")
GOOD = AssistantMessage(
    content=(TextContent("x"),),
    api="a",
    provider="p",
    model="m",
    usage=ZERO_USAGE,
    stop_reason="stop",
    timestamp=1,
)
# What an untyped stream can push: a message whose usage no sum can add.
BROKEN = evolve(GOOD, usage=None)  # type: ignore[arg-type]
RESULT = MuleToolResult(content=(TextContent("r"),))

PHASES: list[Phase] = [
    NotStarted(),
    Polling("steering"),
    Polling("follow_up"),
    ResolvingKey(1),
    Streaming(1, TURN, MESSAGE, started=False),
    Streaming(1, TURN, MESSAGE, started=True),
    AwaitingRetryAfter(1, 10.0),
    BackingOff(1),
    AwaitingStop(more=False, message=GOOD, results=()),
    Over(),
]
FACTS: list[Fact] = [
    Began(5),
    KeyResolved("k"),
    StreamOpened(),
    TextDeltaEvent(content_index=0, delta="d", partial=GOOD),
    DoneEvent(reason="stop", message=GOOD),
    DoneEvent(reason="stop", message=BROKEN),
    StreamExhausted(),
    StreamIdled(None, 7),
    ToolPrepared(0, MuleToolRejection("no"), 1),
    ToolPartArrived(0, MuleToolExecutionPart("result", RESULT), 1),
    ToolExhausted(0),
    MessagesAnswered(()),
    StopAnswered(True),
    RetryAfterAnswered(None),
    Slept(),
    WorkFailed(MuleError("tool", "t")),
    CancelRequested("stop", 9),
    ListenerFailed(MuleError("listener", "l")),
    StreamBatch(()),
    StreamBatch((TextDeltaEvent(content_index=0, delta="d", partial=GOOD),)),
    StreamBatch((StartEvent(partial=GOOD), DoneEvent(reason="stop", message=BROKEN))),
]
# What a model stream may hand the machine in a batch (an untyped one: anything).
STREAM_EVENTS: list[Any] = [
    StartEvent(partial=GOOD),
    TextDeltaEvent(content_index=0, delta="a", partial=GOOD),
    TextDeltaEvent(content_index=0, delta="b", partial=GOOD),
    TextEndEvent(content_index=0, content="ab", partial=GOOD),
    DoneEvent(reason="stop", message=GOOD),
    ErrorEvent(reason="error", error=evolve(GOOD, stop_reason="error", error_message="e")),
    "not an event",
]
STREAMING = [p for p in PHASES if type(p) is Streaming]


def _state(phase: Phase) -> Any:
    inp = MulePortsInput(model=MODEL, system_prompt="s", messages=(UserMessage("hi", 1),))
    cfg = check_input(inp).unwrap()
    return evolve(initial_state(cfg, inp.messages), phase=phase, turn=TURN)


@given(st.sampled_from(PHASES), st.sampled_from(FACTS))
def test_any_fact_in_any_phase_is_answered_never_raised(phase: Phase, fact: Fact) -> None:
    """Expected or not, a fact yields commands; a run that ends has one run_end, then Finish."""
    state, commands = step(_state(phase), fact)
    ends = [c for c in commands if isinstance(c, RunEnd)]
    finishes = [c for c in commands if isinstance(c, Finish)]
    assert len(ends) <= 1
    assert len(finishes) <= 1
    if finishes:
        assert commands[-1] is finishes[0]
        assert type(state.phase) is Over
        result = finishes[0].result
        assert isinstance(result.value_or(None), MuleRunOutcome) or isinstance(
            finishes[0].error, MuleError
        )
    unexpected = type(phase) is not Over and not isinstance(fact, tuple(expects(type(phase))))
    if unexpected:  # a fact the phase does not wait for ends the run, typed
        assert [type(c) for c in commands] == [RunEnd, Finish]
        assert finishes[0].error is not None
        assert finishes[0].error.phase == "control"


def test_a_broken_terminal_message_fails_the_run_typed() -> None:
    """The step that would raise (usage None) ends the run: run_end(failed), MuleError(control)."""
    _, commands = step(_state(Streaming(1, TURN, MESSAGE, started=True)), FACTS[5])
    assert [type(c) for c in commands] == [RunEnd, Finish]
    end, finish = commands
    assert isinstance(end, RunEnd)
    assert end.outcome == "failed"
    assert isinstance(finish, Finish)
    assert finish.error is not None
    assert "AttributeError" in finish.error.message


def _one_by_one(state: Any, events: list[Any]) -> tuple[Any, list[Any]]:
    """Step each event as its own fact, as the interpreter did for a stream of single events.

    Returns the state and the commands, the pulls between the events left out.
    """
    commands: list[Any] = []
    for event in events:
        if type(event) not in EVENT_FACTS:  # what the interpreter made of it, one by one
            event = WorkFailed(MuleError("model", "the model stream yielded str", event))
        state, cmds = step(state, event)
        commands += cmds
        if cmds[-1:] != (PULL_MODEL,):
            break  # the attempt settled or the run ended: nothing more is pulled
        commands.pop()
    else:
        commands.append(PULL_MODEL)
    return state, commands


@given(st.sampled_from(STREAMING), st.lists(st.sampled_from(STREAM_EVENTS), max_size=6))
def test_a_batch_is_its_events_one_by_one(phase: Phase, events: list[Any]) -> None:
    """One `StreamBatch` gives the commands and the state of its events stepped one by one.

    (Events after the one that ends the attempt are dropped: a stream would never hand them
    on; the stream itself cuts a batch at its terminal event.)
    """
    state = _state(phase)
    after, commands = step(state, StreamBatch(tuple(events)))
    want_state, want = _one_by_one(state, events)
    assert list(commands) == want
    assert after == want_state


@given(st.sampled_from(STREAMING), st.lists(st.sampled_from(STREAM_EVENTS), max_size=6))
def test_steps_hot_path_for_a_batch_is_the_rule(phase: Phase, events: list[Any]) -> None:
    """`step` answers a batch of deltas without a transaction: exactly what its rule answers."""
    state = _state(phase)
    fact = StreamBatch(tuple(events))
    after, commands = step(state, fact)
    t = Txn(state)
    RULES[Streaming, StreamBatch](t, phase, fact)
    ruled, by_rule = t.commit()
    assert commands == by_rule
    assert after == ruled
    if after is state:  # the hot path: only the deltas' updates and the next pull
        assert all(type(c) is MessageUpdate for c in commands[:-1])


@given(st.lists(st.sampled_from(STREAM_EVENTS[1:4]), min_size=1, max_size=6))
def test_a_deltas_update_carries_the_ids_and_the_unbuilt_snapshot(events: list[Any]) -> None:
    """A started message's block event becomes its update: its ids, the event, the lazy snapshot.

    No other code makes one: the interpreter emits what `step` answers.
    """
    phase = Streaming(1, TURN, MESSAGE, started=True)
    state = _state(phase)
    after, commands = step(state, StreamBatch(tuple(events)))
    assert after is state
    assert commands[-1] is PULL_MODEL
    ids = (state.cfg.run, phase.turn, phase.message)
    assert list(commands[:-1]) == [MessageUpdate(*ids, e._partial, e) for e in events]
    for update, event in zip(commands, events, strict=False):
        assert type(update) is MessageUpdate
        assert update.event is event
        assert update._value is event._partial  # type: ignore[union-attr]  # the snapshot, unbuilt


def _doc_phase_table() -> dict[str, frozenset[str]]:
    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    section = text.split("## The phase table", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, frozenset[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`"):
            facts = cells[1].split(", ") if cells[1] else []
            rows[cells[0].strip("`")] = frozenset(f.strip("`") for f in facts)
    return rows


def test_the_documented_phase_table_is_the_dispatch_table() -> None:
    """docs/architecture.md's phase table lists exactly the facts `RULES` takes in each phase."""
    anywhere = {"CancelRequested", "ListenerFailed", "WorkFailed"}
    from_rules = {
        p.__name__: frozenset(
            f.__name__ for f in expects(p) if p is Over or f.__name__ not in anywhere
        )
        for p in PHASE_TYPES
    }
    assert _doc_phase_table() == from_rules
    running = [p for p in PHASE_TYPES if p is not Over]
    assert all({CancelRequested, ListenerFailed, WorkFailed} <= expects(p) for p in running)
