"""Pi's JSON wire format: camelCase keys, tags, no key for an unset optional, JS numbers.

`PI_CODEC` encodes and decodes Pi's values; `to_wire`, `from_wire`, `decode`, `to_json` and
`from_json` are its methods. The layers above build codecs for their own values with
`PI_CODEC.extend(...)`, which returns a new codec: no import ever changes Pi's.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import (
    Any,
    Literal,
    NoReturn,
    TypeVar,
    Union,
    cast,
    final,
    get_args,
    get_origin,
    get_type_hints,
)

import attrs
import cattrs
from cattrs.errors import AttributeValidationNote, ClassValidationError
from cattrs.gen import make_dict_structure_fn, override
from cattrs.v import format_exception

from mule.pi._content import (
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserContent,
)
from mule.pi._context import Context, ThinkingBudgets, Tool
from mule.pi._events import EVENT_CLASSES
from mule.pi._js_values import as_json_number
from mule.pi._json import loads, stringify
from mule.pi._messages import (
    WIRE_REQUIRED,
    AssistantMessage,
    Diagnostic,
    DiagnosticError,
    ToolResultMessage,
    Usage,
    UsageCost,
    UserMessage,
)
from mule.pi._model import Model, ModelCost
from mule.pi._unstructure import EXTRAS, Compiler, Encoder, Spec, camel, is_free_json

T = TypeVar("T")


@final
class WireError(ValueError):
    """Data that does not decode as the requested type; `errors` name each fault's path."""

    def __init__(self, type_name: str, errors: Sequence[str]) -> None:
        self.type_name = type_name
        self.errors = tuple(errors)
        super().__init__(f"invalid {type_name}: " + "; ".join(self.errors))


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


def _type_name(type_: Any) -> str:
    return getattr(type_, "__name__", None) or " | ".join(
        getattr(a, "__name__", str(a)) for a in get_args(type_)
    )


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


def _structure_json(value: Any, _: Any) -> Any:
    _check_json(value)
    return value


def _structure_object(value: Any, _: Any) -> Any:
    if not isinstance(value, Mapping):
        _fail(f"expected a JSON object, got {type(value).__name__}")
    _check_json(value)
    return value


def _structure_object_or_none(value: Any, t: Any) -> Any:
    return None if value is None else _structure_object(value, t)


def _free_json_hook(cls: type[Any], name: str) -> Callable[[Any, Any], Any]:
    # Read from the resolved type: a JSON object (Mapping[str, JsonValue], headers) must be a
    # mapping; any other free JSON (JsonValue, a mapping whose values may be null) any value.
    declared_type: Any = attrs.fields_dict(attrs.resolve_types(cls))[name].type
    args = get_args(declared_type)
    nullable = type(None) in args
    inner = [a for a in args if a is not type(None)] if nullable else [declared_type]
    if len(inner) == 1 and get_origin(inner[0]) is Mapping:
        values = get_args(inner[0])[1:]
        if not values or set(get_args(values[0])) != {str, type(None)}:
            return _structure_object_or_none if nullable else _structure_object
    return _structure_json


def _register_decoder(conv: cattrs.Converter, cls: type[Any], tag: tuple[str, str] | None) -> None:
    """Register a checked decoder for `cls`, generated by cattrs on its first use."""
    generated: list[Callable[[Any, Any], Any]] = []

    def generate() -> Callable[[Any, Any], Any]:
        overrides: dict[str, Any] = {}
        for a in attrs.fields(cls):
            public = a.name.lstrip("_")
            hook: Callable[[Any, Any], Any] | None = None
            if public != a.name and isinstance(getattr(cls, public, None), property):
                # A lazy snapshot's field: decoded as what its property returns.
                kind = get_type_hints(getattr(cls, public).fget)["return"]
                hook = partial(_structure_as, conv, kind)
            elif is_free_json(cls, a.name):
                hook = _free_json_hook(cls, a.name)
            overrides[a.name] = override(rename=camel(a.name), struct_hook=hook)
        generated.append(make_dict_structure_fn(cls, conv, **overrides))
        return generated[0]

    # Fields with a Python default (a timestamp of now) that the wire must still carry.
    required = tuple(a for a in attrs.fields(cls) if a.metadata.get(WIRE_REQUIRED))

    # A class with an `extras` field keeps the keys it has no field for (in their order).
    known = frozenset(camel(a.name) for a in attrs.fields(cls) if a.name != EXTRAS)
    if tag is not None:
        known |= {tag[0]}
    keeps_extras = EXTRAS in attrs.fields_dict(cls)

    def checked(data: Any, t: Any) -> Any:
        if not isinstance(data, Mapping):
            _fail(f"expected a JSON object, got {type(data).__name__}")
        if tag is not None and data.get(tag[0], tag[1]) != tag[1]:
            _fail(f"{tag[0]} is {data.get(tag[0])!r}, expected {tag[1]!r}")
        for a in required:
            if camel(a.name) not in data:
                _missing(cls, a)
        if keeps_extras and not known.issuperset(data):
            unknown = {k: v for k, v in data.items() if k not in known}
            data = {k: v for k, v in data.items() if k in known}
            data[EXTRAS] = unknown
        return (generated[0] if generated else generate())(data, t)

    conv.register_structure_hook(cls, checked)


