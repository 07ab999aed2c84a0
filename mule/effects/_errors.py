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


def describe(exc: BaseException) -> str:
    """Return `Type: message` for an exception (just `Type` when it has no message)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def error_from(phase: MulePhase, what: str, exc: BaseException) -> MuleError:
    """Return the MuleError for an exception raised by `what` (its text, the exception as cause)."""
    return MuleError(phase, f"{what}: {describe(exc)}", exc)


__all__ = ["MuleError", "MulePhase", "describe", "error_from"]
