"""The failures of Pi's tool-argument gate and their text, word for word as pi-ai 1.6.0 prints them.

pi-ai's display path of a pi-schema error, and the full "Validation failed for tool ..." text
that a `ToolArgumentsError` carries (one line per error, then the arguments as received).
"""

from __future__ import annotations

from collections.abc import Sequence

from mule.pi._js_values import js_stringify
from mule.pi._json import JsonObject


class ToolArgumentsError(ValueError):
    """A tool call's arguments failed the tool's schema; `str(error)` is Pi's full failure text.

    Attributes:
        tool_name: The tool whose schema the arguments failed.
        errors: Pi's failures as (path, message) pairs, `path` dotted from the arguments' root.
        text: Pi's full failure text (the lines, then the arguments received).

    """

    def __init__(self, tool_name: str, errors: tuple[tuple[str, str], ...], text: str) -> None:
        super().__init__(text)
        self.tool_name = tool_name
        self.errors = errors
        self.text = text


class ToolSchemaError(ValueError):
    """A tool's `parameters` is not a usable JSON Schema.

    Attributes:
        tool_name: The tool whose schema is unusable.
        detail: What is wrong with it.

    """

    def __init__(self, tool_name: str, detail: str) -> None:
        super().__init__(f'Invalid parameters schema for tool "{tool_name}": {detail}')
        self.tool_name = tool_name
        self.detail = detail


def display_path(pointer: str) -> str:
    """Return pi-ai's path of an error: the JSON Pointer dotted, `root` for the value itself.

    >>> display_path("/edits/0/a~1b"), display_path("")
    ('edits.0.a/b', 'root')
    """
    if pointer == "":
        return "root"
    return ".".join(part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/"))


def arguments_error(
    tool_name: str, errors: Sequence[tuple[str, str]], arguments: JsonObject | None
) -> ToolArgumentsError:
    """Return the failure of a call: Pi's error lines, then the arguments it received.

    `None` for arguments too deep to print: the text then says they are not shown.
    """
    lines = (
        "\n".join(f"  - {path}: {message}" for path, message in errors)
        or "Unknown validation error"
    )
    received = "(not shown: nested too deeply)" if arguments is None else js_stringify(arguments)
    text = f'Validation failed for tool "{tool_name}":\n{lines}\n\nReceived arguments:\n{received}'
    return ToolArgumentsError(tool_name, tuple(errors), text)


__all__ = ["ToolArgumentsError", "ToolSchemaError", "arguments_error", "display_path"]
