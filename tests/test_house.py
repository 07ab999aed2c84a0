"""The house's own rules, read from its source: what the import contracts cannot see.

- An underscore means private to its module: no module of `mule` imports another module's
  `_name` (a helper two modules share lives under a public name in a module named for it).
- mule reads no private name of anyio or attrs: it uses only their public APIs.
- Module names say what they hold: no file name is used by more than two packages.
- A test imports the public faces; one that imports a private module of mule tests a private
  rule, and names that module in its docstring.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

MULE = Path(__file__).resolve().parent.parent / "mule"
SOURCES = sorted(MULE.rglob("*.py"))
TESTS = MULE.parent / "tests"


def _module(path: Path) -> str:
    parts = path.relative_to(MULE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_private_name_crosses_modules() -> None:
    crossings = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mule"):
                crossings += [
                    f"{_module(path)} imports {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert crossings == []


# Private names of the dependencies' internals mule once reached for, and the general shapes:
# an import from a private module, or an attribute of one.
_DEPENDENCY_PRIVATE = re.compile(
    r"\b(?:anyio|attrs?)\._\w+"
    r"|from (?:anyio|attrs?)(?:\.\w+)*\._\w+ import"
    r"|\b(?:_task_states|_cancel_called|_compile_and_eval|_make_init|__attrs_init__)\b"
)


def test_no_private_name_of_anyio_or_attrs() -> None:
    hits = [
        f"{path.relative_to(MULE.parent)}:{number}: {line.strip()}"
        for path in SOURCES
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _DEPENDENCY_PRIVATE.search(line)
    ]
    assert hits == []


def test_the_probe_sees_a_private_name() -> None:
    assert _DEPENDENCY_PRIVATE.search("from anyio._core._tasks import TaskState")
    assert _DEPENDENCY_PRIVATE.search("state = _task_states.get(task)")
    assert not _DEPENDENCY_PRIVATE.search("await anyio.lowlevel.checkpoint()")


def test_module_names_say_what_they_hold() -> None:
    packages: defaultdict[str, list[str]] = defaultdict(list)
    for path in SOURCES:
        if path.name not in ("__init__.py", "__main__.py"):
            packages[path.name].append(_module(path.parent / "__init__.py"))
    assert {name: where for name, where in packages.items() if len(where) > 2} == {}


def _is_private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def _private_imports(tree: ast.Module) -> set[str]:
    """Return the private modules (or underscore names) of mule a module imports, dotted."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {
                a.name for a in node.names if a.name.startswith("mule.") and _is_private(a.name)
            }
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mule":
            module = node.module or ""
            if _is_private(module):
                found.add(module)
            else:
                found |= {f"{module}.{a.name}" for a in node.names if _is_private(a.name)}
    return found


def _unnamed(source: str) -> list[str]:
    """Return the private imports of a test module that its docstring does not name."""
    tree = ast.parse(source)
    doc = ast.get_docstring(tree) or ""
    return [
        name
        for name in sorted(_private_imports(tree))
        if not re.search(re.escape(name) + r"(?![\w])", doc)
    ]


def test_a_test_names_each_private_module_it_imports() -> None:
    unnamed = [
        f"{path.relative_to(TESTS.parent)}: {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in _unnamed(path.read_text())
    ]
    assert unnamed == []


def test_the_probe_sees_an_unnamed_private_import() -> None:
    body = "from mule.pi import Model\nfrom mule.pi._json import loads\n"
    assert _unnamed(f'"""Decoding."""\n{body}') == ["mule.pi._json"]
    assert _unnamed(f'"""Tests `mule.pi._json_x`."""\n{body}') == ["mule.pi._json"]
    assert _unnamed(f'"""Tests the private rule `mule.pi._json.loads`."""\n{body}') == []
    assert _unnamed('"""Nothing."""\nfrom mule.pi.providers import _frames\n') == [
        "mule.pi.providers._frames"
    ]
    assert _unnamed('"""Nothing."""\nimport mule.effects._state\n') == ["mule.effects._state"]
