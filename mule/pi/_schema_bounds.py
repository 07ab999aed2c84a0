"""What makes a tool schema safe to evaluate, checked once when its gate is compiled.

A tool's schema comes from whoever wrote the tool (a host, an MCP server), and it is evaluated
against arguments chosen by a model. For every evaluation to end in a typed answer, a schema
must be nested at most `MAX_SCHEMA_DEPTH` deep and free of reference cycles that do not descend
into the value (`{"$ref": "#"}` would recurse forever on any value; pi-schema overflows its
stack there). A recursive schema that does descend (`items: {"$ref": "#"}`) is fine: the value's
depth, bounded by `MAX_ARGUMENT_DEPTH`, bounds the recursion. Patterns are checked when they
compile (`_schema_regex`). A reference that names nothing is pi-schema's failing subschema, and
a remote one is never fetched (documents come only from the host's registry).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from mule.pi._json import nested_deeper_than

if TYPE_CHECKING:
    from mule.pi._schema_refs import Resolver

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
_REFS: Final = ("$ref", "$dynamicRef")


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


def schema_problem(schema: Any, resolver: Resolver) -> str | None:
    """Return why evaluating `schema` could fail untyped or never end; or None."""
    if nested_deeper_than(schema, MAX_SCHEMA_DEPTH):
        return f"nested deeper than {MAX_SCHEMA_DEPTH} levels"
    if not isinstance(schema, Mapping):
        return None
    same_edges: dict[int, list[int]] = {}
    seen: set[int] = set()
    stack: list[tuple[Mapping[str, Any], str]] = [(schema, resolver.root_base)]
    while stack:
        node, base = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        here = resolver.base_for(node, base)
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
            target, target_base = resolver.resolve(ref, here)
            if isinstance(target, Mapping):
                edges.append(id(target))
                stack.append((target, target_base))
    if _same_value_cycle(same_edges):
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
