"""Hypothesis strategies for every mule.pi type, and for its Pi wire JSON.

Two families, built independently so that each can check the other:

- value strategies (`text_contents()`, `assistant_messages()`, `assistant_message_events()`, ...)
  draw mule.pi objects;
- wire strategies (`text_content_json()`, `message_json()`, `assistant_message_event_json()`, ...)
  draw the JSON Pi itself would write (plain dicts, lists and scalars, camelCase keys, unset
  optionals omitted), as `json.loads` would return it.

Every drawn value is valid by Pi's contract:

- `errorMessage` is present exactly when `stopReason` is "error" or "aborted";
- tool-call `arguments` are JSON objects; usage counts are non-negative and `totalTokens` and
  `cost.total` are the sums of their parts (unless `cost.totalFromProvider` says the provider
  billed the total);
- a partial assistant message (in `start` and block events) is "pending" or carries the reason
  the provider already sent, and has no `durationMs` or `thinkingLevel` while "pending";
- a block event's `contentIndex` points at a block of its kind in `partial`, `*_end` events repeat
  that block's text (or the tool call), `done`/`error` reasons equal the message's stop reason;
- integers stay within JavaScript's safe range and floats are finite.

Requires `hypothesis` (a test dependency). Example::

    from hypothesis import given
    from mule.pi import Message, from_wire, to_wire
    from mule.testing import strategies as ms

    @given(ms.messages())
    def test_round_trip(m):
        assert from_wire(Message, to_wire(m)) == m
"""

from mule.testing._strategy_scalars import (
    MAX_SAFE_INTEGER,
    json_objects,
    json_values,
    timestamps,
)
from mule.testing._strategy_values import (
    BLOCK_EVENT_CLASSES,
    assistant_contents,
    assistant_message_events,
    assistant_messages,
    block_events,
    contexts,
    diagnostic_errors,
    diagnostics,
    done_events,
    error_events,
    image_contents,
    messages,
    model_costs,
    models,
    start_events,
    system_messages,
    text_contents,
    thinking_budgets,
    thinking_contents,
    tool_calls,
    tool_result_messages,
    tools,
    transcript_contexts,
    usage_costs,
    usages,
    user_contents,
    user_messages,
)
from mule.testing._strategy_wire import (
    EVENT_TYPES,
    assistant_content_json,
    assistant_message_event_json,
    assistant_message_json,
    context_json,
    diagnostic_json,
    image_content_json,
    message_json,
    model_json,
    system_message_json,
    text_content_json,
    thinking_content_json,
    tool_call_json,
    tool_json,
    tool_result_message_json,
    transcript_context_json,
    usage_json,
    user_content_json,
    user_message_json,
)

__all__ = [
    "BLOCK_EVENT_CLASSES",
    "EVENT_TYPES",
    "MAX_SAFE_INTEGER",
    "assistant_content_json",
    "assistant_contents",
    "assistant_message_event_json",
    "assistant_message_events",
    "assistant_message_json",
    "assistant_messages",
    "block_events",
    "context_json",
    "contexts",
    "diagnostic_errors",
    "diagnostic_json",
    "diagnostics",
    "done_events",
    "error_events",
    "image_content_json",
    "image_contents",
    "json_objects",
    "json_values",
    "message_json",
    "messages",
    "model_costs",
    "model_json",
    "models",
    "start_events",
    "system_message_json",
    "system_messages",
    "text_content_json",
    "text_contents",
    "thinking_budgets",
    "thinking_content_json",
    "thinking_contents",
    "timestamps",
    "tool_call_json",
    "tool_calls",
    "tool_json",
    "tool_result_message_json",
    "tool_result_messages",
    "tools",
    "transcript_context_json",
    "transcript_contexts",
    "usage_costs",
    "usage_json",
    "usages",
    "user_content_json",
    "user_contents",
    "user_message_json",
    "user_messages",
]
