"""`unevaluatedProperties` and `unevaluatedItems`, as pi-schema 1.6.0 decides them.

Only a schema that uses one of the two compiles this way: its in-place keywords run as
annotating checks that record which properties and items they evaluated (`Annotations`), and
the unevaluated keywords test the rest. Passing `anyOf`/`oneOf` branches, a passing `if`, and
`$ref` targets contribute their annotations; a schema with its own unevaluated keyword keeps
its siblings' annotations out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias, final

from mule.pi._js_values import is_js_number, to_double
from mule.pi._schema_refs import is_schema_object, list_at, object_at
from mule.pi._schema_regex import compile_pattern

if TYPE_CHECKING:
    from mule.pi._schema import Check, Compiler


@final
class Annotations:
    """What the keywords of one schema evaluated on one value."""

    __slots__ = ("all_items", "all_props", "indexes", "items", "props")

    def __init__(self) -> None:
        self.props: set[str] = set()
        self.all_props = False
        self.items = 0
        self.all_items = False
        self.indexes: set[int] = set()

    def merge(self, other: Annotations) -> None:
        self.props |= other.props
        self.all_props = self.all_props or other.all_props
        self.items = max(self.items, other.items)
        self.all_items = self.all_items or other.all_items
        self.indexes |= other.indexes


Annotating: TypeAlias = Callable[[Any, Annotations], bool]

_ANNOTATING: Final = frozenset(
    {
        "properties",
        "patternProperties",
        "additionalProperties",
        "prefixItems",
        "items",
        "additionalItems",
        "contains",
        "minContains",
        "maxContains",
        "allOf",
        "anyOf",
        "oneOf",
        "if",
        "then",
        "else",
        "$ref",
        "$dynamicRef",
        "dependentSchemas",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)


def unevaluated_check(c: Compiler, node: Mapping[str, Any], base: str) -> Check:
    """Return the plain check of a schema with an unevaluated keyword."""
    annotating = annotating_check(c, node, base)
    return lambda v: annotating(v, Annotations())


def annotating_check(c: Compiler, node: Any, base: str) -> Annotating:
    """Return the annotating check of a schema evaluated in place."""
    if node is True:
        return lambda v, a: True
    if node is False:
        return lambda v, a: False
    cache: dict[int, Annotating] = c.__dict__.setdefault("_annotating", {})
    hit = cache.get(id(node))
    if hit is not None:
        return hit
    c.check(node, base)  # raises for a node that is not a schema
    slot: list[Annotating] = []
    cache[id(node)] = lambda v, a: slot[0](v, a)
    built = _build(c, node, c.r.base_for(node, base))
    slot.append(built)
    cache[id(node)] = built
    return built


def _build(c: Compiler, node: Mapping[str, Any], base: str) -> Annotating:
    rest = {k: v for k, v in node.items() if k not in _ANNOTATING}
    plain = c.plain(rest, base)
    parts = _parts(c, node, base) if len(rest) < len(node) else []

    def every(v: Any, a: Annotations) -> bool:
        return plain(v) and all(part(v, a) for part in parts)

    if "unevaluatedProperties" not in node and "unevaluatedItems" not in node:
        return every

    def isolated(v: Any, a: Annotations) -> bool:
        own = Annotations()
        if not every(v, own):
            return False
        a.merge(own)
        return True

    return isolated


def _parts(c: Compiler, node: Mapping[str, Any], base: str) -> list[Annotating]:
    parts: list[Annotating] = []
    if any(k in node for k in ("properties", "patternProperties", "additionalProperties")):
        parts.append(_object_part(c, node, base))
    if any(k in node for k in ("prefixItems", "items", "contains")):
        parts.append(_array_part(c, node, base))
    for member in list_at(node, "allOf"):
        parts.append(annotating_check(c, member, base))
    for key, exactly_one in (("anyOf", False), ("oneOf", True)):
        if isinstance(node.get(key), list):
            parts.append(_any(c, node[key], base, exactly_one))
    if "if" in node:
        parts.append(_if(c, node, base))
    for key in ("$ref", "$dynamicRef"):
        if isinstance(node.get(key), str):
            target, target_base = c.r.resolve(node[key], base)
            parts.append(annotating_check(c, target, target_base))
    if is_schema_object(node.get("dependentSchemas")):
        for key, sub in node["dependentSchemas"].items():
            check = annotating_check(c, sub, base)
            parts.append(_dependent(key, check))
    if "unevaluatedProperties" in node:
        parts.append(_unevaluated_properties(c.check(node["unevaluatedProperties"], base)))
    if "unevaluatedItems" in node:
        parts.append(_unevaluated_items(c.check(node["unevaluatedItems"], base)))
    return parts


def _dependent(key: str, check: Annotating) -> Annotating:
    return lambda v, a: not isinstance(v, dict) or key not in v or check(v, a)


def _object_part(c: Compiler, node: Mapping[str, Any], base: str) -> Annotating:
    props = node.get("properties") if is_schema_object(node.get("properties")) else {}
    assert isinstance(props, dict)
    declared = [(k, c.check(s, base)) for k, s in props.items()]
    pats = [
        (compile_pattern(p), c.check(s, base))
        for p, s in object_at(node, "patternProperties").items()
    ]
    extra = c.check(node["additionalProperties"], base) if "additionalProperties" in node else None
    known = set(props)

    def check(v: Any, a: Annotations) -> bool:
        if not isinstance(v, dict):
            return True
        seen: list[str] = []
        for k, sub in declared:
            if k in v:
                if not sub(v[k]):
                    return False
                seen.append(k)
        for k, value in v.items():
            matched = k in known
            for test, sub in pats:
                if test(k):
                    if not sub(value):
                        return False
                    matched = True
                    seen.append(k)
            if not matched and extra is not None:
                if not extra(value):
                    return False
                seen.append(k)
        a.props.update(seen)
        return True

    return check


def _array_part(c: Compiler, node: Mapping[str, Any], base: str) -> Annotating:
    items = node.get("items")
    if isinstance(node.get("prefixItems"), list):
        prefix = node["prefixItems"]
    else:
        prefix = items if isinstance(items, list) else []
    rest = node.get("additionalItems") if isinstance(items, list) else items
    rest_given = ("additionalItems" in node) if isinstance(items, list) else ("items" in node)
    heads = [c.check(s, base) for s in prefix]
    tail = c.check(rest, base) if rest_given else None
    contains = c.check(node["contains"], base) if "contains" in node else None
    low = to_double(node["minContains"]) if is_js_number(node.get("minContains")) else 1.0
    high = to_double(node["maxContains"]) if is_js_number(node.get("maxContains")) else math.inf

    def check(v: Any, a: Annotations) -> bool:
        if not isinstance(v, list):
            return True
        m = min(len(v), len(heads))
        if not all(heads[i](v[i]) for i in range(m)):
            return False
        if tail is not None:
            if not all(tail(x) for x in v[len(heads) :]):
                return False
            a.all_items = True
        a.items = max(a.items, m)
        if contains is not None:
            n = 0
            for i, x in enumerate(v):
                if contains(x):
                    n += 1
                    a.indexes.add(i)
            if n < low or n > high:
                return False
        return True

    return check


def _any(c: Compiler, branches: list[Any], base: str, exactly_one: bool) -> Annotating:
    checks = [annotating_check(c, s, base) for s in branches]

    def check(v: Any, a: Annotations) -> bool:
        n = 0
        for branch in checks:
            own = Annotations()
            if branch(v, own):
                n += 1
                a.merge(own)
        return n == 1 if exactly_one else n > 0

    return check


def _if(c: Compiler, node: Mapping[str, Any], base: str) -> Annotating:
    cond = annotating_check(c, node["if"], base)
    then = annotating_check(c, node["then"], base) if "then" in node else None
    other = annotating_check(c, node["else"], base) if "else" in node else None

    def check(v: Any, a: Annotations) -> bool:
        own = Annotations()
        if cond(v, own):
            a.merge(own)
            return then is None or then(v, a)
        return other is None or other(v, a)

    return check


def _unevaluated_properties(sub: Check) -> Annotating:
    def check(v: Any, a: Annotations) -> bool:
        if not isinstance(v, dict) or a.all_props:
            return True
        if not all(sub(value) for k, value in v.items() if k not in a.props):
            return False
        a.all_props = True
        return True

    return check


def _unevaluated_items(sub: Check) -> Annotating:
    def check(v: Any, a: Annotations) -> bool:
        if not isinstance(v, list) or a.all_items:
            return True
        if not all(sub(v[i]) for i in range(a.items, len(v)) if i not in a.indexes):
            return False
        a.all_items = True
        return True

    return check


__all__ = ["Annotations", "annotating_check", "unevaluated_check"]
