"""The house's own rules, read from its source: what the import contracts cannot see.

- An underscore means private to its module: no module of `mule` imports another module's
  `_name` (a helper two modules share lives under a public name in a module named for it).
- mule reads no private name of anyio or attrs: it uses only their public APIs.
- Module names say what they hold: no file name is used by more than two packages.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

MULE = Path(__file__).resolve().parent.parent / "mule"
SOURCES = sorted(MULE.rglob("*.py"))


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
