"""The public surface: each face exports exactly its `__all__`, under its own name.

A face's `__all__` is the contract a user imports against: every name in it must exist, be
listed once and in order, and every public class or function a face holds must be listed (an
unlisted one is an accident of an import). Public names read their face as `__module__`, and
no two public classes anywhere share a name.
"""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
import types
import typing
from collections import defaultdict

import pytest

FACES = (
    "mule",
    "mule.cli",
    "mule.dbos",
    "mule.effects",
    "mule.journal",
    "mule.mcp",
    "mule.otel",
    "mule.pi",
    "mule.pi.models",
    "mule.pi.providers",
    "mule.pirc",
    "mule.promise",
    "mule.serve",
    "mule.tools",
)


def _face(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: CONSTANTS, then Classes, then everything else.
    if name.isupper():
        return (0, name)
    return (1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("name", FACES)
def test_all_is_sorted_unique_and_exists(name: str) -> None:
    face = _face(name)
    exported = list(face.__all__)
    assert exported == sorted(exported, key=_isort_key), f"{name}.__all__ is not sorted"
    assert len(exported) == len(set(exported)), f"{name}.__all__ lists a name twice"
    absent = [n for n in exported if not hasattr(face, n)]
    assert absent == [], f"{name}.__all__ names what it does not have: {absent}"


@pytest.mark.parametrize("name", FACES)
def test_dir_lists_every_exported_name(name: str) -> None:
    """`dir(face)` lists all of `__all__`, names a face imports on first use included."""
    probe = (
        f"import json, {name} as f; print(json.dumps([n for n in f.__all__ if n not in dir(f)]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == []  # in a fresh process: before any lazy name is read


@pytest.mark.parametrize("name", FACES)
def test_every_public_class_and_function_is_listed(name: str) -> None:
    face = _face(name)
    unlisted = [
        attr
        for attr, value in vars(face).items()
        if not attr.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").startswith(name + ".")
        and attr not in face.__all__
    ]
    assert unlisted == [], f"{name} holds public names outside __all__: {unlisted}"


@pytest.mark.parametrize("name", FACES)
def test_public_names_read_their_face(name: str) -> None:
    face = _face(name)
    private_homes = {
        attr: value.__module__
        for attr in face.__all__
        if (inspect.isclass(value := getattr(face, attr)) or inspect.isfunction(value))
        and value.__module__.startswith(name + "._")
    }
    assert private_homes == {}, f"{name} exports names whose __module__ is private"


def test_no_two_public_classes_share_a_name() -> None:
    homes: defaultdict[str, set[type]] = defaultdict(set)
    for name in FACES:
        face = _face(name)
        for attr in face.__all__:
            value = getattr(face, attr)
            if inspect.isclass(value):
                homes[attr].add(value)
    shared = {attr: sorted(c.__module__ for c in classes) for attr, classes in homes.items()}
    shared = {attr: mods for attr, mods in shared.items() if len(mods) > 1}
    assert shared == {}, f"different public classes with one name: {shared}"


def test_the_module_names_resolve_back() -> None:
    # Pickle, the docs and `repr` find a class again by `module.qualname`.
    for name in FACES:
        face = _face(name)
        for attr in face.__all__:
            value = getattr(face, attr)
            if inspect.isclass(value) and value.__module__.startswith("mule"):
                home = importlib.import_module(value.__module__)
                assert getattr(home, value.__qualname__, None) is value, (name, attr)


@pytest.mark.parametrize("name", FACES)
def test_exported_classes_resolve_their_annotations(name: str) -> None:
    # A face is now each class's module: its annotations must resolve without the private
    # module's globals (a recursive alias such as JsonValue names its own module).
    face = _face(name)
    broken = {}
    for attr in face.__all__:
        value = getattr(face, attr)
        if inspect.isclass(value) and value.__module__.startswith("mule"):
            try:
                typing.get_type_hints(value)
            except Exception as exc:
                broken[attr] = repr(exc)
    assert broken == {}


def test_the_old_name_of_a_prepared_call_warns() -> None:
    """`mule.effects.MulePreparedCall` is `MuleToolPrepared` under its old name, deprecated."""
    import mule
    import mule.effects

    with pytest.warns(DeprecationWarning, match="MuleToolPrepared"):
        old = mule.effects.MulePreparedCall
    assert old is mule.effects.MuleToolPrepared is mule.MuleToolPrepared
