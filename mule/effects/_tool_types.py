"""Python types as JSON schemas, and JSON values decoded back into them, for `@tool`.

`schema_for(type)` covers what a tool signature uses: primitives, `Literal`, enums, optional
and union types, lists, tuples, sets, dicts, `TypedDict`, dataclasses, attrs classes,
`Annotated[T, "description"]`, and pydantic models when pydantic is installed (their own
`model_json_schema`). `decode(value, type)` turns a validated argument into that type.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

if TYPE_CHECKING:
    import cattrs

_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


class ToolSignatureError(TypeError):
    """A function's signature cannot be described as a JSON schema."""


def _pydantic_model(annotation: Any) -> bool:
    """Whether `annotation` is a pydantic model class (pydantic is never imported for it)."""
    pydantic = sys.modules.get("pydantic")
    return (
        pydantic is not None
        and isinstance(annotation, type)
        and issubclass(annotation, pydantic.BaseModel)
    )


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def with_default(schema: dict[str, Any], default: Any) -> dict[str, Any]:
    """Add a JSON default to a property's schema (an enum member as its value)."""
    if isinstance(default, enum.Enum):
        default = default.value
    if default is None or isinstance(default, str | int | float | bool):
        return {**schema, "default": default}
    return schema


def _enum_schema(cls: type[enum.Enum]) -> dict[str, Any]:
    values = [m.value for m in cls]
    out: dict[str, Any] = {"enum": values}
    kinds = {_PRIMITIVES.get(type(v)) for v in values}
    if len(kinds) == 1 and None not in kinds:
        out["type"] = kinds.pop()
    return out


def _fields_schema(
    hints: Mapping[str, Any], names: Sequence[str], defaults: Mapping[str, Any], required: list[str]
) -> dict[str, Any]:
    props = {}
    for name in names:
        prop = schema_for(hints[name])
        if name in defaults:
            prop = with_default(prop, defaults[name])
        props[name] = prop
    return _object(props, required)


def _dataclass_schema(cls: type[Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    required = [
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    return _fields_schema(hints, [f.name for f in fields], defaults, required)


def _attrs_schema(cls: type[Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = [a for a in attrs.fields(cls) if a.init]
    defaults = {
        a.name: a.default
        for a in fields
        if a.default is not attrs.NOTHING and not isinstance(a.default, attrs.Factory)  # type: ignore[arg-type]
    }
    required = [a.name for a in fields if a.default is attrs.NOTHING]
    # attrs strips a leading underscore from the __init__ argument (the wire name)
    return _fields_schema(hints, [a.name for a in fields], defaults, required)


def schema_for(annotation: Any) -> dict[str, Any]:
    """Return the JSON schema of a Python type annotation (the subset tools need).

    >>> schema_for(list[int] | None)
    {'anyOf': [{'type': 'array', 'items': {'type': 'integer'}}, {'type': 'null'}]}
    """
    if annotation is Any or annotation is inspect.Parameter.empty or annotation is object:
        return {}
    if annotation is type(None) or annotation is None:
        return {"type": "null"}
    if annotation in _PRIMITIVES:
        return {"type": _PRIMITIVES[annotation]}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = schema_for(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**inner, "description": " ".join(notes)} if notes else inner
    if origin is Literal:
        values = [v.value if isinstance(v, enum.Enum) else v for v in args]
        kinds = {_PRIMITIVES.get(type(v)) for v in values}
        out: dict[str, Any] = {"enum": values}
        if len(kinds) == 1 and None not in kinds:
            out["type"] = kinds.pop()
        return out
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [schema_for(a) for a in args]}
    if origin in (list, Sequence, set, frozenset) or (origin is tuple and args[-1:] == (...,)):
        items = {"type": "array", "items": schema_for(args[0]) if args else {}}
        return {**items, "uniqueItems": True} if origin in (set, frozenset) else items
    if origin is tuple:
        return {
            "type": "array",
            "prefixItems": [schema_for(a) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin in (dict, Mapping):
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": schema_for(value)}
    if annotation in (list, tuple, set, frozenset):
        return {"type": "array"}
    if annotation is dict:
        return {"type": "object"}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_schema(annotation)
    if typing.is_typeddict(annotation):
        hints = typing.get_type_hints(annotation, include_extras=True)
        required = sorted(annotation.__required_keys__)
        return _object({k: schema_for(v) for k, v in hints.items()}, required)
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        return _dataclass_schema(annotation)
    if isinstance(annotation, type) and attrs.has(annotation):
        return _attrs_schema(annotation)
    if _pydantic_model(annotation):
        schema: dict[str, Any] = annotation.model_json_schema()
        return schema
    raise ToolSignatureError(f"no JSON schema for {annotation!r}")


def _is_union(t: Any) -> bool:
    return typing.get_origin(t) in (typing.Union, types.UnionType)


def _union_hook(t: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Decode a union by trying its members in order (the schema already validated it)."""
    members = typing.get_args(t)

    def structure(value: Any, _: Any) -> Any:
        if value is None and type(None) in members:
            return None
        errors: list[str] = []
        for member in members:
            if member is type(None):
                continue
            if (
                member in _PRIMITIVES
                and type(value) is not member
                and not (member is float and type(value) is int)
            ):
                continue
            try:
                return conv.structure(value, member)
            except Exception as exc:
                errors.append(f"{getattr(member, '__name__', member)}: {exc}")
        raise ValueError(f"{value!r} matches none of {t}: " + "; ".join(errors))

    return structure


@functools.cache
def _decoder() -> cattrs.Converter:
    """Return the converter of annotated parameters (cattrs loads with the first one decoded)."""
    import cattrs

    conv = cattrs.Converter()
    conv.register_structure_hook_factory(_is_union, _union_hook)
    conv.register_structure_hook_func(_pydantic_model, lambda v, t: t.model_validate(v))
    return conv


# What cattrs does for these classes (its `_structure_call`, a bool through int's hook too).
_CALLED = frozenset({int, float, str, bool})


def decode(value: Any, annotation: Any) -> Any:
    """Return the validated JSON `value` as an instance of `annotation`."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return value
    if type(annotation) is type and annotation in _CALLED:
        return annotation(value)
    return _decoder().structure(value, annotation)


__all__ = ["ToolSignatureError", "decode", "schema_for"]
