"""Run-local causal identities: every event names the run, turn, message or call it belongs to."""

from __future__ import annotations

from typing import Literal, TypeAlias, final

from attrs import frozen

from mule._fields_repr import fields_repr

MuleIdentityKind: TypeAlias = Literal[
    "run", "turn", "message", "tool_call", "tool_result", "terminal"
]


@final
@frozen
class MuleIdentity:
    """One run-local causal identity; `parent` is the identity it was caused by.

    Attributes:
        kind: What it identifies: run, turn, message, tool_call, tool_result or terminal.
        value: The run-local id, `"{kind}:{n}"`.
        parent: The identity it was caused by (None for the run).

    """

    kind: MuleIdentityKind
    value: str
    parent: MuleIdentity | None = None

    __repr__ = fields_repr


__all__ = ["MuleIdentity", "MuleIdentityKind"]
