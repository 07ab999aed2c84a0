"""Every public field of every public type is documented.

An `Attributes:` section that mkdocstrings renders, so the reference answers what reading
`_events.py` used to.
"""

from __future__ import annotations

import importlib
import inspect
import re

import attrs
import pytest

FACES = [
    "mule",
    "mule.effects",
    "mule.promise",
    "mule.pi",
    "mule.journal",
    "mule.tools",
    "mule.mcp",
    "mule.dbos",
    "mule.otel",
]


def _documented(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        doc = inspect.cleandoc(klass.__dict__.get("__doc__") or "")  # its own, not inherited
        _, found, section = doc.partition("Attributes:")
        if found:
            names |= set(re.findall(r"^    (\w+)(?: \([^)]*\))?:", section, re.M))
    return names


@pytest.mark.parametrize("face", FACES)
def test_every_public_field_has_a_docstring(face: str) -> None:
    module = importlib.import_module(face)
    missing = {}
    for name in module.__all__:
        obj = getattr(module, name)
        if not (isinstance(obj, type) and attrs.has(obj)):
            continue
        documented = _documented(obj)
        fields = [a.name.lstrip("_") for a in attrs.fields(obj)]
        lacking = [f for f in fields if f not in documented]
        if lacking:
            missing[name] = lacking
    assert missing == {}
