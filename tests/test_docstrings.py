"""Every public field of every public type is documented.

An `Attributes:` section that mkdocstrings renders, so the reference answers what reading
the event modules used to.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import re
import textwrap
import typing
from pathlib import Path

import attrs
import pytest

import mule

# Every public module: no component of its dotted name is private. New faces are covered
# without editing this list; the surface test pins the faces themselves.
_PUBLIC = (
    m.name
    for m in pkgutil.walk_packages(mule.__path__, "mule.")
    if not any(part.startswith("_") for part in m.name.split("."))
)
FACES = ["mule", *sorted(_PUBLIC)]


def _fields(cls: type) -> list[str] | None:
    """Return the public fields of a record class (attrs, dataclass, NamedTuple, TypedDict)."""
    if attrs.has(cls):
        return [a.name.lstrip("_") for a in attrs.fields(cls)]
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return list(cls._fields)
    if typing.is_typeddict(cls):
        return list(cls.__annotations__)
    return None


def _documented(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        doc = inspect.cleandoc(klass.__dict__.get("__doc__") or "")  # its own, not inherited
        _, found, section = doc.partition("Attributes:")
        if found:
            names |= set(re.findall(r"^    (\w+)(?: \([^)]*\))?:", section, re.M))
    return names


def test_the_faces_include_every_known_one() -> None:
    # The walk must not silently find nothing (a moved package, an import error swallowed).
    known = {"mule.effects", "mule.pi.models", "mule.pi.providers", "mule.pirc", "mule.serve"}
    assert known <= set(FACES)
    assert {"mule.pi.scripted", "mule.testing.crash", "mule.dbos", "mule.mcp"} <= set(FACES)


@pytest.mark.parametrize("face", FACES)
def test_every_public_field_has_a_docstring(face: str) -> None:
    module = importlib.import_module(face)
    missing = {}
    for name in getattr(module, "__all__", ()):
        obj = getattr(module, name)
        fields = _fields(obj) if isinstance(obj, type) else None
        if not fields:
            continue
        documented = _documented(obj)
        lacking = [f for f in fields if f not in documented]
        if lacking:
            missing[name] = lacking
    assert missing == {}


def test_every_face_has_a_reference_page() -> None:
    # A documented field helps only if the site renders it: each face has a `::: face` page.
    from tests.test_public_surface import FACES as SURFACE

    pages = (Path(__file__).parents[1] / "docs" / "reference").glob("*.md")
    rendered = {m for page in pages for m in re.findall(r"^::: ([\w.]+)$", page.read_text(), re.M)}
    # The command's reference is `mule --help` and the README, not its Python entry points.
    assert set(SURFACE) - {"mule.cli"} <= rendered


def _instance_attributes(cls: type) -> set[str]:
    """Return the public attributes `cls.__init__` assigns to `self`."""
    init = cls.__dict__.get("__init__")
    if not inspect.isfunction(init):
        return set()
    tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    targets = [
        target
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
    ]
    return {
        t.attr
        for t in targets
        if isinstance(t, ast.Attribute)
        and isinstance(t.value, ast.Name)
        and t.value.id == "self"
        and not t.attr.startswith("_")
        and not isinstance(getattr(cls, t.attr, None), property)
    }


def test_every_public_attribute_of_other_classes_has_a_docstring() -> None:
    # Classes that are not records (a Bridge, a Journal, a controller) hold public state too.
    missing: dict[str, list[str]] = {}
    for face in FACES:
        module = importlib.import_module(face)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if not isinstance(obj, type) or _fields(obj) is not None:
                continue
            lacking = sorted(_instance_attributes(obj) - _documented(obj))
            if lacking:
                missing.setdefault(f"{face}.{name}", lacking)
    assert missing == {}
