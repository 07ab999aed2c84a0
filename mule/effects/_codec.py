"""The one codec for mule's own values, on top of Pi's (`mule.pi.PI_CODEC.extend`, no mutation).

`MULE_CODEC` handles events, outcomes, checkpoints, tool results and execution parts, resume
points and identities, and every Pi value. An event has three forms:

- **full** (`event_to_wire`, `to_json`): every attribute. A `message_update` carries the
  response so far twice (`value`, and the Pi event's `partial`), as Pi's own events do.
- **streaming** (`update_to_wire`): a `message_update` in O(delta): its identities and the Pi
  event without any snapshot (no `partial`, no final message in `done`/`error`: the
  `message_end` that follows carries it); with `snapshot=True`, plus `value`. `mule serve`
  streams this form.
- **record** (`event_to_record`): what the journal and the DBOS log store: the full form, and
  a `message_update` as `{"type", "turn", "message", "event"}` with the turn's and message's
  ids and the streaming event. `event_from_record` decodes committed records; records older
  than this codec (done/error updates that kept their message) read the same.

Numbers are written as JavaScript writes them, so JSON re-written by mule matches pi's.
"""

from __future__ import annotations

from typing import Any

from mule.effects._identity import MuleIdentity
from mule.effects._lifecycle import EVENT_TYPES, MessageUpdate, MuleEvent
from mule.effects._outcome import MuleRunOutcome
from mule.effects._resume import MuleResume
from mule.effects._tools import (
    MuleToolExecutionPart,
    MuleToolResult,
    ToolCompleted,
    ToolPending,
    ToolStarted,
)
from mule.pi import (
    EVENT_CLASSES,
    PI_CODEC,
    AssistantMessage,
    WireCodec,
    WireError,
    loads,
    stringify,
)

MULE_CODEC: WireCodec = PI_CODEC.extend(
    (MuleIdentity, MuleToolResult, MuleToolExecutionPart, MuleResume, MuleRunOutcome),
    tagged={"type": EVENT_TYPES.values(), "state": (ToolPending, ToolStarted, ToolCompleted)},
)
"""mule's values and Pi's: extend it (`MULE_CODEC.extend`) for the values of a layer above."""

to_wire = MULE_CODEC.to_wire
from_wire = MULE_CODEC.from_wire
to_json = MULE_CODEC.to_json
from_json = MULE_CODEC.from_json

# Per Pi event class: the event without its snapshots (the streaming body).
_DELTA = {
    cls: MULE_CODEC.encoder(cls, omit=("partial", "message", "error")) for cls in EVENT_CLASSES
}
_IDENTITY = MULE_CODEC.encoder(MuleIdentity)
_ASSISTANT = MULE_CODEC.encoder(AssistantMessage)
_EVENT = {cls: MULE_CODEC.encoder(cls) for cls in EVENT_TYPES.values()}


def event_to_wire(event: MuleEvent) -> dict[str, Any]:
    """Return the full JSON form of a mule event (the seed's keys, camelCase).

    >>> from mule.effects._lifecycle import RunStart
    >>> event_to_wire(RunStart(run=MuleIdentity("run", "run:0")))
    {'type': 'run_start', 'run': {'kind': 'run', 'value': 'run:0'}, 'messages': []}
    """
    out: dict[str, Any] = _EVENT[type(event)](event)
    return out


def event_from_wire(data: object) -> MuleEvent:
    """Decode a mule event from its full JSON form; raise `mule.pi.WireError` on bad data."""
    tag = data.get("type") if isinstance(data, dict) else None
    cls = EVENT_TYPES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise WireError("MuleEvent", [f"unknown event type {tag!r} @ $.type"])
    event: MuleEvent = MULE_CODEC.from_wire(cls, data)
    return event


def update_to_wire(event: MessageUpdate, *, snapshot: bool = False) -> dict[str, Any]:
    """Return a `message_update` in its streaming form; `snapshot` adds `value` (a resync)."""
    pi = event.event
    out = {
        "type": "message_update",
        "run": _IDENTITY(event.run),
        "turn": _IDENTITY(event.turn),
        "message": _IDENTITY(event.message),
        "event": _DELTA[type(pi)](pi),
    }
    if snapshot:
        out["value"] = _ASSISTANT(event.value)
    return out


def event_to_record(event: MuleEvent) -> str:
    """Return the JSON text the journal and the DBOS log store for `event`."""
    if type(event) is MessageUpdate:
        pi = event.event
        return stringify(
            {
                "type": "message_update",
                "turn": event.turn.value,
                "message": event.message.value,
                "event": _DELTA[type(pi)](pi),
            }
        )
    return stringify(_EVENT[type(event)](event))


def event_from_record(text: str | bytes) -> MuleEvent:
    """Decode a stored record back to its event; raise `mule.pi.WireError` on a bad record.

    `message_update` records are stream-only (they hold no snapshot) and do not decode.
    """
    try:
        data = loads(text)  # mule.pi's bounded decoder: JsonError for depth or huge numbers
    except ValueError as exc:
        raise WireError("MuleEvent", [f"not JSON ({exc}) @ $"]) from exc
    if isinstance(data, dict) and data.get("type") == "message_update":
        raise WireError("MuleEvent", ["a message_update record holds no snapshot @ $.type"])
    return event_from_wire(data)


__all__ = [
    "MULE_CODEC",
    "event_from_record",
    "event_from_wire",
    "event_to_record",
    "event_to_wire",
    "from_json",
    "from_wire",
    "to_json",
    "to_wire",
    "update_to_wire",
]
