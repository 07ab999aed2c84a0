"""`import mule` leaves out what a run may not need (its time is measured in bench/, not here)."""

from __future__ import annotations

import json
import subprocess
import sys

# Loaded on first use: package metadata with `mule.__version__`, cattrs with the codecs,
# docstring_parser with the first `@mule.tool`.
LAZY = ("importlib.metadata", "cattrs", "docstring_parser")
# Loaded by the first run with tools (the argument gate), the first `@mule.tool` (datetime), the
# first schema naming a format (its checks) or holding a `$ref` (urllib, with ipaddress); the
# CLI may load some itself.
FIRST_TOOL = ("mule.pi._validate", "datetime", "mule.pi._schema_formats", "urllib.parse")
# Never loaded by a run: the tool gate is mule's own (referencing only types a host's registry).
NEVER = ("jsonschema", "referencing")
# Imported inside the functions that need them (`run_future`, `run_sync` from a running loop).
NOT_AT_IMPORT = ("returns.future", "anyio.from_thread", "mule.pi._codec", "mule.effects._codec")

_FIRST_USES = '''
import mule
from mule.pi import TextContent, Tool, ToolValidator
ToolValidator.for_tool(Tool("t", "d", {"type": "object", "properties": {"a": {"not": {}}}}))
ToolValidator.for_tool(Tool("u", "d", {"$ref": "#/$defs/d", "$defs": {"d": {"format": "date"}}}))
assert mule.__version__
assert mule.effects.to_wire(TextContent("a")) == {"type": "text", "text": "a"}

@mule.tool
def f(x: int) -> str:
    """Say x.

    Args:
        x: the number.
    """
    return str(x)

assert f.descriptor.parameters["properties"]["x"]["description"] == "the number."
'''


def _modules_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nimport json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return set(json.loads(out.stdout))


def test_import_mule_leaves_out_what_a_run_may_not_need() -> None:
    """Neither jsonschema, cattrs, the codecs, datetime nor a schema's helpers come with it."""
    loaded = _modules_after("import mule")
    assert [name for name in LAZY + FIRST_TOOL + NEVER + NOT_AT_IMPORT if name in loaded] == []


def test_they_load_when_first_used() -> None:
    """The codec brings cattrs, `@mule.tool` docstring_parser; a tool's validator no jsonschema."""
    loaded = _modules_after(_FIRST_USES)
    assert [name for name in LAZY + FIRST_TOOL if name not in loaded] == []
    assert [name for name in NEVER if name in loaded] == []


def test_the_cli_leaves_them_out_too() -> None:
    """Every `mule` command imports mule.cli: `--version` reads the metadata only when asked."""
    loaded = _modules_after("import mule.cli\nmule.cli.build_parser()")
    assert [name for name in LAZY + NEVER + NOT_AT_IMPORT if name in loaded] == []
