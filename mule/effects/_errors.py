"""The one expected-failure type of a run."""

from __future__ import annotations

from traceback import format_tb
from typing import Literal, TypeAlias, final

from attrs import field, frozen

from mule._fields_repr import fields_repr
from mule.pi import ZERO_USAGE, Usage

MulePhase: TypeAlias = Literal["model", "tool", "control", "listener"]


@final
@frozen
class MuleError:
    """Expected failure from the model, tool, control or listener work of a run.

    `cause` is the underlying raised or failed value, when one exists (for a model failure, the
    final assistant message).

    Attributes:
        phase: What failed: `"model"`, `"tool"`, `"control"` (bad input, a hook) or
            `"listener"`.
        message: A human-readable description.
        cause: The underlying raised or failed value, if any (for a model failure, the final
            assistant message).
        usage: The failed run's total tokens and cost up to its failure, every model attempt
            included (as `MuleRunOutcome.usage`); zero for an error not returned by a run.
            Not part of equality: the same failure of runs that spent differently is equal.

    """

    phase: MulePhase
    message: str
    cause: object | None = None
    usage: Usage = field(default=ZERO_USAGE, eq=False, kw_only=True)

    __repr__ = fields_repr


def describe(exc: BaseException) -> str:
    """Return `Type: message` for an exception (just `Type` when it has no message)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@final
class MuleRunFailed(Exception):
    """A run failed; `error` is the typed `MuleError` (its phase, message and cause).

    A callback may raise it too: the run then fails with exactly that `MuleError`.

    Attributes:
        error: The run's typed failure: phase, message, cause and the usage up to it.

    """

    def __init__(self, error: MuleError) -> None:
        super().__init__(f"{error.phase}: {error.message}")
        self.error = error
        if isinstance(error.cause, BaseException):
            self.__cause__ = error.cause

    @property
    def phase(self) -> MulePhase:
        """The failing phase: model, tool, control or listener."""
        return self.error.phase

    @property
    def cause(self) -> object | None:
        """The underlying raised or failed value."""
        return self.error.cause

    @property
    def usage(self) -> Usage:
        """The failed run's total tokens and cost up to its failure (`MuleError.usage`)."""
        return self.error.usage


def error_from(phase: MulePhase, what: str, exc: BaseException) -> MuleError:
    """Return the MuleError for an exception raised by `what` (its text, the exception as cause).

    A raised `MuleRunFailed` carries the error its raiser chose: that error, exactly.

    Called where the exception is caught: its traceback loses that first frame, the
    interpreter's, which holds the run that will hold this error (a reference cycle that would
    leave every failed run to the garbage collector); it keeps the frames from the callback
    down, where it was raised. A callback called, not awaited (an emit port that answers at
    once), left frames that link back to the catching one as their caller: those are not
    kept, and their text is the exception's note instead (the traceback as it would print).
    """
    if isinstance(exc, MuleRunFailed):
        return exc.error
    tb = exc.__traceback__
    if tb is not None:
        catcher = tb.tb_frame
        tb = exc.__traceback__ = tb.tb_next
        if tb is not None and tb.tb_frame.f_back is catcher:
            exc.add_note("Traceback (the callback's frames):\n" + "".join(format_tb(tb)).rstrip())
            exc.__traceback__ = None
    return MuleError(phase, f"{what}: {describe(exc)}", exc)


__all__ = ["MuleError", "MulePhase", "MuleRunFailed", "describe", "error_from"]
