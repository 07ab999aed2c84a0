"""EventMapper: pi's recorded events become mule events with causal identities (section 5.2).

A partial is checked against the private rule `mule.pirc._mapper.WirePartial`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs
import pytest

from mule.effects import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    RunEnd,
    RunStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from mule.pi import (
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolResultMessage,
    UserMessage,
)
from mule.pirc import (
    AgentEnd,
    AutoRetryEnd,
    AutoRetryStart,
    BridgeEvent,
    EventMapper,
    ExtensionUIRequest,
    OtherPiEvent,
    QueueUpdate,
)
from mule.pirc._mapper import WirePartial
from tests.pirc.test_job import records

AME = "assistantMessageEvent"


def mapped(name: str) -> tuple[EventMapper, list[BridgeEvent]]:
    mapper = EventMapper()
    out: list[BridgeEvent] = []
    for rec in records(name):
        if rec["type"] != "response":
            out += mapper.map(rec)
    return mapper, out


def test_tool_run_identities_and_parents() -> None:
    """Run → turn → message; tool_call → its assistant message; tool_result → its tool_call."""
    mapper, evs = mapped("tool")
    evs += mapper.finish("completed")
    kinds = [type(e).__name__ for e in evs if not isinstance(e, MessageUpdate)]
    assert kinds[:3] == ["RunStart", "TurnStart", "MessageStart"]
    assert kinds[-3:] == ["TurnEnd", "AgentEnd", "RunEnd"]
    assert isinstance(evs[0], RunStart)
    run = evs[0].run
    assert run.kind == "run"
    assert run.parent is None
    turns = [e.turn for e in evs if isinstance(e, TurnStart)]
    assert len(turns) == 2
    assert all(t.kind == "turn" and t.parent == run for t in turns)
    starts = [e for e in evs if isinstance(e, MessageStart)]
    ends = [e for e in evs if isinstance(e, MessageEnd)]
    assert [s.message for s in starts] == [e.message for e in ends]  # same identity object
    assert isinstance(starts[0].value, UserMessage)
    assistant_1 = ends[1].message
    assert assistant_1.kind == "message"
    assert assistant_1.parent == turns[0]
    xs = next(e for e in evs if isinstance(e, ToolExecutionStart))
    xe = next(e for e in evs if isinstance(e, ToolExecutionEnd))
    assert xs.tool_call == xe.tool_call
    assert xs.tool_call.kind == "tool_call"
    assert xs.tool_call.parent == assistant_1
    assert xs.call == ToolCall(id="call_1", name="ls", arguments={"path": "."})
    assert xe.result.is_error is False
    assert "a.txt" in "".join(getattr(b, "text", "") for b in xe.result.content)
    result_msg = starts[2]
    assert isinstance(result_msg.value, ToolResultMessage)
    assert result_msg.message.kind == "tool_result"
    assert result_msg.message.parent == xs.tool_call
    ids = [e.message for e in evs if isinstance(e, MessageStart)] + turns + [run, xs.tool_call]
    assert len({i.value for i in ids}) == len(ids)  # unique within the run
    end = evs[-1]
    assert isinstance(end, RunEnd)
    assert end.outcome == "completed"
    assert end.terminal.kind == "terminal"
    assert end.terminal.parent == run
    turn_end = next(e for e in evs if isinstance(e, TurnEnd))
    assert [r.tool_call_id for r in turn_end.tool_results] == ["call_1"]


def test_updates_carry_lazy_snapshots_and_deltas() -> None:
    """message_update keeps the assistant identity; text deltas rebuild the final text."""
    _, evs = mapped("text")
    ups = [e for e in evs if isinstance(e, MessageUpdate)]
    assert ups
    end = [e for e in evs if isinstance(e, MessageEnd)][-1]
    assert all(u.message == end.message for u in ups)
    deltas = "".join(u.event.delta for u in ups if isinstance(u.event, TextDeltaEvent))
    assert deltas == "hello there"
    assert ups[-1].value.role == "assistant"


def test_made_delta_updates_hold_what_their_classes_would() -> None:
    """A delta's update, event and snapshot are made without their classes' calls, alike.

    Each is its class, frozen, with the fields a call would set; the snapshot decodes once.
    """
    mapper = EventMapper()
    recs = [r for r in records("text") if r["type"] != "response"]
    made: list[tuple[MessageUpdate, dict[str, Any]]] = []
    for rec in recs:
        for ev in mapper.map(rec):
            if isinstance(ev, MessageUpdate) and isinstance(ev.event, TextDeltaEvent):
                made.append((ev, rec))
    assert made
    for ev, rec in made:
        ame = rec[AME]
        assert type(ev) is MessageUpdate
        assert (ev.run.kind, ev.turn.kind, ev.message.kind) == ("run", "turn", "message")
        event = ev.event
        assert type(event) is TextDeltaEvent
        assert (event.content_index, event.delta) == (ame["contentIndex"], ame["delta"])
        value = ev.value
        assert value == WirePartial(rec["message"]).materialize()
        assert ev.value is value  # decoded once
        assert event.partial is value  # the event and the update share one snapshot
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            event.delta = "x"  # type: ignore[misc]
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            ev.run = ev.turn  # type: ignore[misc]


def test_updates_with_odd_fields_map_as_any_event_does() -> None:
    """Each delta kind maps to its event; a non-int index reads 0, a non-str delta ''.

    An update outside an open assistant message, or with no event mule knows, passes through.
    """
    mapper = EventMapper()
    mapper.map({"type": "turn_start"})
    recs = [r for r in records("text") if r["type"] != "response"]
    first = next(i for i, r in enumerate(recs) if r["type"] == "message_update")
    message = recs[first]["message"]
    out = mapper.map({"type": "message_update", "message": message})
    assert [type(e) for e in out] == [OtherPiEvent]  # no message_start yet
    for rec in recs[:first]:
        mapper.map(rec)
    kinds = {"text_delta": TextDeltaEvent, "thinking_delta": ThinkingDeltaEvent}
    kinds |= {"toolcall_delta": ToolCallDeltaEvent}
    for kind, cls in kinds.items():
        for index, delta, want in [(2, "d", (2, "d")), (True, 5, (0, "")), ("1", None, (0, ""))]:
            ame = {"type": kind, "contentIndex": index, "delta": delta}
            (ev,) = mapper.map({"type": "message_update", "message": message, **{AME: ame}})
            assert isinstance(ev, MessageUpdate)
            event: Any = ev.event
            assert (event.content_index, event.delta) == want
            assert type(event) is cls
    odd: list[Any] = [{"type": "nope"}, "text_delta"]
    for ame in odd:
        out = mapper.map({"type": "message_update", "message": message, AME: ame})
        assert [type(e) for e in out] == [OtherPiEvent]


def test_retry_chain_is_one_run() -> None:
    """Auto-retry: two agent_start/agent_end pairs, one RunStart; retry events pass through."""
    mapper, evs = mapped("retry_ok")
    evs += mapper.finish("completed")
    counts = Counter(type(e).__name__ for e in evs)
    assert counts["RunStart"] == 1
    assert counts["RunEnd"] == 1
    assert counts["AgentEnd"] == 2
    assert counts["TurnStart"] == 2
    retry = next(e for e in evs if isinstance(e, AutoRetryStart))
    assert (retry.attempt, retry.max_attempts, retry.error_message) == (1, 2, "500 boom")
    done = next(e for e in evs if isinstance(e, AutoRetryEnd))
    assert done.success
    run = next(e for e in evs if isinstance(e, RunStart)).run
    assert all(getattr(e, "run", run) == run for e in evs)
    assert isinstance(evs[-2], AgentEnd)


def test_pi_only_events_pass_through_typed() -> None:
    """Queue updates and UI requests become typed events; unknown types stay raw."""
    m = EventMapper()
    (q,) = m.map({"type": "queue_update", "steering": ["a"], "followUp": []})
    assert q == QueueUpdate(run=None, steering=("a",), follow_up=())
    (ui,) = m.map(
        {
            "type": "extension_ui_request",
            "id": "u1",
            "method": "select",
            "title": "T",
            "options": ["x", "y"],
            "timeout": 500,
        }
    )
    assert isinstance(ui, ExtensionUIRequest)
    assert (ui.id, ui.expects_answer, ui.title, ui.options, ui.timeout_ms) == (
        "u1",
        True,
        "T",
        ("x", "y"),
        500.0,
    )
    (note,) = m.map({"type": "extension_ui_request", "id": "u2", "method": "notify"})
    assert isinstance(note, ExtensionUIRequest)
    assert not note.expects_answer
    (other,) = m.map({"type": "brand_new", "x": 1})
    assert isinstance(other, OtherPiEvent)
    assert other.data["x"] == 1


def test_finish_without_agent_run_still_brackets_the_run() -> None:
    """A job with no agent run (extension command) still gets RunStart then RunEnd."""
    m = EventMapper()
    run = m.begin()
    evs = m.finish("completed")
    assert [type(e).__name__ for e in evs] == ["RunStart", "RunEnd"]
    assert all(e.run == run for e in evs)
    assert m.finish("completed") == []
