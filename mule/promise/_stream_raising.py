"""`async with mule.stream(input) as run: async for event in run: ...`, the promise form.

The core's `RunStream` over the adapted input; the iteration raises as `mule.run` does:
`MuleRunFailed` when the run failed, the abort reason when the caller's signal aborted it.
"""

from __future__ import annotations

from types import TracebackType
from typing import Generic, Self, final

from returns.result import Failure

from mule.effects import MuleEvent, MuleRunFailed, MuleRunOutcome, OutputT, RunStream
from mule.pi import AbortError, AbortSignal, as_exception
from mule.promise._adapt import core_input
from mule.promise._types import MulePromiseListener, MuleRunInput


@final
class MuleStream(Generic[OutputT]):
    """One run as an async context manager and async iterator of its `MuleEvent`s.

    `async with mule.stream(inp) as run: async for event in run: ...`, then `run.outcome`.
    The run waits for the loop's body exactly as it waits for a listener. Leaving the block
    (or breaking out of the loop) before the run ended cancels it: one `run_end(cancelled)`,
    and `run.outcome.status == "cancelled"`. When the run failed the iteration raises
    `MuleRunFailed`; when the caller's `signal` aborted it, the abort reason (as `mule.run`).
    """

    __slots__ = ("_core",)

    def __init__(
        self,
        inp: MuleRunInput[OutputT],
        signal: AbortSignal | None = None,
        listener: MulePromiseListener | None = None,
    ) -> None:
        self._core = RunStream(core_input(inp, listener), signal)

    @property
    def outcome(self) -> MuleRunOutcome[OutputT]:
        """The run's outcome once it ended; `MuleRunFailed` if it failed.

        A run cancelled by the caller's signal, or by leaving the block early, has
        `status == "cancelled"`. Before the run ended: `StreamNotEnded`.
        """
        result = self._core.outcome
        if isinstance(result, Failure):
            raise MuleRunFailed(result.failure())
        return result.unwrap()

    @property
    def signal(self) -> AbortSignal:
        """The run's own signal: aborted by the caller's signal, or when the consumer leaves."""
        return self._core.signal

    async def __aenter__(self) -> Self:
        await self._core.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._core.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> MuleEvent:
        try:
            return await self._core.__anext__()
        except StopAsyncIteration:
            outcome = self.outcome  # raises MuleRunFailed for a failed run
            if outcome.status == "cancelled" and not self._core.left_early:
                reason = self._core.signal.reason
                raise (as_exception(reason) if reason is not None else AbortError()) from None
            raise


def stream(
    inp: MuleRunInput[OutputT],
    signal: AbortSignal | None = None,
    *,
    listener: MulePromiseListener | None = None,
) -> MuleStream[OutputT]:
    """Return the run of `inp` as an async context manager and iterator of its events.

    `listener`, if given, sees every event first, including those after the consumer left
    (a tracer such as `mule.otel.traced`); if it raises, the run fails as with `mule.run`.

    >>> async def main(inp: MuleRunInput) -> None:  # doctest: +SKIP
    ...     async with mule.stream(inp) as run:
    ...         async for event in run:
    ...             print(event.type)
    ...     print(run.outcome.status)
    """
    return MuleStream(inp, signal, listener)


__all__ = ["MuleStream", "stream"]
