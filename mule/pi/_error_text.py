"""The failures of Pi's tool-argument gate and their text, word for word as pi-ai prints them.

TypeBox's en_US message for each failing keyword, Pi's display path of an error, and the full
"Validation failed for tool ..." text that a `ToolArgumentsError` carries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mule.pi._js_values import is_js_number, js_number_to_string, js_stringify
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


def _limit(value: Any) -> str:
    return js_number_to_string(value) if is_js_number(value) else str(value)


def error_message(keyword: str, params: Mapping[str, Any]) -> str:
    """Return TypeBox's en_US message for one error."""
    simple = {
        "additionalProperties": "must not have additional properties",
        "anyOf": "must match a schema in anyOf",
        "boolean": "schema is false",
        "const": "must be equal to constant",
        "contains": "must contain at least 1 valid item",
        "enum": "must be equal to one of the allowed values",
        "not": "must not be valid",
        "oneOf": "must match exactly one schema in oneOf",
        "uniqueItems": "must not have duplicate items",
        "unevaluatedItems": "must not have unevaluated items",
        "unevaluatedProperties": "must not have unevaluated properties",
    }
    if keyword in simple:
        return simple[keyword]
    match keyword:
        case "dependencies" | "dependentRequired":
            deps = ", ".join(params["dependencies"])
            return f"must have properties {deps} when property {params['property']} is present"
        case "exclusiveMaximum" | "exclusiveMinimum" | "maximum" | "minimum":
            return f"must be {params['comparison']} {_limit(params['limit'])}"
        case "format":
            return f'must match format "{params["format"]}"'
        case "if":
            return f'must match "{params["failingKeyword"]}" schema'
        case (
            "maxItems" | "maxLength" | "maxProperties" | "minItems" | "minLength" | "minProperties"
        ):
            noun = {"Items": "items", "Length": "characters", "Properties": "properties"}[
                keyword[3:]
            ]
            side = "more" if keyword.startswith("max") else "fewer"
            return f"must not have {side} than {_limit(params['limit'])} {noun}"
        case "multipleOf":
            return f"must be multiple of {_limit(params['multipleOf'])}"
        case "pattern":
            return f'must match pattern "{params["pattern"]}"'
        case "propertyNames":
            return f"property names {', '.join(params['propertyNames'])} are invalid"
        case "required":
            return f"must have required properties {', '.join(params['requiredProperties'])}"
        case "type":
            kind = params["type"]
            return (
                f"must be {kind}"
                if isinstance(kind, str)
                else f"must be either {' or '.join(kind)}"
            )
        case _:
            return "an unknown validation error occurred"


def display_path(keyword: str, path: str, params: Mapping[str, Any]) -> str:
    """Return Pi's path of an error: dots for slashes, `root` if empty, `.key` if key is missing."""
    base = path.removeprefix("/").replace("/", ".")
    if keyword == "required" and params.get("requiredProperties"):
        first = params["requiredProperties"][0]
        return f"{base}.{first}" if base else first
    return base or "root"


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


__all__ = [
    "ToolArgumentsError",
    "ToolSchemaError",
    "arguments_error",
    "display_path",
    "error_message",
]
