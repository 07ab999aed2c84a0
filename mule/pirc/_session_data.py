"""Typed answers of pi's newer session commands (pi >= 0.80) and what pi did with a message."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias, final

from attrs import frozen

Disposition: TypeAlias = Literal["started", "queued", "handled"]
"""What pi (>= 0.99) did with a prompt, steer or follow-up: started a run for it, queued it
into the running one (or for the next), or let an extension handle it (no run)."""


def disposition_of(data: object) -> Disposition | None:
    """Return the `disposition` of a response's data (None: pi < 0.99 or an unknown value)."""
    value: object = data.get("disposition") if isinstance(data, Mapping) else None
    match value:
        case "started" | "queued" | "handled":
            return value
    return None


def _strings(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _leaf(data: Mapping[str, Any]) -> str | None:
    leaf = data.get("leafId")
    return leaf if isinstance(leaf, str) else None


@final
@frozen(kw_only=True)
class ClearedQueue:
    """The messages `clear_queue` took out of pi's queues (pi >= 0.84).

    Attributes:
        steering: The steering messages' texts, oldest first.
        follow_up: The follow-up messages' texts, oldest first.

    """

    steering: tuple[str, ...]
    follow_up: tuple[str, ...]

    @classmethod
    def from_data(cls, data: object) -> ClearedQueue:
        """Read pi's answer (`{steering, followUp}`), tolerating a malformed one."""
        d = data if isinstance(data, Mapping) else {}
        return cls(steering=_strings(d.get("steering")), follow_up=_strings(d.get("followUp")))


@final
@frozen(kw_only=True)
class SessionEntries:
    """The session's entries (`get_entries`, pi >= 0.80), oldest first.

    Attributes:
        entries: Each entry as raw JSON (`type`, `id`, `parentId`, `timestamp`, and the fields
            of its type: `message`, `model_change`, `thinking_level_change`, ...).
        leaf_id: The id of the current entry (None in an empty session).

    """

    entries: tuple[Mapping[str, Any], ...]
    leaf_id: str | None

    @classmethod
    def from_data(cls, data: object) -> SessionEntries:
        """Read pi's answer (`{entries, leafId}`), tolerating a malformed one."""
        d = data if isinstance(data, Mapping) else {}
        raw = d.get("entries")
        entries = tuple(e for e in raw if isinstance(e, Mapping)) if isinstance(raw, list) else ()
        return cls(entries=entries, leaf_id=_leaf(d))


@final
@frozen(kw_only=True)
class TreeNode:
    """One entry of the session tree and the entries that branch from it.

    Attributes:
        entry: The entry as raw JSON (as in `SessionEntries.entries`).
        children: The entries whose parent it is, oldest first.

    """

    entry: Mapping[str, Any]
    children: tuple[TreeNode, ...]


@final
@frozen(kw_only=True)
class SessionTree:
    """The session as a tree of entries (`get_tree`, pi >= 0.80).

    Attributes:
        roots: The entries without a parent, each with its subtree.
        leaf_id: The id of the current entry (None in an empty session).

    """

    roots: tuple[TreeNode, ...]
    leaf_id: str | None

    @classmethod
    def from_data(cls, data: object) -> SessionTree:
        """Read pi's answer (`{tree: [{entry, children}], leafId}`), tolerating a malformed one.

        Built without recursion: a long session nests as deep as it has entries.
        """
        d = data if isinstance(data, Mapping) else {}
        raw = d.get("tree")
        roots = raw if isinstance(raw, list) else []
        # Post-order over an explicit stack: a node is built once all its children are.
        built: dict[int, TreeNode] = {}
        stack: list[tuple[Any, bool]] = [(n, False) for n in roots]
        while stack:
            node, expanded = stack.pop()
            if not isinstance(node, Mapping) or id(node) in built:
                continue
            kids = node.get("children")
            kids = kids if isinstance(kids, list) else []
            if not expanded:
                stack.append((node, True))
                stack.extend((k, False) for k in kids)
                continue
            entry = node.get("entry")
            built[id(node)] = TreeNode(
                entry=entry if isinstance(entry, Mapping) else {},
                children=tuple(built[id(k)] for k in kids if id(k) in built),
            )
        return cls(roots=tuple(built[id(n)] for n in roots if id(n) in built), leaf_id=_leaf(d))


__all__ = [
    "ClearedQueue",
    "Disposition",
    "SessionEntries",
    "SessionTree",
    "TreeNode",
    "disposition_of",
]
