"""`MessageUpdate`'s written-out constructor sets exactly its attrs fields, frozen as any other."""

from __future__ import annotations

import attrs
import pytest

from mule.effects import MessageUpdate, MuleIdentity
from mule.pi import TextDeltaEvent
from tests.effects.kit import assistant


def test_sets_exactly_the_fields() -> None:
    run = MuleIdentity(kind="run", value="run:0")
    turn = MuleIdentity(kind="turn", value="turn:1", parent=run)
    mid = MuleIdentity(kind="message", value="message:2", parent=turn)
    message = assistant()
    event = TextDeltaEvent(0, "d", message)
    by_position = MessageUpdate(run, turn, mid, message, event)
    by_keyword = MessageUpdate(run=run, turn=turn, message=mid, value=message, event=event)
    expected = {"run": run, "turn": turn, "message": mid, "_value": message, "event": event}
    for update in (by_position, by_keyword):
        assert vars(update) == expected
        assert {a.name: getattr(update, a.name) for a in attrs.fields(MessageUpdate)} == expected
        assert update.value is message
    assert by_position == by_keyword
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        by_position.event = event  # type: ignore[misc]
    assert attrs.evolve(by_position, value=message) == by_position


def test_fields_match_the_constructor() -> None:
    """A field added to the class but not to the written-out `__init__` fails here."""
    aliases = [a.alias for a in attrs.fields(MessageUpdate)]
    code = MessageUpdate.__init__.__code__
    assert aliases == list(code.co_varnames[1 : 1 + len(aliases)])
    assert code.co_argcount == 1 + len(aliases)
