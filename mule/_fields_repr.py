"""One `__repr__` for the attrs classes `import mule` builds, written once instead of per class.

attrs writes a `__repr__` for each class as source and compiles it when the class is defined:
for the hundred-odd classes of `mule.pi`, `mule.effects` and `mule.promise` that compiling was
about a tenth of `import mule`, for a method no run calls. A class that assigns
`__repr__ = fields_repr` in its body gets no generated one (attrs' `auto_detect`) and reads the
same: `fields_repr` writes what attrs' would, from the class's public `attrs.fields`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, cast

import attrs

if TYPE_CHECKING:
    from attrs import AttrsInstance

_local = threading.local()  # the objects being written on this thread, as attrs keeps them


def fields_repr(self: object) -> str:
    """Return `Name(field=value, ...)` for an attrs instance, as attrs' generated `__repr__` does.

    Fields declared `repr=False` are left out, a field's own `repr` callable is used, and an
    object met again while it is being written reads `...`.

    >>> @attrs.frozen
    ... class Point:
    ...     x: int
    ...     label: str = attrs.field(default="", repr=False)
    ...     __repr__ = fields_repr
    >>> Point(1, "a")
    Point(x=1)
    """
    seen: set[int] | None = getattr(_local, "seen", None)
    if seen is None:
        seen = _local.seen = set()
    if id(self) in seen:
        return "..."
    seen.add(id(self))
    try:
        cls = cast("type[AttrsInstance]", type(self))
        parts = [
            f"{a.name}={getattr(self, a.name, attrs.NOTHING)!r}"
            if a.repr is True
            else f"{a.name}={a.repr(getattr(self, a.name, attrs.NOTHING))}"
            for a in attrs.fields(cls)
            if a.repr is not False
        ]
        return f"{cls.__qualname__.rsplit('>.', 1)[-1]}({', '.join(parts)})"
    finally:
        seen.discard(id(self))


__all__ = ["fields_repr"]
