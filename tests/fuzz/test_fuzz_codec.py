"""Fuzz the wire codecs (issue 17.2): Pi's values and mule's journal records.

Invariants: whatever text or data comes in, decoding raises only `WireError`; every value the
codec writes is UTF-8 encodable and reads back equal.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.effects import MULE_CODEC, event_from_record, event_to_record
from mule.pi import PI_CODEC, AssistantMessage, Message, Usage, WireError
from mule.testing import effects_strategies as es
from mule.testing import strategies as ps
from tests.fuzz.budget import fuzz_settings, tally
from tests.fuzz.hostile import damaged_text, depths, dumps, json_values, nested

pytestmark = pytest.mark.slow  # a few seconds of examples each


ASSISTANT = PI_CODEC.to_wire(
    AssistantMessage(
        content=(),
        api="openai-completions",
        provider="openai",
        model="m",
        usage=Usage(),
        stop_reason="stop",
        timestamp=1,
    )
)


@fuzz_settings(100)
@given(ps.messages())
def test_messages_round_trip(message: Message) -> None:
    tally("codec: message round trip")
    text = PI_CODEC.to_json(message)
    text.encode("utf-8")
    assert PI_CODEC.from_json(Message, text) == message


@fuzz_settings(100)
@given(es.mule_events())
def test_records_round_trip(event: Any) -> None:
    tally("codec: journal record round trip")
    record = event_to_record(event)
    record.encode("utf-8")
    if event.type != "message_update":  # stream-only records hold no snapshot
        assert MULE_CODEC.to_wire(event_from_record(record)) == MULE_CODEC.to_wire(event)


@fuzz_settings(150)
@given(st.data())
def test_damaged_message_text_fails_typed(data: st.DataObject) -> None:
    tally("codec: damaged message text")
    valid = PI_CODEC.to_json(data.draw(ps.messages()))
    text = data.draw(damaged_text(valid))
    with contextlib.suppress(WireError):
        PI_CODEC.from_json(Message, text)


@fuzz_settings(150)
@given(st.one_of(json_values, ps.message_json()), st.none() | depths, st.booleans())
def test_arbitrary_data_decodes_or_fails_typed(data: Any, depth: int | None, as_list: bool) -> None:
    tally("codec: arbitrary data")
    text = dumps(data)
    if depth is not None:
        data = nested(depth, as_list, data)
        opener, closer = ("[", "]") if as_list else ('{"a":', "}")
        text = opener * depth + text + closer * depth
        if not as_list:  # deep arguments inside an otherwise valid assistant message
            call = {"type": "toolCall", "id": "c", "name": "n", "arguments": data}
            data = {**ASSISTANT, "content": [call]}
    with contextlib.suppress(WireError):
        PI_CODEC.from_wire(Message, data)
    with contextlib.suppress(WireError):
        event_from_record(text)
