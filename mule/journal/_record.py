"""How each run event is stored: its JSON, and whether it is a durability point."""

from __future__ import annotations

import json
from typing import Any

import attrs

from mule.effects._codec import event_to_wire
from mule.effects._events import MessageUpdate, MuleEvent
from mule.pi._codec import camel, to_wire

# Events after which the journal commits before the listener returns. The core awaits the
# listener before acting on the event, so a commit here happens-before the effect it enables.
COMMIT_POINTS = frozenset(
    {
        "run_start",
        "tool_execution_start",
        "tool_execution_end",
        "message_end",
        "turn_end",
        "run_end",
    }
)
# Events the fold never needs: skipped when recovering.
STREAM_ONLY = ("message_update", "tool_execution_update")


def _compact_update(event: MessageUpdate) -> dict[str, Any]:
    """Return a message_update without its response-so-far snapshot (O(delta), not O(message))."""
    pi = event.event
    body: dict[str, Any] = {"type": pi.type}
    for a in attrs.fields(type(pi)):
        if a.name == "_partial":
            continue
        body[camel(a.name)] = to_wire(getattr(pi, a.name))
    return {
        "type": "message_update",
        "turn": event.turn.value,
        "message": event.message.value,
        "event": body,
    }


def encode(event: MuleEvent) -> str:
    """Return the stored JSON of an event (message_update in compact form)."""
    data = _compact_update(event) if type(event) is MessageUpdate else event_to_wire(event)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


__all__ = ["COMMIT_POINTS", "STREAM_ONLY", "encode"]
