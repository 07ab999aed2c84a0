"""Small things users trip on: UserMessage's default timestamp, __version__, missing extras."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

import mule
from mule.pi import Message, UserMessage, WireError, from_wire, to_wire

ROOT = Path(__file__).resolve().parents[1]


def test_user_message_timestamp_defaults_to_now() -> None:
    before = int(time.time() * 1000)
    message = UserMessage("hello")
    after = int(time.time() * 1000)
    assert before <= message.timestamp <= after
    assert UserMessage("hello", 7).timestamp == 7


def test_user_message_wire_still_requires_the_timestamp() -> None:
    """The Python default never fills in a key that Pi's wire always carries."""
    assert to_wire(UserMessage("x", 5)) == {"role": "user", "content": "x", "timestamp": 5}
    assert from_wire(Message, {"role": "user", "content": "x", "timestamp": 5}) == UserMessage(
        "x", 5
    )
    for type_ in (Message, UserMessage):
        with pytest.raises(WireError, match=r"required field missing @ \$\.timestamp"):
            from_wire(type_, {"role": "user", "content": "x"})


def test_version_comes_from_the_package_metadata() -> None:
    assert mule.__version__ == importlib.metadata.version("mule")
    assert re.match(r"\d+\.\d+", mule.__version__)


# A child interpreter in which the named top-level modules cannot be imported.
_BLOCKED_CHILD = """
import importlib.abc, json, sys
blocked = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
try:
    exec(sys.argv[2])
except ImportError as exc:
    print(json.dumps({"type": type(exc).__name__, "text": str(exc),
                      "extra": getattr(exc, "extra", None),
                      "missing": getattr(exc, "missing", None)}))
else:
    print(json.dumps({"type": None}))
"""

_CASES = [
    ("httpx", "import mule.pi.providers as p; p.provider_stream", "providers"),
    ("starlette", "import mule.serve", "server"),
    ("uvicorn", "import mule.serve as s; s.serve(None)", "server"),
    ("dbos", "import mule.dbos", "dbos"),
    ("psycopg", "import mule.dbos", "dbos"),
    ("mcp", "import mule.mcp", "mcp"),
    ("pydantic", "import mule.mcp", "mcp"),
    ("opentelemetry", "import mule.otel", "otel"),
    ("hypothesis", "import mule.testing.strategies", "testing"),
    ("hypothesis", "import mule.testing.effects_strategies", "testing"),
    ("h11", "import mule.testing.fake_openai", "testing"),
    ("h11", "import mule.testing.fake_anthropic", "testing"),
    ("h11", "import mule.testing.fake_google", "testing"),
]


@pytest.mark.parametrize(("blocked", "code", "extra"), _CASES)
def test_a_missing_extra_names_the_extra_to_install(blocked: str, code: str, extra: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BLOCKED_CHILD, blocked, code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["type"] == "MissingExtraError", seen
    assert seen["extra"] == extra
    assert seen["missing"] == blocked
    assert f"pip install 'mule[{extra}]'" in seen["text"]


def test_a_model_run_without_httpx_fails_naming_the_extra() -> None:
    """A real provider without httpx: the run fails as a model error that names the extra."""
    code = """
import anyio, mule
from mule.pi import Model, UserMessage
async def main():
    model = Model(id="m", name="m", api="openai-completions", provider="openai",
                  base_url="http://127.0.0.1:9/v1")
    outcome = await mule.run(mule.MuleRunInput(model=model, system_prompt="",
                                               messages=(UserMessage("hi"),)))
    print(outcome.message.error_message)
try:
    anyio.run(main)
except mule.MuleRunFailed as exc:
    raise ImportError(str(exc))
"""
    done = subprocess.run(
        [sys.executable, "-c", _BLOCKED_CHILD, "httpx", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"OPENAI_API_KEY": "sk-test", "PATH": ""},
    )
    assert "pip install 'mule[providers]'" in done.stdout


def _third_party_imports() -> list[tuple[str, str, str | None]]:
    """(file, top-level module, extra of the enclosing needs_extra block or None) per import."""
    std = sys.stdlib_module_names
    found: list[tuple[str, str, str | None]] = []

    def visit(node: ast.AST, path: str, extra: str | None, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner, inner_top = (
                extra,
                top
                and not isinstance(
                    child, ast.FunctionDef | ast.AsyncFunctionDef | ast.If | ast.Try
                ),
            )
            if isinstance(child, ast.With):
                for item in child.items:
                    call = item.context_expr
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Name)
                        and call.func.id == "needs_extra"
                        and isinstance(call.args[0], ast.Constant)
                    ):
                        inner = str(call.args[0].value)
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            for name in names:
                first = name.split(".")[0]
                if first not in std and first not in ("mule", "__future__"):
                    found.append((path, first, inner if top else "lazy"))
            visit(child, path, inner, inner_top)

    for file in sorted((ROOT / "mule").rglob("*.py")):
        visit(ast.parse(file.read_text()), str(file.relative_to(ROOT)), None, True)
    return found


def _face_extras(file: Path) -> set[str]:
    """Return the extras named by needs_extra(...) anywhere in the file's package face."""
    tree = ast.parse((file.parent / "__init__.py").read_text())
    return {
        str(node.args[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "needs_extra"
        and isinstance(node.args[0], ast.Constant)
    }


def _requirement_names(specs: list[str]) -> set[str]:
    return {re.split(r"[<>=\[; ]", s, maxsplit=1)[0].lower().replace("_", "-") for s in specs}


def test_every_third_party_import_is_declared_and_guarded() -> None:
    """Every third-party import is a core dependency or guarded by the extra declaring it.

    A module-level import sits in `needs_extra` (its own, or its package face's) for an extra
    that declares it; a lazy (in-function) one is declared by some extra.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = _requirement_names(project["dependencies"])
    extras = {
        name: _requirement_names(specs)
        for name, specs in project["optional-dependencies"].items()
        if name != "dev"
    }
    dists = importlib.metadata.packages_distributions()
    problems = []
    for path, module, extra in _third_party_imports():
        provided = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if provided & core:
            continue
        if extra == "lazy" or path.startswith("mule/cli/"):
            # The command catches ImportError at its top and prints the pip line itself.
            if not any(provided & names for names in extras.values()):
                problems.append(f"{path}: {module} is in no extra")
        elif extra is None:
            # A private module behind a face that imports it inside needs_extra(...).
            face = _face_extras(ROOT / path)
            if not any(provided & extras.get(e, set()) for e in face):
                problems.append(f"{path}: {module} is imported outside needs_extra(...)")
        elif not provided & extras.get(extra, set()):
            problems.append(f"{path}: {module} is not in the {extra!r} extra")
    assert problems == []
