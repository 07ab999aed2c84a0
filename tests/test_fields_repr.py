"""`mule._fields_repr.fields_repr` writes what attrs' generated `__repr__` does (a private rule)."""

from __future__ import annotations

import json
import subprocess
import sys

import attrs

from mule._fields_repr import fields_repr


def _pair(**fields: object) -> tuple[type, type]:
    """One class twice: with attrs' generated `__repr__` and with `fields_repr`."""
    generated = attrs.make_class("Thing", dict(fields), frozen=True)
    shared = attrs.make_class("Thing", dict(fields), frozen=True, repr=False)
    shared.__repr__ = fields_repr  # type: ignore[method-assign,assignment]
    return generated, shared


def test_it_reads_as_attrs_writes_it() -> None:
    """Fields in order, `repr=False` left out, a field's own repr callable used."""
    generated, shared = _pair(
        a=attrs.field(),
        hidden=attrs.field(repr=False, default=0),
        b=attrs.field(default="x"),
        c=attrs.field(repr=lambda v: f"<{v}>", default=2),
    )
    for args in [(1,), (None, 5, "y\n", [1, "2"])]:
        assert repr(shared(*args)) == repr(generated(*args))


def test_a_field_less_class() -> None:
    """A class with no fields reads `Name()`."""
    generated, shared = _pair()
    assert repr(shared()) == repr(generated()) == "Thing()"


def test_a_cycle_reads_dots() -> None:
    """An object met again while it is being written reads `...`, as in attrs."""
    generated, shared = _pair(items=attrs.field())
    for cls in (generated, shared):
        box: list[object] = []
        thing = cls(box)
        box.append(thing)
        assert repr(thing) == "Thing(items=[...])"


_PROBE = """
import json, sys, attrs, mule
def generated_repr(cls):
    code = getattr(vars(cls).get("__repr__"), "__code__", None)
    return code is not None and not code.co_filename.endswith(".py")  # no source file
print(json.dumps(sorted({
    f"{cls.__module__}.{cls.__qualname__}"
    for name, module in list(sys.modules.items()) if name.startswith("mule")
    for cls in vars(module).values()
    if isinstance(cls, type) and attrs.has(cls) and generated_repr(cls)
})))
"""


def test_the_classes_import_mule_builds_use_it() -> None:
    """No attrs class `import mule` builds has a generated `__repr__` (one compiled from text)."""
    out = subprocess.run([sys.executable, "-c", _PROBE], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == []
