"""The Pi wire codec: round trips, strictness, error paths, and golden JSON from Pi 1.6.0."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.pi import (
    FAILURE_STOP_REASONS,
    AssistantContent,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    Diagnostic,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    Message,
    Model,
    StartEvent,
    SystemMessage,
    TextContent,
    TextDeltaEvent,
    ThinkingBudgets,
    Tool,
    ToolCall,
    ToolResultMessage,
    TranscriptContext,
    Usage,
    UserContent,
    UserMessage,
    WireError,
    camel,
    decode,
    from_wire,
    get_current_system_prompt,
    get_current_tools,
    to_wire,
)
from mule.testing import strategies as ms

GOLDEN = Path(__file__).parents[1] / "golden"

# (decode type, value strategy, wire strategy) for every message and stream-event type
CASES: list[tuple[str, Any, Any, Any]] = [
    ("user", UserMessage, ms.user_messages(), ms.user_message_json()),
    ("assistant", AssistantMessage, ms.assistant_messages(), ms.assistant_message_json()),
    ("toolResult", ToolResultMessage, ms.tool_result_messages(), ms.tool_result_message_json()),
    ("system", SystemMessage, ms.system_messages(), ms.system_message_json()),
    ("message", Message, ms.messages(), ms.message_json()),
    ("usage", Usage, ms.usages(), ms.usage_json()),
    ("diagnostic", Diagnostic, ms.diagnostics(), ms.diagnostic_json()),
    ("model", Model, ms.models(), ms.model_json()),
    ("tool", Tool, ms.tools(), ms.tool_json()),
    ("context", Context, ms.contexts(), ms.context_json()),
    (
        "transcriptContext",
        TranscriptContext,
        ms.transcript_contexts(),
        ms.transcript_context_json(),
    ),
    ("userContent", UserContent, ms.user_contents(), ms.user_content_json()),
    (
        "assistantContent",
        AssistantContent,
        ms.assistant_contents(),
        ms.assistant_content_json(),
    ),
    ("event", AssistantMessageEvent, ms.assistant_message_events(), None),
    ("start", StartEvent, ms.start_events(), ms.assistant_message_event_json("start")),
    ("done", DoneEvent, ms.done_events(), ms.assistant_message_event_json("done")),
    ("error", ErrorEvent, ms.error_events(), ms.assistant_message_event_json("error")),
    *[
        (
            cls.type,
            cls,
            ms.block_events(cls),
            ms.assistant_message_event_json(cls.type),
        )
        for cls in ms.BLOCK_EVENT_CLASSES
    ],
]
IDS = [c[0] for c in CASES]
WIRE_CASES = [c for c in CASES if c[3] is not None]


def key_order(value: object) -> object:
    """Return the keys of every object in a JSON value, in order (`==` on dicts ignores it)."""
    if isinstance(value, dict):
        return [(k, key_order(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [key_order(v) for v in value]
    return None


def _no_nulls_for_unset_optionals(value: object, wire: object) -> None:
    """Walk a value and its wire form: an optional attribute left at None has no key at all."""
    if isinstance(value, tuple) and isinstance(wire, list):
        for v, w in zip(value, wire, strict=True):
            _no_nulls_for_unset_optionals(v, w)
        return
    if not attrs.has(type(value)):
        return
    assert isinstance(wire, dict)
    cls: Any = type(value)
    for a in attrs.fields(cls):
        if a.name == "extras":  # spread into the object: its keys, not an `extras` key
            assert all(k in wire for k in getattr(value, a.name) or {})
            continue
        key = "partial" if a.name == "_partial" else camel(a.name)
        v = getattr(value, "partial" if key == "partial" else a.name)
        if a.default is None and v is None:
            assert key not in wire, f"{type(value).__name__}.{a.name} written as null"
        else:
            assert key in wire
            _no_nulls_for_unset_optionals(v, wire[key])


@pytest.mark.parametrize(("name", "type_", "values", "wires"), CASES, ids=IDS)
@given(data=st.data())
def test_value_round_trip(name: str, type_: Any, values: Any, wires: Any, data: Any) -> None:
    """from_wire(T, to_wire(x)) == x; the wire form is plain JSON with no null optionals."""
    value = data.draw(values)
    wire = to_wire(value)
    assert json.loads(json.dumps(wire, allow_nan=False)) == wire
    assert from_wire(type_, wire) == value
    _no_nulls_for_unset_optionals(value, wire)


@pytest.mark.parametrize(
    ("name", "type_", "values", "wires"), WIRE_CASES, ids=[c[0] for c in WIRE_CASES]
)
@given(data=st.data())
def test_wire_round_trip(name: str, type_: Any, values: Any, wires: Any, data: Any) -> None:
    """to_wire(from_wire(T, j)) == j for JSON shaped like Pi's, in Pi's key order."""
    wire = data.draw(wires)
    again = to_wire(from_wire(type_, wire))
    assert again == wire
    assert key_order(again) == key_order(wire)


@given(ms.assistant_messages())
def test_assistant_strategy_keeps_the_error_message_contract(m: AssistantMessage) -> None:
    """Strategies draw errorMessage exactly for error/aborted messages."""
    assert (m.error_message is not None) == (m.stop_reason in FAILURE_STOP_REASONS)
    assert m.usage.total_tokens == (
        m.usage.input + m.usage.output + m.usage.cache_read + m.usage.cache_write
    )


@given(ms.assistant_message_events())
def test_event_strategy_points_at_matching_blocks(event: AssistantMessageEvent) -> None:
    """Block events index a block of their kind; end events repeat that block."""
    if isinstance(event, DoneEvent | ErrorEvent | StartEvent):
        return
    block = event.partial.content[event.content_index]
    kind = event.type.split("_")[0].replace("toolcall", "toolCall")
    assert block.type == kind
    if event.type == "toolcall_end":
        assert event.tool_call == block
    elif event.type.endswith("_end"):
        assert event.content == getattr(block, kind)  # type: ignore[union-attr]


def _add_junk(wire: Any, junk: Any) -> Any:
    """Return `wire` with an unknown key added to every object that is not free JSON."""
    if isinstance(wire, list):
        return [_add_junk(w, junk) for w in wire]
    if not isinstance(wire, dict):
        return wire
    free = {
        "arguments",
        "details",
        "compat",
        "parameters",
        "headers",
        "thinkingLevelMap",
        "sections",  # a system message's sections: every key is a section's name
    }
    out = {k: v if k in free else _add_junk(v, junk) for k, v in wire.items()}
    if wire.get("type") != "toolCall":  # a tool call keeps its unknown keys (ToolCall.extras)
        out["xNewerPiField"] = junk
    return out


@given(ms.message_json() | ms.assistant_message_event_json(), ms.json_values())
def test_unknown_keys_are_ignored_at_every_level(wire: Any, junk: Any) -> None:
    """Keys from newer Pi versions decode to the same value and are dropped on re-encoding."""
    type_ = AssistantMessageEvent if "type" in wire else Message
    assert from_wire(type_, _add_junk(wire, junk)) == from_wire(type_, wire)


def _user(block: Any) -> dict[str, Any]:
    return {"role": "user", "content": [block], "timestamp": 1}


BAD: list[tuple[Any, Any, str]] = [
    (Message, _user({"type": "text", "text": 5}), "$.content[0].text"),
    (Message, _user({"type": "video"}), "$.content[0]"),
    (Message, _user({"type": "image", "data": "x"}), "$.content[0].mimeType"),
    (Message, {"role": "user", "content": None, "timestamp": 0}, "$.content"),
    (Message, {"role": "user", "content": "x", "timestamp": 1.5}, "$.timestamp"),
    (Message, {"role": "robot"}, "$"),
    (Message, [], "$"),
    (
        Message,
        {
            "role": "toolResult",
            "toolCallId": "c",
            "toolName": "t",
            "content": [],
            "isError": 1,
            "timestamp": 0,
        },
        "$.isError",
    ),
    (Context, {"messages": [{"role": "user", "content": "x", "timestamp": 0}, 3]}, "$.messages[1]"),
    (Tool, {"name": "t", "description": "d", "parameters": [1]}, "$.parameters"),
    (ThinkingBudgets, {"low": "many"}, "$.low"),
]


@pytest.mark.parametrize(("type_", "wire", "path"), BAD)
def test_bad_data_raises_wire_error_naming_the_path(type_: Any, wire: Any, path: str) -> None:
    """Malformed input raises WireError; each fault names its JSON path."""
    with pytest.raises(WireError) as info:
        from_wire(type_, wire)
    assert any(e.endswith(f" @ {path}") for e in info.value.errors), info.value.errors


def test_bad_assistant_reports_every_fault_with_wire_names() -> None:
    """All faults are reported at once, with camelCase paths and readable reasons."""
    wire = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "a", "name": "b", "arguments": [1]}],
        "api": "a",
        "provider": "p",
        "model": "m",
        "usage": {**to_wire(Usage()), "cost": {**to_wire(Usage().cost), "cacheWrite": "x"}},
        "stopReason": "nope",
        "timestamp": 0,
    }
    with pytest.raises(WireError) as info:
        from_wire(Message, wire)
    assert set(info.value.errors) == {
        "expected a JSON object, got list @ $.content[0].arguments",
        "expected float, got str @ $.usage.cost.cacheWrite",
        "expected one of 'pending', 'stop', 'length', 'toolUse', 'error', 'aborted' @ $.stopReason",
    }
    assert str(info.value).startswith(
        "invalid SystemMessage | UserMessage | AssistantMessage | ToolResultMessage"
    )


def test_non_json_values_are_rejected_in_free_json_fields() -> None:
    """Sets, bytes and non-string keys are not JSON, even inside arguments."""
    for args in ({"a": {1, 2}}, {"a": b"x"}, {1: "x"}):
        with pytest.raises(WireError):
            from_wire(ToolCall, {"type": "toolCall", "id": "i", "name": "n", "arguments": args})


def test_decode_is_typed_and_strict_about_the_tag() -> None:
    """decode() checks the tag of a concrete class."""
    assert decode(ImageContent, {"type": "image", "data": "", "mimeType": "image/png"}) == (
        ImageContent("", "image/png")
    )
    with pytest.raises(WireError, match="expected 'image'"):
        decode(ImageContent, {"type": "text", "data": "", "mimeType": "image/png"})


def test_unset_optionals_are_omitted_and_defaults_written() -> None:
    """None optionals vanish; non-None defaults (empty args, zero usage) are written."""
    assert to_wire(TextContent("hi")) == {"type": "text", "text": "hi"}
    assert to_wire(ToolCall("i", "n")) == {
        "type": "toolCall",
        "id": "i",
        "name": "n",
        "arguments": {},
    }
    result = to_wire(ToolResultMessage("c", "t", (), False, 5))
    assert "details" not in result
    assert "usage" not in result
    assert to_wire(TextDeltaEvent(content_index=0, delta="d", partial=_assistant()))["partial"][
        "usage"
    ] == to_wire(Usage())


def _assistant() -> AssistantMessage:
    return AssistantMessage((), "api", "p", "m", Usage(), "stop", 0)


# ---------------------------------------------------------------------------- golden fixtures


def _load(name: str) -> list[Any]:
    data: list[Any] = json.loads((GOLDEN / name).read_text())
    return data


def _golden_params(name: str, key: str) -> list[Any]:
    return [pytest.param(row[key], id=row["name"]) for row in _load(name)]


def _golden_events() -> list[Any]:
    return [
        pytest.param(event, id=f"{row['name']}[{i}]:{event['type']}")
        for row in _load("streams.json")
        for i, event in enumerate(row["events"])
    ]


def _exact(type_: Any, wire: Any, expected: type[Any] | None = None) -> None:
    value = from_wire(type_, wire)
    if expected is not None:
        assert type(value) is expected
    assert to_wire(value) == wire


MESSAGE_TYPES: dict[str, type[Any]] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "toolResult": ToolResultMessage,
}


@pytest.mark.parametrize("wire", _golden_params("messages.json", "message"))
def test_golden_messages_round_trip_exactly(wire: Any) -> None:
    """Every message Pi produced decodes to its class and re-encodes to the same JSON."""
    _exact(Message, wire, MESSAGE_TYPES[wire["role"]])
    _exact(MESSAGE_TYPES[wire["role"]], wire)


@pytest.mark.parametrize("wire", _golden_events())
def test_golden_events_round_trip_exactly(wire: Any) -> None:
    """Every stream event Pi emitted decodes to its class and re-encodes to the same JSON."""
    value = from_wire(AssistantMessageEvent, wire)
    assert value.type == wire["type"]
    assert to_wire(value) == wire


@pytest.mark.parametrize("wire", _golden_params("models.json", "model"))
def test_golden_models_round_trip_exactly(wire: Any) -> None:
    """Pi's catalogue models (thinking maps, headers, compat) survive a round trip."""
    _exact(Model, wire, Model)


