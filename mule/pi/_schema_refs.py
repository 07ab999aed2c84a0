"""`$id`, `$anchor` and `$ref` resolution over one tool schema, as pi-schema 1.6.0 resolves them.

A root without `$id` has pi-schema's base URI (`DEFAULT_BASE`); `$id`s change the base of the
subschemas under them; a reference names a document (the root, a subschema with that `$id`, or a
document the host registered) and a fragment (empty, a JSON Pointer, or an anchor). pi-ai
compiles with `unresolvedRefs: "reject"`: a reference that names nothing resolves to the schema
`false`, so only values at its place fail (the explanation says `unresolved reference <ref>`).
Nothing is ever fetched: documents come only from the host's `referencing.Registry`.

Always draft 2020-12: pi-ai passes no `draft`, so `$schema` changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, final

if TYPE_CHECKING:
    from referencing import Registry

DEFAULT_BASE: Final = "https://json-schema.invalid/root.json"

# The keywords whose values are subschemas, maps of them and lists of them (what is indexed).
_ONE: Final = (
    "additionalProperties",
    "propertyNames",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "contentSchema",
    "items",
)
_MAP: Final = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_MAP_OR_LIST: Final = ("dependencies",)
_LIST: Final = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_BAD_ESCAPE: Final = re.compile(r"%(?![0-9a-fA-F]{2})")


class Unresolved(LookupError):
    """A reference that names nothing."""


def is_schema_object(value: object) -> bool:
    """Return whether `value` is a schema object (a JSON object, not `true`/`false`)."""
    return isinstance(value, dict)


def object_at(node: Mapping[str, Any], key: str) -> dict[str, Any]:
    """Return `node[key]` when it is a JSON object, else an empty one."""
    value = node.get(key)
    return value if isinstance(value, dict) else {}


def list_at(node: Mapping[str, Any], key: str) -> list[Any]:
    """Return `node[key]` when it is a list, else an empty one."""
    value = node.get(key)
    return value if isinstance(value, list) else []


def resolve_uri(ref: str, base: str) -> str:
    """Return `ref` resolved against `base` (fragment-only references also on opaque bases)."""
    if ref.startswith("#"):  # a fragment keeps the base document, also an opaque one (urn:)
        return document_of(base) + ref
    from urllib.parse import urljoin  # with the first `$ref` (urllib brings ipaddress)

    try:
        return urljoin(base, ref)
    except ValueError:
        return ref


def document_of(uri: str) -> str:
    """Return `uri` without its fragment."""
    hash_at = uri.find("#")
    return uri if hash_at < 0 else uri[:hash_at]


@final
class Resolver:
    """The resources, anchors and base URIs of one schema (indexed on first need)."""

    def __init__(self, root: Any, registry: Registry[Any] | None = None) -> None:
        self.root = root
        self._registry = registry
        self.root_base = DEFAULT_BASE
        self._base_of: dict[int, str] = {}
        self._resources: dict[str, Any] = {}
        self._anchors: dict[str, Any] = {}
        self._unresolved: set[str] = set()
        self._indexed = False
        self._any_id = False

    def base_for(self, node: Mapping[str, Any], base: str) -> str:
        """Return the base URI of `node`, whose parent has `base` (its `$id` changes it)."""
        self._ensure_indexed()
        if not self._any_id:  # one resource: every node has the root's base
            return base
        indexed = self._base_of.get(id(node))
        if indexed is not None:
            return indexed
        ident = node.get("$id")
        if not isinstance(ident, str):
            return base
        if not self._indexed:
            self._ensure_indexed()
            indexed = self._base_of.get(id(node))
            if indexed is not None:
                return indexed
        return document_of(resolve_uri(ident, base))

    def resolve(self, ref: str, base: str) -> tuple[Any, str]:
        """Return the (schema, base) `ref` names; `(False, base)` when it names nothing."""
        self._ensure_indexed()
        try:
            return self._find(ref, base)
        except (Unresolved, UnicodeDecodeError):
            self._unresolved.add(resolve_uri(ref, base))
            return False, base

    def is_unresolved(self, ref: str, base: str) -> bool:
        """Return whether `ref` from `base` named nothing (and so resolved to `false`)."""
        return resolve_uri(ref, base) in self._unresolved

    def _find(self, ref: str, base: str) -> tuple[Any, str]:
        uri = resolve_uri(ref, base)
        doc = document_of(uri)
        raw = uri[len(doc) + 1 :] if len(uri) > len(doc) else ""
        if _BAD_ESCAPE.search(raw):
            raise Unresolved(ref)  # decodeURIComponent throws on a malformed escape
        from urllib.parse import unquote

        fragment = unquote(raw, errors="strict")
        root = self._resources[doc] if doc in self._resources else self._load(doc)
        if root is None:
            raise Unresolved(ref)
        if fragment == "":
            return root, doc
        if fragment.startswith("/"):
            return self._pointer(root, doc, fragment)
        target = self._anchors.get(f"{doc}#{fragment}")
        if target is None:
            raise Unresolved(ref)
        return target, self._base_of.get(id(target), doc)

    def _ensure_indexed(self) -> None:
        if self._indexed:
            return
        self._indexed = True
        self._resources[DEFAULT_BASE] = self.root
        self._index(self.root, DEFAULT_BASE)

    def _index(self, node: Any, base: str) -> None:
        if not isinstance(node, dict) or id(node) in self._base_of:
            return
        here = base
        ident = node.get("$id")
        if isinstance(ident, str):
            self._any_id = True
            uri = resolve_uri(ident, here)
            here = document_of(uri)
            self._resources[here] = node
            if len(uri) > len(here) + 1:
                self._anchors[uri] = node
        self._base_of[id(node)] = here
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                self._anchors[f"{here}#{node[key]}"] = node
        for key in _ONE:
            self._index(node.get(key), here)
        for key in (*_MAP, *_MAP_OR_LIST):
            entries = node.get(key)
            if isinstance(entries, dict):
                for sub in entries.values():
                    self._index(sub, here)
        for key in _LIST:
            entries = node.get(key)
            if isinstance(entries, list):
                for sub in entries:
                    self._index(sub, here)

    def _load(self, doc: str) -> Any:
        if self._registry is None:
            return None
        try:
            schema = self._registry.contents(doc)
        except Exception:  # NoSuchResource and kin: the document is unknown
            return None
        self._resources[doc] = schema
        self._any_id = True  # a second document: bases differ
        self._index(schema, doc)
        return schema

    def _pointer(self, root: Any, base: str, fragment: str) -> tuple[Any, str]:
        node, here = root, base
        for raw in fragment.split("/")[1:]:
            key = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and _is_own_index(key, node):
                node = node[int(key)]
            else:
                raise Unresolved(fragment)
            if isinstance(node, dict | list):
                here = self._base_of.get(id(node), here)
        return node, here


def _is_own_index(key: str, items: list[Any]) -> bool:
    # JS Object.hasOwn(array, key): a canonical array index below the length.
    canonical = key == "0" or (key[:1] in "123456789" and key.isascii() and key.isdigit())
    return canonical and len(key) <= 10 and int(key) < len(items)


__all__ = [
    "DEFAULT_BASE",
    "Resolver",
    "document_of",
    "is_schema_object",
    "list_at",
    "object_at",
    "resolve_uri",
]
