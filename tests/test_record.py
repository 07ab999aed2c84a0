"""`mule._record.Record`: the core's small frozen classes behave as the attrs classes they were."""

from __future__ import annotations

import copy
import pickle
from typing import Any, final

import attrs
import pytest

from mule._record import Record
from mule.effects._protocol import Began, CallModel, Finish, PullModel, ToolPartArrived


@final
class Pair(Record):
    """A record for the tests."""

    left: int
    right: str = "r"


@final
class Same(Record):
    """Another record with Pair's fields."""

    left: int
    right: str = "r"


def test_fields_defaults_and_positional_or_keyword_init() -> None:
    """Fields are the annotations in order; a class-body value is the default."""
    assert Pair(1).right == "r"
    assert Pair(1, "x") == Pair(left=1, right="x")
    assert getattr(Pair, "__match_args__") == ("left", "right")  # noqa: B009 (mypy: a literal)
    assert getattr(Pair, "__slots__") == ("left", "right")  # noqa: B009
    with pytest.raises(TypeError):
        Pair()  # type: ignore[call-arg]


def test_equality_and_hash_as_attrs() -> None:
    """Equal when of the same class with equal fields; hashed accordingly."""
    assert Pair(1) == Pair(1)
    assert Pair(1) != Pair(2)
    assert Pair(1) != Same(1)
    assert hash(Pair(1)) == hash(Pair(1))
    assert len({Pair(1), Pair(1), Pair(2), Same(1)}) == 3
    assert Began() == Began(0)
    assert PullModel() == PullModel()


def test_repr_names_the_fields() -> None:
    """`Name(field=value, ...)`, as attrs writes it."""
    assert repr(Pair(1, "x")) == "Pair(left=1, right='x')"
    assert repr(PullModel()) == "PullModel()"


def test_frozen() -> None:
    """Setting or deleting a field raises attrs' FrozenInstanceError."""
    p = Pair(1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.left = 2  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del p.left
    assert not hasattr(p, "__dict__")


def test_match_patterns() -> None:
    """Positional and keyword class patterns read the fields."""
    part: Any = "part"
    match ToolPartArrived(1, part, 5):
        case ToolPartArrived(i, part=p, now_ms=t):
            assert (i, p, t) == (1, part, 5)
        case _:
            pytest.fail("no match")


def test_copy_and_pickle() -> None:
    """A record survives copy, deepcopy and pickle."""
    p = Pair(1, "x")
    assert copy.copy(p) == p
    assert copy.deepcopy(p) == p
    assert pickle.loads(pickle.dumps(p)) == p


def test_a_record_derives_from_record_alone() -> None:
    """Subclassing a record would lose the base's fields: refused."""
    with pytest.raises(TypeError, match="derives from Record alone"):

        class Sub(Pair):  # type: ignore[misc]
            more: int = 0


def test_methods_and_properties_stay() -> None:
    """A record's own methods and properties are kept (Finish's outcome and error)."""
    assert CallModel.__init__.__qualname__ == "CallModel.__init__"
    assert isinstance(Finish.outcome, property)
