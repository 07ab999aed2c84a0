"""Pi's JSON wire format: camelCase keys, `type`/`role` tags, and no key for an unset optional."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import (
    Any,
    Literal,
    NoReturn,
    TypeVar,
    cast,
    final,
    get_args,
    get_origin,
    get_type_hints,
)

import attrs
import cattrs
from cattrs.errors import AttributeValidationNote
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.v import format_exception

from mule.pi._content import (
    AssistantContent,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserContent,
)
from mule.pi._context import Context, ThinkingBudgets, Tool
from mule.pi._events import EVENT_CLASSES, AssistantMessageEvent
from mule.pi._messages import (
    AssistantMessage,
    Diagnostic,
    DiagnosticError,
    Message,
    ToolResultMessage,
    Usage,
    UsageCost,
    UserMessage,
)
from mule.pi._model import Model, ModelCost

T = TypeVar("T")


@final
class WireError(ValueError):
    """Data that does not decode as the requested Pi type; `errors` name each fault's path."""

    def __init__(self, type_name: str, errors: Sequence[str]) -> None:
        self.type_name = type_name
        self.errors = tuple(errors)
        super().__init__(f"invalid {type_name}: " + "; ".join(self.errors))


def camel(name: str) -> str:
    """Return the camelCase wire key of a snake_case attribute name."""
    head, *rest = name.lstrip("_").split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


_CONTENT_TAGS: dict[str, type[Any]] = {
    "text": TextContent,
    "thinking": ThinkingContent,
    "image": ImageContent,
    "toolCall": ToolCall,
}
_MESSAGE_TAGS: dict[str, type[Any]] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "toolResult": ToolResultMessage,
}
_EVENT_CLASSES: tuple[type[Any], ...] = EVENT_CLASSES
_EVENT_TAGS: dict[str, type[Any]] = {c.type: c for c in _EVENT_CLASSES}
_TAG_KEY: dict[type[Any], tuple[str, str]] = {
    **{c: ("type", tag) for tag, c in _CONTENT_TAGS.items()},
    **{c: ("role", tag) for tag, c in _MESSAGE_TAGS.items()},
    **{c: ("type", c.type) for c in _EVENT_CLASSES},
}


class _Fault(ValueError):
    """A decoding fault whose text already says what is wrong."""


def _fail(message: str) -> NoReturn:
    raise _Fault(message)


def _format_fault(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, _Fault):
        return str(exc)
    if get_origin(type_) is Literal and not isinstance(exc, KeyError):
        return f"expected one of {', '.join(map(repr, get_args(type_)))}"
    return format_exception(exc, type_)


def _wire_path(error: str) -> str:
    # cattrs names attributes in its paths; the wire names are their camelCase forms.
    text, at, path = error.rpartition(" @ ")
    if not at:
        return error
    return f"{text} @ " + re.sub(r"\.([a-z_]+)", lambda m: "." + camel(m[1]), path)


def _check_json(value: object, path: str = "") -> None:
    if value is None or type(value) in (str, bool, int, float):
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if type(k) is not str:
                _fail(f"object key {k!r} at {path or '.'} is not a string")
            _check_json(v, f"{path}.{k}")
        return
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        for i, v in enumerate(value):
            _check_json(v, f"{path}[{i}]")
        return
    _fail(f"{type(value).__name__} at {path or '.'} is not a JSON value")


def _strict(kind: type[Any], accept: tuple[type[Any], ...]) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if type(value) not in accept:
            _fail(f"expected {kind.__name__}, got {type(value).__name__}")
        return kind(value) if kind is float else value

    return structure


def _build() -> cattrs.Converter:
    conv = cattrs.Converter(
        forbid_extra_keys=False,
        unstruct_collection_overrides={tuple: list, Sequence: list},
        detailed_validation=True,
    )
    conv.register_structure_hook(str, _strict(str, (str,)))
    conv.register_structure_hook(int, _strict(int, (int,)))
    conv.register_structure_hook(float, _strict(float, (int, float)))
    conv.register_structure_hook(bool, _strict(bool, (bool,)))

    def structure_code(value: Any, _: Any) -> Any:
        if value is not None and type(value) not in (str, int):
            _fail(f"expected a string or an integer, got {type(value).__name__}")
        return value

    conv.register_structure_hook_func(lambda x: x == (str | int | None), structure_code)
    conv.register_structure_hook_func(lambda x: x == (str | int), structure_code)

    def tagged(tags: dict[str, type[Any]], key: str) -> Callable[[Any, Any], Any]:
        def structure(value: Any, _: Any) -> Any:
            if not isinstance(value, Mapping):
                _fail(f"expected a JSON object, got {type(value).__name__}")
            tag = value.get(key)
            cls = tags.get(tag) if isinstance(tag, str) else None
            if cls is None:
                _fail(f"unknown {key} {tag!r} (expected one of {', '.join(tags)})")
            return conv.structure(value, cls)

        return structure

    content_union = tagged(_CONTENT_TAGS, "type")
    for union in (AssistantContent, UserContent):
        conv.register_structure_hook_func(partial(operator.eq, union), content_union)
    conv.register_structure_hook_func(lambda x: x == Message, tagged(_MESSAGE_TAGS, "role"))
    conv.register_structure_hook_func(
        lambda x: x == AssistantMessageEvent, tagged(_EVENT_TAGS, "type")
    )

    user_blocks = tuple[UserContent, ...]

    def structure_user_content(value: Any, _: Any) -> Any:
        if type(value) is str:
            return value
        if not isinstance(value, list):
            _fail(f"expected a string or a list of blocks, got {type(value).__name__}")
        return conv.structure(value, user_blocks)

    conv.register_structure_hook_func(lambda x: x == (str | user_blocks), structure_user_content)

    plain: tuple[type[Any], ...] = (UsageCost, Usage, DiagnosticError, Diagnostic, ModelCost)
    plain += (Model, Tool, Context, ThinkingBudgets, ToolResultMessage, UserMessage)
    plain += (AssistantMessage, TextContent, ThinkingContent, ImageContent, ToolCall)
    for cls in plain:
        _register_class(conv, cls)
    for cls in _EVENT_CLASSES:
        _register_event(conv, cls)
    return conv


