"""The delta events' written-out constructor sets exactly their attrs fields; they stay frozen."""

from __future__ import annotations

import attrs
import pytest

from mule.pi import (
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCallDeltaEvent,
)

DELTAS = (TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent)


@pytest.mark.parametrize("cls", DELTAS)
def test_sets_exactly_the_fields(cls: type[TextDeltaEvent]) -> None:
    partial = object()
    by_position = cls(3, "abc", partial)  # type: ignore[arg-type]
    by_keyword = cls(content_index=3, delta="abc", partial=partial)  # type: ignore[arg-type]
    for event in (by_position, by_keyword):
        fields = {a.name: getattr(event, a.name) for a in attrs.fields(cls)}
        assert vars(event) == fields == {"content_index": 3, "delta": "abc", "_partial": partial}
        assert event.partial_source is partial


@pytest.mark.parametrize("cls", DELTAS)
def test_frozen_and_evolvable(cls: type[TextDeltaEvent]) -> None:
    event = cls(0, "a", object())  # type: ignore[arg-type]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.delta = "b"  # type: ignore[misc]
    changed = attrs.evolve(event, delta="b")
    assert (changed.content_index, changed.delta, changed.partial_source) == (
        0,
        "b",
        event.partial_source,
    )


@pytest.mark.parametrize("cls", DELTAS)
def test_fields_match_the_constructor(cls: type[TextDeltaEvent]) -> None:
    """A field added to the class but not to the written-out `__init__` fails here."""
    aliases = [a.alias for a in attrs.fields(cls)]
    assert aliases == list(cls.__init__.__code__.co_varnames[1 : 1 + len(aliases)])
    assert cls.__init__.__code__.co_argcount == 1 + len(aliases)
