"""`await mule.run(input, listener, signal)`: the core's run, with Python-idiomatic failure."""

from __future__ import annotations

from typing import final

from returns.result import Failure

from mule._abort import AbortError, AbortSignal, as_exception
from mule.effects._errors import MuleError, MulePhase
from mule.effects._run import run as run_core
from mule.effects._settings import MuleRunOutcome
from mule.promise._adapt import adapt_input, adapt_listener
from mule.promise._types import MulePromiseListener, MuleRunInput


@final
class MuleRunFailed(Exception):
    """A run failed; `error` is the typed `MuleError` (its phase, message and cause)."""

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


@final
class Mule:
    """The promise-facing interface: adapts callbacks once, then runs the core."""

    async def run(
        self,
        input: MuleRunInput,
        listener: MulePromiseListener | None = None,
        signal: AbortSignal | None = None,
    ) -> MuleRunOutcome:
        """Run one complete Pi model/tool loop and return its completed outcome.

        Raises `MuleRunFailed` (carrying the `MuleError`) when the run failed, the abort reason
        (an `AbortError` when the reason is not an exception) when `signal` aborted it, and the
        backend's cancellation exception when the calling task was cancelled.
        """
        result = await run_core(adapt_input(input), adapt_listener(listener), signal)
        if isinstance(result, Failure):
            raise MuleRunFailed(result.failure())
        outcome = result.unwrap()
        if outcome.status == "cancelled":
            reason = signal.reason if signal is not None else None
            raise as_exception(reason) if reason is not None else AbortError()
        return outcome


mule = Mule()
run = mule.run

__all__ = ["Mule", "MuleRunFailed", "mule", "run"]