def _structure_json(value: Any, _: Any) -> Any:
    _check_json(value)
    return value


def _structure_object(value: Any, _: Any) -> Any:
    if not isinstance(value, Mapping):
        _fail(f"expected a JSON object, got {type(value).__name__}")
    _check_json(value)
    return value


def _identity(value: Any) -> Any:
    return value


def _field_override(a: attrs.Attribute[Any]) -> Any:
    # JSON-valued fields are recognised by their declared annotation: the recursive alias does
    # not survive type resolution in a form a hook predicate could match.
    annotation = str(a.type)
    extra: dict[str, Any] = {}
    if "JsonValue" in annotation or "Mapping[str, str | None]" in annotation:
        extra = {"struct_hook": _structure_json, "unstruct_hook": _identity}
    elif "JsonObject" in annotation or "Mapping[" in annotation:
        extra = {"struct_hook": _structure_object, "unstruct_hook": _identity}
        if "None" in annotation:
            extra["struct_hook"] = lambda v, t: None if v is None else _structure_object(v, t)
    return override(rename=camel(a.name), omit_if_default=a.default is None, **extra)


def _register_class(conv: cattrs.Converter, cls: type[Any]) -> None:
    overrides = {a.name: _field_override(a) for a in attrs.fields(cls)}
    unstructure = make_dict_unstructure_fn(cls, conv, **overrides)
    structure = make_dict_structure_fn(cls, conv, **overrides)
    tag = _TAG_KEY.get(cls)
    if tag is None:
        conv.register_unstructure_hook(cls, unstructure)
    else:
        key, value = tag

        def tagged_unstructure(obj: Any) -> dict[str, Any]:
            return {key: value, **unstructure(obj)}

        conv.register_unstructure_hook(cls, tagged_unstructure)

    def checked(data: Any, t: Any) -> Any:
        if not isinstance(data, Mapping):
            _fail(f"expected a JSON object, got {type(data).__name__}")
        if tag is not None and data.get(tag[0], tag[1]) != tag[1]:
            _fail(f"{tag[0]} is {data.get(tag[0])!r}, expected {tag[1]!r}")
        return structure(data, t)

    conv.register_structure_hook(cls, checked)


def _register_event(conv: cattrs.Converter, cls: type[Any]) -> None:
    hints = get_type_hints(cls)
    fields = [
        (a.name, "partial" if a.name == "_partial" else camel(a.name)) for a in attrs.fields(cls)
    ]
    kinds = {key: AssistantMessage if key == "partial" else hints[name] for name, key in fields}
    tag: str = cls.type

    def unstructure(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"type": tag}
        for name, key in fields:
            value = obj.partial if key == "partial" else getattr(obj, name)
            out[key] = conv.unstructure(value)
        return out

    def structure(data: Any, _: Any) -> Any:
        if not isinstance(data, Mapping):
            _fail(f"expected a JSON object, got {type(data).__name__}")
        errors: list[Exception] = []
        kwargs: dict[str, Any] = {}
        for name, key in fields:
            try:
                if key not in data:
                    raise KeyError(key)
                kwargs[name.lstrip("_")] = conv.structure(data[key], kinds[key])
            except Exception as exc:
                exc.__notes__ = [
                    AttributeValidationNote(
                        f"Structuring class {cls.__name__} @ attribute {key}", key, kinds[key]
                    )
                ]
                errors.append(exc)
        if errors:
            raise cattrs.ClassValidationError(f"While structuring {cls.__name__}", errors, cls)
        return cls(**kwargs)

    conv.register_unstructure_hook(cls, unstructure)
    conv.register_structure_hook(cls, structure)


_CONVERTER = _build()


def to_wire(value: object) -> Any:
    """Return Pi's JSON-compatible form of a mule.pi value (camelCase keys, no null optionals).

    >>> to_wire(TextContent("hi"))
    {'type': 'text', 'text': 'hi'}
    """
    return _CONVERTER.unstructure(value)


def from_wire(type_: Any, data: object) -> Any:
    """Decode Pi JSON as `type_` (a class or a union such as `Message`); raise `WireError`.

    Unknown extra keys are ignored, so JSON from newer Pi versions still decodes.

    >>> from_wire(TextContent, {"type": "text", "text": "hi"})
    TextContent(text='hi', text_signature=None)
    """
    try:
        return _CONVERTER.structure(data, type_)
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as exc:
        name = getattr(type_, "__name__", None) or " | ".join(
            getattr(a, "__name__", str(a)) for a in get_args(type_)
        )
        if isinstance(exc, cattrs.BaseValidationError):
            errors = [_wire_path(e) for e in cattrs.transform_error(exc, "$", _format_fault)]
        else:
            errors = [f"{exc} @ $"]
        raise WireError(name, errors) from exc


def decode(type_: type[T], data: object) -> T:
    """Typed `from_wire` for a concrete class."""
    return cast(T, from_wire(type_, data))


__all__ = ["WireError", "camel", "decode", "from_wire", "to_wire"]
