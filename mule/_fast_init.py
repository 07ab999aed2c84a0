"""Cheaper construction for the frozen attrs classes made once per streamed delta.

attrs initialises a frozen slotted class through `object.__setattr__`, which looks each field's
name up on the type before it reaches the slot, and calling a class with keywords adds the
type's call machinery and the keyword matching. For the few classes made for every delta that
is a fixed cost per event. `fast_init` gives such a class an `__init__` that writes each slot
through its own descriptor (about a quarter cheaper); `maker` gives the hot paths a function
that makes one from its fields positionally without calling the class (about half the cost
of the keyword call); `setters` gives the slot setters themselves, for a hot path that makes
several such objects in one function; `replacer` is `attrs.evolve` for the fields it names.
All apply only where attrs' `__init__` does nothing but set the fields: no defaults,
validators, converters or `__attrs_pre_init__`/`__attrs_post_init__`; the class's own
signature (keyword-only, aliases) stays attrs'. `maker(cls, defaults=True)` and `replacer`
are given (or copy) every field, so defaults are fine for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

_C = TypeVar("_C", bound=type)
_T = TypeVar("_T")


def _plain_fields(cls: type, defaults: bool = False) -> tuple[Any, ...]:
    """Return attrs class `cls`'s fields; TypeError if its `__init__` does more than set them.

    With `defaults`, fields with a default pass (for `maker`, which is given every field).
    """
    fields: tuple[Any, ...] = attrs.fields(cls)
    plain = all(
        (defaults or f.default is attrs.NOTHING)
        and f.validator is None
        and f.converter is None
        and f.init
        for f in fields
    )
    if not plain or hasattr(cls, "__attrs_post_init__") or hasattr(cls, "__attrs_pre_init__"):
        raise TypeError(f"{cls.__qualname__}: attrs' __init__ does more than set its fields")
    return fields


def _scope(cls: type, fields: tuple[Any, ...]) -> dict[str, Any]:
    """Return the globals of generated code for `cls`: each slot's setter, `_new` and `_cls`."""
    scope: dict[str, Any] = {f"_set_{f.name}": cls.__dict__[f.name].__set__ for f in fields}
    scope |= {"_new": object.__new__, "_cls": cls}
    return scope


def _compile(cls: type, fields: tuple[Any, ...], name: str, params: str, made: bool) -> Any:
    """Compile function `name(params)` setting `cls`'s slots from the fields' aliases.

    With `made`, it makes the object (`self`) first and returns it; else `self` is a parameter.
    """
    scope = _scope(cls, fields)
    lines = [f"    _set_{f.name}(self, {f.alias})" for f in fields]
    if made:
        lines = ["    self = _new(_cls)", *lines, "    return self"]
    source = f"def {name}({params}):\n" + "\n".join(lines) + "\n"
    exec(compile(source, "<mule fast init>", "exec"), scope)  # as attrs writes its own
    return scope[name]


def fast_init(cls: _C) -> _C:
    """Give attrs class `cls` an `__init__` that sets its slots directly; return `cls`."""
    fields = _plain_fields(cls)
    params = ", ".join(f.alias for f in fields)
    if any(f.kw_only for f in fields):
        params = "*, " + params
    init = _compile(cls, fields, "__init__", f"self, {params}", made=False)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = vars(cls)["__init__"].__doc__
    setattr(cls, "__init__", init)  # noqa: B010  # mypy: no assigning to a method
    return cls


def maker(cls: type[_T], *, defaults: bool = False) -> Callable[..., _T]:
    """Return a function making a `cls` from its fields, positionally in field order.

    It does not call the class: the object is made and its slots are set, as `__init__`
    would set them. For the objects a hot path makes per event. The function takes every
    field, so with `defaults` a class whose fields have defaults is accepted too (they never
    apply).
    """
    fields = _plain_fields(cls, defaults)
    params = ", ".join(f.alias for f in fields)
    make: Callable[..., _T] = _compile(cls, fields, "make", params, made=True)
    make.__qualname__ = f"make_{cls.__qualname__}"
    return make


def setters(cls: type, *aliases: str) -> tuple[Callable[[Any, Any], None], ...]:
    """Return the functions setting `cls`'s slots, one per field, in field order.

    `aliases` are the fields' parameter names as the caller expects them, in order: a class
    whose fields differ is refused (TypeError), so a caller setting them positionally never
    writes one field's value into another's slot.
    """
    fields = _plain_fields(cls)
    found = tuple(f.alias for f in fields)
    if found != aliases:
        raise TypeError(f"{cls.__qualname__}: fields {found}, not {aliases}")
    return tuple(cls.__dict__[f.name].__set__ for f in fields)


def replacer(cls: type[_T], *names: str) -> Callable[..., _T]:
    """Return a function `(obj, *values)` copying `obj` with the fields `names` set to `values`.

    `attrs.evolve(obj, **dict(zip(names, values)))` without evolve's walk of `fields()` and
    keyword call: the copy is made and its slots are set from `obj`'s, as `maker` does. Fields
    with defaults are fine (every field is copied); validators and converters are refused.
    """
    fields = _plain_fields(cls, defaults=True)
    unknown = set(names) - {f.name for f in fields}
    if unknown or not names:
        raise TypeError(f"{cls.__qualname__} has no field {', '.join(sorted(unknown))}")
    scope = _scope(cls, fields)
    given = {n: f"_v_{n}" for n in names}
    lines = [f"    _set_{f.name}(new, {given.get(f.name, f'obj.{f.name}')})" for f in fields]
    params = ", ".join(given.values())
    source = f"def replace(obj, {params}):\n    new = _new(_cls)\n" + "\n".join(lines)
    exec(compile(source + "\n    return new\n", "<mule fast init>", "exec"), scope)
    replace: Callable[..., _T] = scope["replace"]
    replace.__qualname__ = f"replace_{cls.__qualname__}_{'_'.join(names)}"
    return replace
