"""Positional makers for the objects every turn makes (`mule._fast_init.maker`).

The machine makes a new state per step and about 25 frozen attrs objects per turn with tools
(its events, identities, tool calls and result messages, the model's context); a maker sets
their slots without the class's call and keyword matching, about half the cost. Arguments go
in field order.
"""

from __future__ import annotations

from mule._fast_init import maker
from mule.effects._events import (
    MessageEnd,
    MessageStart,
    ModelPrompt,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from mule.effects._identity import MuleIdentity
from mule.effects._state import RunState
from mule.pi import ToolCall, ToolResultMessage, TranscriptContext

# Every step makes a new state (13 fields, which attrs' `__init__` sets one by one through
# `object.__setattr__`: about 3.8 of the 9 us the cheapest step took). In field order.
run_state = maker(RunState, defaults=True)
# (run, turn, message, value)
message_start = maker(MessageStart)
message_end = maker(MessageEnd)
# (run, turn)
turn_start = maker(TurnStart)
# (run, turn, message, tool_results)
turn_end = maker(TurnEnd)
# (run, turn, attempt, system_prompt)
model_prompt = maker(ModelPrompt)
# (run, turn, tool_call, call, replay)
tool_start = maker(ToolExecutionStart)
# (run, turn, tool_call, call, result, duration_ms)
tool_end = maker(ToolExecutionEnd, defaults=True)
# (kind, value, parent)
identity = maker(MuleIdentity, defaults=True)
# (messages,)
context = maker(TranscriptContext)
# (id, name, arguments, thought_signature, namespace, arguments_error, extras)
tool_call = maker(ToolCall, defaults=True)
# (tool_call_id, tool_name, content, is_error, timestamp, details, usage, duration_ms)
tool_result_message = maker(ToolResultMessage, defaults=True)
