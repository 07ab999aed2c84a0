"""`await mule.run(input, listener, signal)`: the core's run, with Python-idiomatic failure."""

from __future__ import annotations

from typing import final

from returns.result import Failure

from mule.effects import MuleRunFailed, MuleRunOutcome, OutputT
from mule.effects import run as run_core
from mule.pi import AbortError, AbortSignal, as_exception
from mule.promise._adapt import core_input
from mule.promise._types import MulePromiseListener, MuleRunInput


@final
class Mule:
    """The promise-facing interface: adapts callbacks once, then runs the core."""

    async def run(
        self,
        input: MuleRunInput[OutputT],
        listener: MulePromiseListener | None = None,
        signal: AbortSignal | None = None,
    ) -> MuleRunOutcome[OutputT]:
        """Run one complete Pi model/tool loop and return its completed outcome.

        `listener`, if given, is called as `listener(event, signal)` for every event (sync or
        async; the run waits for it); one that cannot take those two arguments is a
        `TypeError` here, before the run starts.

        Raises `MuleRunFailed` (carrying the `MuleError`) when the run failed, the abort reason
        (an `AbortError` when the reason is not an exception) when `signal` aborted it, and the
        backend's cancellation exception when the calling task was cancelled.
        """
        result = await run_core(core_input(input, listener), signal)
        if isinstance(result, Failure):
            raise MuleRunFailed(result.failure())
        outcome = result.unwrap()
        if outcome.status == "cancelled":
            reason = signal.reason if signal is not None else None
            raise as_exception(reason) if reason is not None else AbortError()
        return outcome


mule = Mule()
"""The module's one `Mule`."""
run = mule.run
"""`await mule.run(input, listener=None, signal=None)`: `Mule.run` of `mule.mule`.

Runs one complete loop and returns its `MuleRunOutcome`; raises `MuleRunFailed` when the run
failed, the abort reason when `signal` aborted it. `listener(event, signal)` sees every event.
"""

__all__ = ["Mule", "MuleRunFailed", "mule", "run"]
