"""A tool's return value as JSON, encoded as its arguments are decoded.

Dataclasses, attrs classes, pydantic models, `TypedDict`s (plain dicts at run time), enums,
datetimes, and lists, tuples, sets and dicts of them (keys str, int or enum) become JSON: field
names as keys (the names the argument schema uses), enums as their values, datetimes in ISO
8601, int keys as their digits.
Anything else is a `ToolResultError` naming the tool and the type: never `str(value)`.
"""

from __future__ import annotations

import collections.abc as abc
import dataclasses
import enum
import inspect
import math
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any

import attrs

from mule.effects import MuleToolResult, ToolSignatureError
from mule.pi import ImageContent, JsonValue, TextContent


class ToolResultError(TypeError):
    """A tool returned a value mule cannot encode as JSON (the message names tool and type)."""


def _pydantic(value: object) -> bool:
    # pydantic is never imported for this: a model class has `model_dump` and `model_fields`.
    cls = type(value)
    return hasattr(cls, "model_dump") and hasattr(cls, "model_fields")


def _key(key: object, path: str) -> str:
    if isinstance(key, enum.Enum):
        key = key.value
    if isinstance(key, str):
        return str(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(int(key))  # as JSON writes an int key
    raise _Unencodable(f"a dict key of type {type(key).__name__}", path)


class _Unencodable(Exception):
    def __init__(self, what: str, path: str) -> None:
        super().__init__(what, path)
        self.what = what
        self.path = path


def _encode(value: object, path: str) -> JsonValue:
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return value  # type: ignore[return-value]
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise _Unencodable(f"the float {value!r} (JSON has no NaN or infinity)", path)
        return value  # type: ignore[return-value]
    if isinstance(value, enum.Enum):
        return _encode(value.value, path)
    if isinstance(value, str | int | float):  # subclasses (an IntEnum is caught above)
        return _encode(_base(value)(value), path)
    # No datetime exists before its module is imported (`import mule` does not import it).
    dt = sys.modules.get("datetime")
    if dt is not None and isinstance(value, dt.datetime | dt.date | dt.time):
        iso: str = value.isoformat()
        return iso
    if isinstance(value, list | tuple | set | frozenset):
        return [_encode(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {_key(k, path): _encode(v, f"{path}[{k!r}]") for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _encode(getattr(value, f.name), f"{path}.{f.name}")
            for f in dataclasses.fields(value)
        }
    if attrs.has(kind):
        return {
            a.name: _encode(getattr(value, a.name), f"{path}.{a.name}") for a in attrs.fields(kind)
        }
    if _pydantic(value):
        try:
            dumped: JsonValue = value.model_dump(mode="json")  # type: ignore[attr-defined]
        except Exception as exc:
            raise _Unencodable(
                f"{kind.__name__} (pydantic could not dump it: {exc})", path
            ) from exc
        return dumped
    raise _Unencodable(f"a value of type {kind.__qualname__}", path)


def _base(value: object) -> type:
    for base in (str, int, float):
        if isinstance(value, base):
            return base
    raise AssertionError(value)


def encode_result(value: object, tool: str) -> JsonValue:
    """Return `value` (a tool's return value) as JSON, or raise `ToolResultError`.

    >>> import dataclasses, enum
    >>> class Colour(enum.Enum):
    ...     RED = "red"
    >>> @dataclasses.dataclass
    ... class Paint:
    ...     colour: Colour
    ...     litres: float
    >>> encode_result([Paint(Colour.RED, 2.5)], "mix")
    [{'colour': 'red', 'litres': 2.5}]
    """
    try:
        return _encode(value, "")
    except _Unencodable as exc:
        where = f" at {exc.path}" if exc.path else ""
        raise ToolResultError(
            f"tool {tool} returned {exc.what}{where}, which mule cannot encode as JSON; return"
            " a str, JSON values, dataclasses, attrs classes, pydantic models, TypedDicts,"
            " enums or datetimes (or lists and dicts of them), or a MuleToolResult"
        ) from None


# -- the return annotation, checked when the tool is made -----------------------------------

_LEAVES: tuple[type, ...] = (str, int, float, bool, type(None), TextContent, ImageContent)
_CONTAINERS: tuple[type, ...] = (
    list,
    tuple,
    set,
    frozenset,
    dict,
    abc.Sequence,
    abc.Mapping,
    abc.Set,
)


def _known(hint: Any) -> bool:
    """Whether a return annotation names only types a tool result may hold."""
    if hint is None or hint is Any or hint is object or hint is inspect.Parameter.empty:
        return True
    if isinstance(hint, typing.TypeVar | str | typing.ForwardRef):
        return True  # decided by the value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return _known(args[0])
    if origin is typing.Literal:
        return True
    if origin in (typing.Union, types.UnionType):
        return all(_known(a) for a in args)
    if origin is not None:
        return origin in _CONTAINERS and all(a is ... or _known(a) for a in args)
    if not isinstance(hint, type):
        return True  # a special form we do not judge: the value is checked when returned
    import datetime  # here, where a tool is made: `import mule` need not import it

    if issubclass(hint, (MuleToolResult, *_LEAVES, *_CONTAINERS)):
        return True
    if issubclass(hint, datetime.datetime | datetime.date | datetime.time):
        return True
    if issubclass(hint, enum.Enum) or typing.is_typeddict(hint):
        return True
    if dataclasses.is_dataclass(hint) or attrs.has(hint):
        return True
    return hasattr(hint, "model_dump") and hasattr(hint, "model_fields")


def check_return(hint: Any, tool: str) -> None:
    """Refuse a return annotation no value of which mule could encode (`ToolSignatureError`)."""
    if not _known(hint):
        raise ToolSignatureError(
            f"{tool}: cannot encode its return type {hint!r} as JSON; return a str, JSON"
            " values, dataclasses, attrs classes, pydantic models, TypedDicts, enums or"
            " datetimes (or lists and dicts of them), or a MuleToolResult"
        )


__all__ = ["ToolResultError", "check_return", "encode_result"]
