"""Compiled encoders: one generated function per class, writing wire keys straight into one dict.

cattrs generates the decoders (with detailed validation); the encoders are generated here
because the wire puts a constant tag first (`"type": "text"`, `"role": "user"`), reads lazy
snapshots through their public property, and may add read-only properties, which cattrs'
generated functions cannot do without building a second dict. Encoding is the hot path (the
journal and the server encode every event), so each class gets straight-line code: a dict
display of its keys, with a handler call only where a value is not already JSON.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union, get_args, get_origin, get_type_hints

import attrs
import cattrs
from cattrs.fns import identity

from mule._publish import written_annotations
from mule.pi._js_values import as_json_number

Encoder = Callable[[Any], Any]


def camel(name: str) -> str:
    """Return the camelCase wire key of a snake_case attribute name."""
    head, *rest = name.lstrip("_").split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def declared(cls: type[Any], name: str) -> str:
    """Return an attribute's annotation as written (attrs' `type` may be resolved in place)."""
    for klass in cls.__mro__:
        annotations = written_annotations(klass)
        if name in annotations:
            return str(annotations[name])
    return ""


def is_free_json(cls: type[Any], name: str) -> bool:
    """Whether a field holds free JSON (arguments, details, headers...): written as it is.

    Recognised by the declared annotation: the recursive JsonValue alias does not survive type
    resolution in a form that could be matched.
    """
    text = declared(cls, name)
    return "JsonValue" in text or "JsonObject" in text or "Mapping[" in text


@attrs.frozen
class Spec:
    """How one class is written: its tag (key, value), and whether unset optionals stay null."""

    tag: tuple[str, str] | None = None
    nulls: bool = False
    properties: tuple[str, ...] = ()


def _strip_none(t: Any) -> tuple[Any, bool]:
    if get_origin(t) in (Union, types.UnionType):
        args = get_args(t)
        if type(None) in args:
            rest = tuple(a for a in args if a is not type(None))
            return (rest[0] if len(rest) == 1 else Union[rest]), True  # noqa: UP007
    return t, False


class Compiler:
    """Generates and memoises the encoders of a set of classes over a cattrs converter.

    Known classes are encoded by their generated functions (never by cattrs' default for an
    attrs class, whatever the registration order); other types by the converter's hooks.
    """

    def __init__(
        self,
        conv: cattrs.Converter,
        specs: Mapping[type[Any], Spec],
        done: Mapping[type[Any], Encoder] | None = None,
    ) -> None:
        self.conv = conv
        self.specs = dict(specs)
        self.done: dict[type[Any], Encoder] = dict(done or {})

    def encoder(self, cls: type[Any], omit: Iterable[str] = ()) -> Encoder:
        """Return the encoder of `cls`, leaving out the fields named in `omit` (public names)."""
        omitted = frozenset(omit)
        if not omitted and cls in self.done:
            return self.done[cls]
        fn = self._generate(cls, self.specs.get(cls, Spec()), omitted)
        if not omitted:
            self.done[cls] = fn
        return fn

    def expression(self, t: Any, value: str, ns: dict[str, Any], depth: int = 0) -> str:
        """Return code writing `value` (an expression of type `t`) as JSON; names go in `ns`.

        Tuples become list comprehensions and unions of known classes a lookup by runtime
        class, inline: no call per layer.
        """
        if t in _PLAIN or t is type(None):
            return value
        if t is float:
            ns["as_json_number"] = as_json_number
            return f"as_json_number({value})"
        if t in self.specs or t in self.done:
            name = f"e_{len(ns)}"
            ns[name] = self.encoder(t)
            return f"{name}({value})"
        origin, args = get_origin(t), get_args(t)
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            item = f"x{depth}"
            inner = self.expression(args[0], item, ns, depth + 1)
            return f"list({value})" if inner == item else f"[{inner} for {item} in {value}]"
        if origin in (Union, types.UnionType):
            by_class = self._by_class(args)
            if by_class is not None:
                name = f"d_{len(ns)}"
                ns[name] = by_class
                return f"{name}[{value}.__class__]({value})"
        hook = self.conv.get_unstructure_hook(t)
        if hook is identity:
            return value
        name = f"h_{len(ns)}"
        ns[name] = hook
        return f"{name}({value})"

    def _by_class(self, members: tuple[Any, ...]) -> dict[type[Any], Encoder] | None:
        """Map each runtime class of a union to its encoder, or None if one is not known."""
        out: dict[type[Any], Encoder] = {}
        for m in members:
            if m in _PLAIN or m is type(None):
                out[m] = identity
            elif m is float:
                out[float] = as_json_number
                out.setdefault(int, identity)
            elif m in self.specs or m in self.done:
                out[m] = self.encoder(m)
            elif get_origin(m) is tuple:
                ns: dict[str, Any] = {}
                code = self.expression(m, "v", ns)
                exec(f"def tuple_encoder(v):\n    return {code}", ns)
                out[tuple] = ns["tuple_encoder"]
            else:
                return None
        return out

    def _generate(self, cls: type[Any], spec: Spec, omit: frozenset[str]) -> Encoder:
        hints = get_type_hints(cls)
        fields: list[tuple[str, Any, bool]] = []  # (attribute read, type, left out when None)
        extras = False
        for a in _wire_ordered(cls):
            public = a.name.lstrip("_")
            if public in omit:
                continue
            if a.name == EXTRAS:  # unknown wire keys, written back after the known ones
                extras = True
                continue
            if public != a.name and isinstance(getattr(cls, public, None), property):
                # A private field behind a property (a lazy snapshot): write what it reads.
                t = get_type_hints(getattr(cls, public).fget)["return"]
                fields.append((public, t, False))
            else:
                t = Any if is_free_json(cls, a.name) else hints[a.name]
                fields.append((a.name, t, a.default is None and not spec.nulls))
        for name in spec.properties:
            fields.append((name, get_type_hints(getattr(cls, name).fget)["return"], False))

        ns: dict[str, Any] = {}
        # Keys in wire order: the leading always-written keys form one dict display; a key
        # after the first optional one is set by a statement, so the order still holds.
        head = [] if spec.tag is None else [f"{spec.tag[0]!r}: {spec.tag[1]!r}"]
        body: list[str] = []
        for read, t, omit_none in fields:
            key = camel(read)
            inner, nullable = _strip_none(t)
            if omit_none:
                code = "_self(v)" if inner is cls else self.expression(inner, "v", ns)
                body += [
                    f"    v = o.{read}",
                    "    if v is not None:",
                    f"        res[{key!r}] = {code}",
                ]
                continue
            value = f"o.{read}"
            code = f"_self({value})" if inner is cls else self.expression(inner, value, ns)
            if nullable and code != value:
                code = f"None if {value} is None else {code}"
            if body:
                body.append(f"    res[{key!r}] = {code}")
            else:
                head.append(f"{key!r}: {code}")
        if extras:
            body += [f"    if o.{EXTRAS}:", f"        res.update(o.{EXTRAS})"]
        source = "\n".join(
            ["def _self(o):", f"    res = {{{', '.join(head)}}}", *body, "    return res"]
        )
        exec(compile(source, f"<mule encoder {cls.__name__}>", "exec"), ns)
        fn: Encoder = ns["_self"]
        return fn


WIRE_ORDER = "__wire_order__"
"""A class attribute naming its attributes in Pi's key order, when that is not their order."""


def _wire_ordered(cls: type[Any]) -> tuple[attrs.Attribute[Any], ...]:
    """Return the attrs fields of `cls` in wire order (its `__wire_order__`, if it has one)."""
    fields: tuple[attrs.Attribute[Any], ...] = attrs.fields(cls)
    order: tuple[str, ...] | None = getattr(cls, WIRE_ORDER, None)
    if order is None:
        return fields
    by_name = {a.name: a for a in fields}
    if sorted(order) != sorted(by_name):
        raise TypeError(f"{cls.__name__}.{WIRE_ORDER} must name each attribute once")
    return tuple(by_name[n] for n in order)


_PLAIN: frozenset[Any] = frozenset({str, int, bool, Any})

# A field of this name holds the wire keys its class has no field for (decoded and re-written).
EXTRAS = "extras"

__all__ = [
    "EXTRAS",
    "WIRE_ORDER",
    "Compiler",
    "Encoder",
    "Spec",
    "camel",
    "declared",
    "is_free_json",
]