def _missing(cls: type[Any], a: attrs.Attribute[Any]) -> NoReturn:
    """Raise what cattrs raises for a missing required key, so paths and texts match."""
    exc = KeyError(camel(a.name))
    exc.__notes__ = [
        AttributeValidationNote(
            f"Structuring class {cls.__qualname__} @ attribute {a.name}", a.name, a.type
        )
    ]
    raise ClassValidationError(f"While structuring {cls.__name__}", [exc], cls)


def _register_tagged_unions(conv: cattrs.Converter, key: str, group: dict[str, type[Any]]) -> None:
    """Decode any union of these classes (`Message`, `AssistantContent`...) by its tag."""
    members = frozenset(group.values())

    def is_union(t: Any) -> bool:
        if get_origin(t) not in (Union, types.UnionType):
            return False
        args = get_args(t)
        return len(args) > 1 and members.issuperset(args)

    def factory(t: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
        tags = {tag: cls for tag, cls in group.items() if cls in get_args(t)}

        def structure(value: Any, _: Any) -> Any:
            if not isinstance(value, Mapping):
                _fail(f"expected a JSON object, got {type(value).__name__}")
            tag = value.get(key)
            cls = tags.get(tag) if isinstance(tag, str) else None
            if cls is None:
                _fail(f"unknown {key} {tag!r} (expected one of {', '.join(tags)})")
            return conv.structure(value, cls)

        return structure

    conv.register_structure_hook_factory(is_union, factory)


def _structure_as(conv: cattrs.Converter, kind: Any, value: Any, _: Any) -> Any:
    return conv.structure(value, kind)


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
_EVENT_TAGS: dict[str, type[Any]] = {c.type: c for c in EVENT_CLASSES}


def _base_converter() -> cattrs.Converter:
    """Return a converter with strict JSON scalars and JavaScript numbers."""
    conv = cattrs.Converter(
        forbid_extra_keys=False,
        unstruct_collection_overrides={tuple: list, Sequence: list},
        detailed_validation=True,
    )
    conv.register_structure_hook(str, _strict(str, (str,)))
    conv.register_structure_hook(int, _strict(int, (int,)))
    conv.register_structure_hook(float, _strict(float, (int, float)))
    conv.register_structure_hook(bool, _strict(bool, (bool,)))
    conv.register_unstructure_hook(float, as_json_number)
    # A class no codec was extended with is an error, never cattrs' default (snake_case keys).
    conv.register_unstructure_hook_func(attrs.has, _unknown_class)
    conv.register_structure_hook_func(attrs.has, _unknown_class)

    def structure_code(value: Any, _: Any) -> Any:
        if value is not None and type(value) not in (str, int):
            _fail(f"expected a string or an integer, got {type(value).__name__}")
        return value

    conv.register_structure_hook_func(lambda x: x == (str | int | None), structure_code)
    conv.register_structure_hook_func(lambda x: x == (str | int), structure_code)

    conv.register_structure_hook_factory(
        lambda x: x == (str | _USER_BLOCKS), lambda _, c: partial(_structure_user_content, c)
    )
    return conv


_USER_BLOCKS = tuple[UserContent, ...]


def _unknown_class(value: Any, t: Any = None) -> NoReturn:
    cls = t if t is not None else type(value)
    raise TypeError(
        f"{getattr(cls, '__name__', cls)} is not a value of this codec: extend a codec with it"
        " (mule.effects.MULE_CODEC has mule's values)"
    )


def _structure_user_content(conv: cattrs.Converter, value: Any, _: Any) -> Any:
    if type(value) is str:
        return value
    if not isinstance(value, list):
        _fail(f"expected a string or a list of blocks, got {type(value).__name__}")
    return conv.structure(value, _USER_BLOCKS)


def _tag_of(cls: type[Any], key: str | None) -> tuple[str, str] | None:
    return None if key is None else (key, str(getattr(cls, key)))


@final
class WireCodec:
    """A JSON codec over a set of attrs classes: Pi's (`PI_CODEC`), or Pi's and more.

    A class is written with camelCase keys, its tag first (`"type": "text"`), and no key for an
    optional attribute left at None; numbers are written as JavaScript writes them. Decoding
    is strict about types (a JSON `1.5` is no `int`) and ignores unknown keys, so JSON from
    newer versions still decodes. Codecs are immutable: `extend` returns a new one.
    """

    __slots__ = ("_compiler", "_conv")

    def __init__(self, conv: cattrs.Converter, compiler: Compiler) -> None:
        self._conv = conv
        self._compiler = compiler

    def extend(
        self,
        classes: Iterable[type[Any]] = (),
        *,
        tagged: Mapping[str, Iterable[type[Any]]] | None = None,
        nulls: bool = False,
        properties: Mapping[type[Any], Sequence[str]] | None = None,
    ) -> WireCodec:
        """Return a codec that also handles these attrs classes; this one is unchanged.

        `classes` are written untagged; `tagged` maps a ClassVar name to classes written with
        that ClassVar first as their tag (`{"type": events}`: `{"type": "run_start", ...}`).
        `nulls` writes optionals left at None as null instead of leaving them out;
        `properties` names read-only properties written after a class's fields (never read).
        A private field behind a public property of the same name (a lazy snapshot) is written
        as what the property returns, under the property's name. Classes that refer to each
        other must come in one call.
        """
        props = properties or {}
        keyed: list[tuple[type[Any], str | None]] = [(cls, None) for cls in classes]
        keyed += [(cls, key) for key, group in (tagged or {}).items() for cls in group]
        return self._with(
            {cls: Spec(_tag_of(cls, key), nulls, tuple(props.get(cls, ()))) for cls, key in keyed}
        )

    def _with(self, specs: Mapping[type[Any], Spec]) -> WireCodec:
        known = [cls.__name__ for cls in specs if cls in self._compiler.specs]
        if known:
            raise ValueError(f"already in this codec: {', '.join(known)}")
        conv = self._conv.copy()
        compiler = Compiler(conv, {**self._compiler.specs, **specs}, self._compiler.done)
        groups: dict[str, dict[str, type[Any]]] = {}
        for cls, spec in specs.items():
            conv.register_unstructure_hook(cls, compiler.encoder(cls))
            _register_decoder(conv, cls, spec.tag)
            if spec.tag is not None:
                groups.setdefault(spec.tag[0], {})[spec.tag[1]] = cls
        for key, group in groups.items():
            _register_tagged_unions(conv, key, group)
        return WireCodec(conv, compiler)

    def encoder(self, cls: type[Any], *, omit: Iterable[str] = ()) -> Encoder:
        """Return the compiled encoder of `cls`, without the attributes named in `omit`.

        For hot paths that write a known class many times (a stream event without its
        snapshot): one call, no dispatch.
        """
        return self._compiler.encoder(cls, omit)

    def to_wire(self, value: object) -> Any:
        """Return the JSON-compatible form of `value` (dicts, lists and JSON scalars).

        >>> PI_CODEC.to_wire(TextContent("hi"))
        {'type': 'text', 'text': 'hi'}
        """
        return self._conv.unstructure(value)

    def from_wire(self, type_: Any, data: object) -> Any:
        """Decode JSON-compatible `data` as `type_` (a class or a union); raise `WireError`.

        >>> PI_CODEC.from_wire(TextContent, {"type": "text", "text": "hi"})
        TextContent(text='hi', text_signature=None)
        """
        try:
            return self._conv.structure(data, type_)
        except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as exc:
            if isinstance(exc, cattrs.BaseValidationError):
                errors = [_wire_path(e) for e in cattrs.transform_error(exc, "$", _format_fault)]
            else:
                errors = [f"{exc} @ $"]
            raise WireError(_type_name(type_), errors) from exc

    def decode(self, type_: type[T], data: object) -> T:
        """Typed `from_wire` for a concrete class."""
        return cast(T, self.from_wire(type_, data))

    def to_json(self, value: object) -> str:
        """Return `value` as compact JSON text, as `JSON.stringify` writes its wire form.

        >>> PI_CODEC.to_json(UsageCost(input=3.0, output=0.000036))
        '{"input":3,"output":0.000036,"cacheRead":0,"cacheWrite":0,"total":0}'
        """
        return stringify(self._conv.unstructure(value))

    def from_json(self, type_: Any, text: str | bytes) -> Any:
        """Parse JSON text and decode it as `type_`; raise `WireError` for either fault."""
        try:
            data = loads(text)  # bounded: depth and number size
        except ValueError as exc:
            raise WireError(_type_name(type_), [f"not JSON ({exc}) @ $"]) from exc
        return self.from_wire(type_, data)


def _build() -> WireCodec:
    conv = _base_converter()
    specs: dict[type[Any], Spec] = {
        cls: Spec()
        for cls in (UsageCost, Usage, DiagnosticError, Diagnostic, ModelCost, Model, Tool)
    }
    specs |= {ThinkingBudgets: Spec(), Context: Spec()}
    specs |= {cls: Spec(("type", tag)) for tag, cls in _CONTENT_TAGS.items()}
    specs |= {cls: Spec(("role", tag)) for tag, cls in _MESSAGE_TAGS.items()}
    specs |= {cls: Spec(("type", tag)) for tag, cls in _EVENT_TAGS.items()}
    return WireCodec(conv, Compiler(conv, {}))._with(specs)


PI_CODEC: WireCodec = _build()
"""Pi's own values: messages, content blocks, stream events, models, tools, contexts."""

to_wire = PI_CODEC.to_wire
from_wire = PI_CODEC.from_wire
to_json = PI_CODEC.to_json
from_json = PI_CODEC.from_json


def decode(type_: type[T], data: object) -> T:
    """Typed `from_wire` for a concrete class."""
    return PI_CODEC.decode(type_, data)


__all__ = [
    "PI_CODEC",
    "WireCodec",
    "WireError",
    "camel",
    "decode",
    "from_json",
    "from_wire",
    "to_json",
    "to_wire",
]
