"""Wire form of mule's own values (events, outcomes, checkpoints), through mule.pi's codec."""

from __future__ import annotations

from typing import Any

from mule.effects._events import EVENT_TYPES, MessageUpdate, MuleEvent
from mule.effects._identity import MuleIdentity
from mule.effects._settings import MuleResume, MuleRunOutcome
from mule.effects._tools import (
    MuleToolExecutionPart,
    MuleToolResult,
    ToolCompleted,
    ToolPending,
    ToolStarted,
)
from mule.pi._codec import _CONVERTER, _TAG_KEY, _register_class, from_wire, to_wire
from mule.pi._events import AssistantMessageEvent
from mule.pi._messages import AssistantMessage

_CHECKPOINTS: tuple[type[Any], ...] = (ToolPending, ToolStarted, ToolCompleted)
_EVENTS: tuple[type[Any], ...] = tuple(c for c in EVENT_TYPES.values() if c is not MessageUpdate)
for _cls in _CHECKPOINTS:
    _TAG_KEY[_cls] = ("state", _cls.state)
for _cls in _EVENTS:
    _TAG_KEY[_cls] = ("type", _cls.type)
_PLAIN: tuple[type[Any], ...] = (
    MuleIdentity,
    MuleToolResult,
    MuleToolExecutionPart,
    ToolPending,
    ToolStarted,
    ToolCompleted,
    MuleResume,
    MuleRunOutcome,
    *_EVENTS,
)
for _cls in _PLAIN:
    _register_class(_CONVERTER, _cls)


def _unstructure_update(ev: MessageUpdate) -> dict[str, Any]:
    return {
        "type": "message_update",
        "run": to_wire(ev.run),
        "turn": to_wire(ev.turn),
        "message": to_wire(ev.message),
        "value": to_wire(ev.value),
        "event": to_wire(ev.event),
    }


def _structure_update(data: Any, _: Any) -> MessageUpdate:
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return MessageUpdate(
        run=_CONVERTER.structure(data["run"], MuleIdentity),
        turn=_CONVERTER.structure(data["turn"], MuleIdentity),
        message=_CONVERTER.structure(data["message"], MuleIdentity),
        value=_CONVERTER.structure(data["value"], AssistantMessage),
        event=from_wire(AssistantMessageEvent, data["event"]),
    )


_CONVERTER.register_unstructure_hook(MessageUpdate, _unstructure_update)
_CONVERTER.register_structure_hook(MessageUpdate, _structure_update)


def event_to_wire(event: MuleEvent) -> dict[str, Any]:
    """Return the JSON form of a mule event (the seed's keys, camelCase)."""
    out: dict[str, Any] = to_wire(event)
    return out


def event_from_wire(data: object) -> MuleEvent:
    """Decode a mule event from its JSON form; raise `mule.pi.WireError` on bad data."""
    tag = data.get("type") if isinstance(data, dict) else None
    cls = EVENT_TYPES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        from mule.pi._codec import WireError

        raise WireError("MuleEvent", [f"unknown event type {tag!r} @ $.type"])
    event: MuleEvent = from_wire(cls, data)
    return event


__all__ = ["event_from_wire", "event_to_wire"]