@pytest.mark.parametrize("wire", _golden_params("contexts.json", "context"))
def test_golden_contexts_round_trip_exactly(wire: Any) -> None:
    """Contexts with images and TypeBox tool schemas survive a round trip.

    The loop's (`{messages}` only, Pi 1.6.0's TranscriptContext) decode as that too.
    """
    _exact(Context, wire, Context)
    if set(wire) == {"messages"}:
        _exact(TranscriptContext, wire, TranscriptContext)


def test_golden_contexts_include_the_loops_transcripts() -> None:
    """The fixtures hold transcripts as the 1.6.0 loop sends them: a leading system message."""
    loop = [r["context"] for r in _load("contexts.json") if set(r["context"]) == {"messages"}]
    assert loop
    assert all(c["messages"][0]["role"] == "system" for c in loop)
    first = from_wire(TranscriptContext, loop[0])
    assert get_current_system_prompt(first.messages) == "Use tools."
    assert get_current_tools(first.messages)


def test_golden_fixtures_cover_the_protocol() -> None:
    """The fixtures exercise every event type, stop reason and the rarer optional fields."""
    events = {e["type"] for row in _load("streams.json") for e in row["events"]}
    assert events == set(ms.EVENT_TYPES)
    text = (GOLDEN / "messages.json").read_text()
    for needle in (
        '"redacted": true',
        '"thinkingSignature"',
        '"textSignature"',
        '"thoughtSignature"',
        '"diagnostics"',
        '"responseModel"',
        '"responseId"',
        '"details"',
        '"image"',
        '"stopReason": "aborted"',
        '"stopReason": "length"',
        '"stopReason": "toolUse"',
    ):
        assert needle in text, needle


NODE_MODULES = Path(__file__).parents[2] / "node" / "node_modules" / "@earendil-works"


@pytest.mark.pi
@pytest.mark.slow
def test_golden_fixtures_are_what_pi_generates(tmp_path: Path) -> None:
    """Rerunning generate.mjs against the installed Pi reproduces the committed fixtures."""
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "pi-ai").is_dir():
        pytest.skip("node or node/node_modules is missing (run ./dev setup)")
    subprocess.run(
        [node, str(GOLDEN / "generate.mjs"), str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(p.name for p in GOLDEN.glob("*.json"))
    for name in written:
        assert (tmp_path / name).read_text() == (GOLDEN / name).read_text(), name
