"""The one expected-failure type of a run."""

from __future__ import annotations

from typing import Literal, TypeAlias, final

from attrs import frozen

MulePhase: TypeAlias = Literal["model", "tool", "control", "listener"]


@final
@frozen
class MuleError:
    """Expected failure from the model, tool, control or listener work of a run.

    `cause` is the underlying raised or failed value, when one exists (for a model failure, the
    final assistant message).
    """

    phase: MulePhase
    message: str
    cause: object | None = None


__all__ = ["MuleError", "MulePhase"]
