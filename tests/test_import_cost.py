"""`import mule` leaves out what a run may not need (its time is measured in bench/, not here)."""

from __future__ import annotations

import json
import subprocess
import sys

# Loaded on first use: jsonschema with the first tool schema compiled, package metadata with
# `mule.__version__`.
LAZY = ("jsonschema", "referencing", "importlib.metadata")


def _modules_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nimport json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return set(json.loads(out.stdout))


def test_import_mule_leaves_out_what_a_run_may_not_need() -> None:
    """Neither jsonschema nor importlib.metadata comes with `import mule`."""
    loaded = _modules_after("import mule")
    assert [name for name in LAZY if name in loaded] == []


def test_they_load_when_first_used() -> None:
    """A tool's validator brings jsonschema; `mule.__version__` reads the package metadata."""
    code = (
        "import mule\n"
        "from mule.pi import Tool, ToolValidator\n"
        "ToolValidator.for_tool(Tool('t', 'd', {'type': 'object'}))\n"
        "assert mule.__version__\n"
    )
    loaded = _modules_after(code)
    assert [name for name in LAZY if name not in loaded] == []
