"""The bytecode cache of attrs' generated methods (`mule._code_cache`), on a copy of the package.

Each test imports a fresh copy of `mule` in a child process and counts what attrs compiles for
mule's classes: nothing once the cache is written, the one changed class after an edit, every
class again when the file is damaged or may not be written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mule

PACKAGE = Path(mule.__file__).parent

# Counts attrs' scripts compiled for mule's classes while `import mule` runs; checks the
# classes still behave (equality, hashing, repr, defaults) with the cached code.
_PROBE = """
import builtins, json
real = builtins.compile
compiled = []
def counting(source, filename, *args, **kwargs):
    if str(filename).startswith("<attrs generated") and " mule." in str(filename):
        compiled.append(str(filename))
    return real(source, filename, *args, **kwargs)
builtins.compile = counting
import mule
from mule.pi import TextContent
from mule.effects import MuleIdentity
builtins.compile = real
a, b = TextContent("hi"), TextContent("hi")
assert a == b and hash(a) == hash(b) and a != TextContent("ho")
assert repr(a).startswith("TextContent(text='hi', text_signature=None")
assert MuleIdentity("run", "r") == MuleIdentity("run", "r")
assert len({MuleIdentity("run", "r"), MuleIdentity("run", "r"), MuleIdentity("run", "s")}) == 2
print(json.dumps(compiled))
"""


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(PACKAGE, tmp_path / "mule", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "mule" / "__pycache__" / f"attrs-code.{sys.implementation.cache_tag}.bin"


def _import(root: Path, *, write: bool = True) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(root)
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=root, env=env, check=True, capture_output=True
    )
    compiled: list[str] = json.loads(out.stdout.decode().strip().splitlines()[-1])
    return compiled


@pytest.fixture
def copy(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path, _copy(tmp_path)


def test_the_second_import_compiles_none_of_mules_attrs_methods(copy: tuple[Path, Path]) -> None:
    root, cache = copy
    first = _import(root)
    assert len(first) > 50  # every class of `import mule`
    assert cache.is_file()
    assert _import(root) == []


def test_a_changed_class_is_compiled_again(copy: tuple[Path, Path]) -> None:
    root, _ = copy
    _import(root)
    content = root / "mule" / "pi" / "_content.py"
    source = content.read_text()
    field = "    text_signature: str | None = None\n"
    assert field in source
    content.write_text(source.replace(field, field + "    probe: int = 0\n", 1))
    shutil.rmtree(content.parent / "__pycache__", ignore_errors=True)
    assert _import(root) == ["<attrs generated methods mule.pi._content.TextContent>"]
    assert _import(root) == []


def test_a_damaged_file_is_ignored_and_written_again(copy: tuple[Path, Path]) -> None:
    root, cache = copy
    _import(root)
    cache.write_bytes(cache.read_bytes()[:100] + b"\x00damaged")
    assert len(_import(root)) > 50
    assert _import(root) == []


def test_nothing_is_written_under_dont_write_bytecode(copy: tuple[Path, Path]) -> None:
    root, cache = copy
    assert len(_import(root, write=False)) > 50
    assert not cache.exists()


# Counts the scripts attrs compiles for its own validators (defined while `import attr` runs);
# with `import attrs` first they are defined before mule's import, outside the cache's reach.
_ATTRS_PROBE = """
import builtins, json, sys
{before}
real = builtins.compile
compiled = []
def counting(source, filename, *args, **kwargs):
    if str(filename).startswith("<attrs generated") and " attr.validators." in str(filename):
        compiled.append(str(filename))
    return real(source, filename, *args, **kwargs)
builtins.compile = counting
import mule
builtins.compile = real
from attrs import validators
assert validators.instance_of(int) == validators.instance_of(int)
print(json.dumps(compiled))
"""


def _import_attrs_probe(root: Path, before: str = "") -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(root)
    probe = _ATTRS_PROBE.format(before=before)
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, env=env, check=True, capture_output=True
    )
    compiled: list[str] = json.loads(out.stdout.decode().strip().splitlines()[-1])
    return compiled


def test_attrs_own_classes_are_cached_when_mule_imports_attrs(copy: tuple[Path, Path]) -> None:
    """When `import mule` brings attrs, its validators' code comes from the cache."""
    root, _ = copy
    assert len(_import_attrs_probe(root)) > 5
    assert _import_attrs_probe(root) == []


def test_an_import_after_attrs_keeps_attrs_entries(copy: tuple[Path, Path]) -> None:
    """An import after attrs' own neither drops their entries nor rewrites the file."""
    root, cache = copy
    _import_attrs_probe(root)
    written = cache.read_bytes()
    _import_attrs_probe(root, before="import attrs")  # attrs' classes compiled before mule's
    assert cache.read_bytes() == written  # nothing dropped, nothing rewritten
    assert _import_attrs_probe(root) == []
