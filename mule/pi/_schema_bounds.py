"""What makes a tool schema safe to evaluate, checked once when its gate is compiled.

A tool's schema comes from whoever wrote the tool (a host, an MCP server), and it is evaluated
against arguments chosen by a model. For every evaluation to end in a typed answer, a schema
must be: nested at most `MAX_SCHEMA_DEPTH` deep; written with patterns that `_pattern` matches
in linear time (RE2: no backreference, no lookaround); referencing only what resolves within
itself or the host's registry (a remote `$ref` is never fetched: that would be a request
chosen by the schema's author, made while validating); and free of reference cycles that do
not descend into the value (`{"$ref": "#"}` would recurse forever on any value). A recursive
schema that does descend (`items: {"$ref": "#"}`) is fine: the value's depth, bounded by
`MAX_ARGUMENT_DEPTH`, bounds the recursion.

An unresolvable fragment (`#/$defs/missing`) stays what TypeBox makes it, a failing subschema.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from mule.pi._json import nested_deeper_than
from mule.pi._pattern import pattern_problem

if TYPE_CHECKING:
    from referencing import Registry

MAX_SCHEMA_DEPTH: Final = 64  # JSON nesting of a whole schema document
MAX_ARGUMENT_DEPTH: Final = 64  # JSON nesting of one call's arguments

# Keywords whose subschemas apply to the same value (a cycle through only these never ends)...
_SAME_ONE: Final = ("not", "if", "then", "else")
_SAME_MANY: Final = ("allOf", "anyOf", "oneOf")
_SAME_MAP: Final = ("dependentSchemas", "dependencies")
# ...and those whose subschemas apply to a part of it (or hold definitions).
_PART_ONE: Final = (
    "items",
    "additionalItems",
    "contains",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_PART_MANY: Final = ("prefixItems", "items")
_PART_MAP: Final = ("properties", "patternProperties", "$defs", "definitions")
_REFS: Final = ("$ref", "$dynamicRef", "$recursiveRef")


def _children(node: Mapping[str, Any]) -> Iterator[tuple[bool, Any]]:
    """Yield (applies to the same value, subschema) for each subschema of `node`."""
    for same, names, shape in (
        (True, _SAME_ONE, "one"),
        (True, _SAME_MANY, "many"),
        (True, _SAME_MAP, "map"),
        (False, _PART_ONE, "one"),
        (False, _PART_MANY, "many"),
        (False, _PART_MAP, "map"),
    ):
        for name in names:
            sub = node.get(name)
            if shape == "one" and isinstance(sub, Mapping | bool):
                yield same, sub
            elif shape == "many" and isinstance(sub, list):
                yield from ((same, each) for each in sub if isinstance(each, Mapping | bool))
            elif shape == "map" and isinstance(sub, Mapping):
                yield from ((same, each) for each in sub.values() if isinstance(each, Mapping))


def _patterns(node: Mapping[str, Any]) -> Iterator[str]:
    if isinstance(node.get("pattern"), str):
        yield node["pattern"]
    if isinstance(node.get("patternProperties"), Mapping):
        yield from (p for p in node["patternProperties"] if isinstance(p, str))


def schema_problem(schema: Any, registry: Registry[Any] | None = None) -> str | None:
    """Return why evaluating `schema` could fail untyped, hang or reach the network; or None."""
    if nested_deeper_than(schema, MAX_SCHEMA_DEPTH):
        return f"nested deeper than {MAX_SCHEMA_DEPTH} levels"
    if not isinstance(schema, Mapping):
        return None
    from referencing import Registry  # with the first compiled schema, not at import
    from referencing.jsonschema import DRAFT202012

    try:
        root = DRAFT202012.create_resource(schema)
        base = root.id() or ""
        resolver = (registry or Registry()).with_resource(base, root).resolver(base_uri=base)
    except Exception as exc:  # a malformed $id
        return f"cannot index the schema: {exc}"
    same_edges: dict[int, list[int]] = {}
    seen: set[int] = set()
    unevaluated = pattern_keys = False
    stack: list[tuple[Mapping[str, Any], Any]] = [(schema, resolver)]
    while stack:
        node, here = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node is not schema and isinstance(node.get("$id"), str):
            try:
                here = here.in_subresource(DRAFT202012.create_resource(node))
            except Exception as exc:
                return f"cannot index the subschema with $id {node['$id']!r}: {exc}"
        for pattern in _patterns(node):
            why = pattern_problem(pattern)
            if why is not None:
                return f"pattern {pattern!r} is not a regular expression mule can use: {why}"
        unevaluated |= "unevaluatedProperties" in node
        pattern_keys |= isinstance(node.get("patternProperties"), Mapping)
        edges = same_edges.setdefault(id(node), [])
        for same, sub in _children(node):
            if isinstance(sub, Mapping):
                if same:
                    edges.append(id(sub))
                stack.append((sub, here))
        for name in _REFS:
            ref = node.get(name)
            if not isinstance(ref, str):
                continue
            try:
                resolved = here.lookup(ref)
            except Exception:  # Unresolvable, or a pointer through a non-object
                if ref.startswith("#"):
                    continue  # TypeBox's failing subschema, decided while validating
                return (
                    f"{name} {ref!r} does not resolve within the schema; mule never fetches "
                    "references (a host can supply a referencing.Registry)"
                )
            target = resolved.contents
            if isinstance(target, Mapping):
                edges.append(id(target))
                stack.append((target, resolved.resolver))
    if unevaluated and pattern_keys:
        # jsonschema's unevaluatedProperties matches patternProperties with Python's `re`,
        # beyond the reach of `_pattern`: refused rather than matched without a time bound.
        return "unevaluatedProperties alongside patternProperties is not supported by mule"
    cycle = _same_value_cycle(same_edges)
    if cycle:
        return "a reference cycle applies to the same value forever (self-referential schema)"
    return None


def _same_value_cycle(edges: dict[int, list[int]]) -> bool:
    """Return whether the graph of same-value edges has a cycle (iterative three-colour DFS)."""
    state: dict[int, int] = {}  # 1: on the path, 2: done
    for start in edges:
        if start in state:
            continue
        path: list[tuple[int, Iterator[int]]] = [(start, iter(edges.get(start, ())))]
        state[start] = 1
        while path:
            node, rest = path[-1]
            step = next(rest, None)
            if step is None:
                state[node] = 2
                path.pop()
            elif state.get(step) == 1:
                return True
            elif step not in state:
                state[step] = 1
                path.append((step, iter(edges.get(step, ()))))
    return False


__all__ = ["MAX_ARGUMENT_DEPTH", "MAX_SCHEMA_DEPTH", "schema_problem"]
