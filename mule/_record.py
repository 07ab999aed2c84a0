"""Small frozen value classes that cost one `type()` at import, for the core's vocabulary.

attrs builds each class twice over (the class, then its slotted copy, plus a tuple class for
its fields) and writes four methods for it: about 0.3 ms a class, with its code cached. The
core's 29 facts and commands (`mule.effects._protocol`) and the run's phases and
configuration (`mule.effects._state`, all but `RunState`, which is evolved) are Records.

A `Record` subclass gets its `__slots__` from its annotations when the class statement runs,
an `__init__` that sets each slot through its descriptor (as `mule._fast_init`; the code is
compiled once), and equality, hashing, `repr` and `__match_args__` shared from the base
with attrs' semantics: equal when of the same class with equal fields, hashed by class and
fields, `Name(field=value, ...)`, frozen (`attrs.exceptions.FrozenInstanceError`).

For private classes only: a Record is no attrs class (no `attrs.fields`, `attrs.evolve`).
Fields are the class's own annotations, in order; one with a value in the class body has it
as its default. No inheritance between records, no validators, converters or keyword-only
fields.
"""

from __future__ import annotations

from typing import Any, ClassVar, dataclass_transform

from attrs.exceptions import FrozenInstanceError


def _init_source(names: tuple[str, ...], defaults: frozenset[str]) -> str:
    params = "".join(f", {n}=_d_{n}" if n in defaults else f", {n}" for n in names)
    body = "".join(f"    _s_{n}(self, {n})\n" for n in names) or "    pass\n"
    return f"def __init__(self{params}):\n{body}"


@dataclass_transform(frozen_default=True)
class _RecordMeta(type):
    """Turns a `Record` subclass's annotations into slots and an `__init__` (see the module)."""

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _RecordMeta:
        if not bases:  # Record itself
            return super().__new__(mcls, name, bases, ns)
        if bases != (Record,):  # its fields and slots would miss the base's
            raise TypeError(f"{name}: a Record derives from Record alone")
        names = tuple(ns.get("__annotations__", {}))
        defaults = {n: ns.pop(n) for n in names if n in ns}
        ns["__slots__"] = names
        ns["__match_args__"] = names
        cls = super().__new__(mcls, name, bases, ns)
        scope: dict[str, Any] = {f"_d_{n}": v for n, v in defaults.items()}
        for n in names:
            scope[f"_s_{n}"] = cls.__dict__[n].__set__  # the slot's own descriptor
        code = compile(_init_source(names, frozenset(defaults)), "<mule record>", "exec")
        exec(code, scope)
        init = scope["__init__"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        type.__setattr__(cls, "__init__", init)
        return cls


class Record(metaclass=_RecordMeta):
    """Base of the small frozen value classes (see the module)."""

    __slots__ = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, n) for n in self.__match_args__])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash((self.__class__, *self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__match_args__)
        return f"{self.__class__.__qualname__}({fields})"

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError

    def __getstate__(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in self.__match_args__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for n, v in state.items():
            object.__setattr__(self, n, v)


__all__ = ["Record"]
