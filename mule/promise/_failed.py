"""The exception a failed promise-style run raises."""

from __future__ import annotations

from typing import final

from mule.effects._errors import MuleError, MulePhase


@final
class MuleRunFailed(Exception):
    """A run failed; `error` is the typed `MuleError` (its phase, message and cause).

    A callback may raise it too: the run then fails with exactly that `MuleError`.
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


__all__ = ["MuleRunFailed"]
