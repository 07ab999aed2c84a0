"""`async with stream(input) as run: async for event in run: ...`: a run as an async iterator.

The run's listener hands each event to the consumer and waits until the consumer asks for the
next one (or leaves): back-pressure exactly as with a listener, whose body is the loop's body.
Leaving the block before the run ended (a `break`, an exception, a cancelled caller) aborts
the run through its signal, so it ends in one `run_end(cancelled)` (seen by nobody: the
consumer has gone) and `outcome` says so.
"""

from __future__ import annotations

from types import TracebackType
from typing import Final, Generic, Self, final

import anyio
from anyio.abc import TaskGroup
from attrs import evolve
from returns.result import Failure, Result, Success

from mule.effects._errors import MuleError
from mule.effects._inputs import MulePortsInput
from mule.effects._lifecycle import MuleEvent
from mule.effects._outcome import MuleRunOutcome, OutputT
from mule.effects._ports import emit_to
from mule.effects._root import run
from mule.pi import AbortController, AbortSignal, child_controller

CONSUMER_LEFT: Final = "the stream's consumer left before the run ended"
"""The abort reason of a run whose `async with` block was left before its end."""

_OK: Result[None, MuleError] = Success(None)


class StreamNotEnded(RuntimeError):
    """`outcome` was read before the run ended, or the stream was iterated outside `async with`."""


@final
class RunStream(Generic[OutputT]):
    """One run as an async context manager and async iterator of its `MuleEvent`s.

    Use it as `async with stream(inp) as run: async for event in run: ...`; after the block
    (or the loop's end) `run.outcome` is the run's `Result`. A stream runs once.
    """

    __slots__ = (
        "_closed",
        "_controller",
        "_detach",
        "_ended",
        "_entered",
        "_held",
        "_input",
        "_result",
        "_signal",
        "_slot",
        "_slot_done",
        "_tap",
        "_tg",
        "_wake",
    )

    def __init__(
        self,
        inp: MulePortsInput[OutputT],
        signal: AbortSignal | None = None,
    ) -> None:
        # The input's own emit port sees every event first (a tracer, say); then the consumer.
        self._tap = inp.ports.emit
        self._input = evolve(inp, ports=evolve(inp.ports, emit=self._listen))
        self._signal = signal
        self._result: Result[MuleRunOutcome[OutputT], MuleError] | None = None
        self._entered = False
        # The hand-off, one event at a time (cheaper than a memory stream: one Event and one
        # task switch each way per event):
        self._slot: MuleEvent | None = None  # an event the consumer has not taken yet
        self._slot_done: anyio.Event | None = None  # its listener waits on this
        self._held: anyio.Event | None = None  # the taken event's: set when the body is done
        self._wake: anyio.Event | None = None  # the consumer waits on this for an event
        self._ended = False  # the run returned: no more events
        self._closed = False  # the consumer left: the listener waits no more

    @property
    def outcome(self) -> Result[MuleRunOutcome[OutputT], MuleError]:
        """The run's `Result`, once it ended (`StreamNotEnded` before)."""
        if self._result is None:
            raise StreamNotEnded("the run has not ended: read outcome after the async with block")
        return self._result

    @property
    def signal(self) -> AbortSignal:
        """The run's own signal: aborted by the caller's signal, or when the consumer leaves."""
        if not self._entered:
            raise StreamNotEnded("the stream has not started: use it as `async with`")
        return self._controller.signal

    @property
    def left_early(self) -> bool:
        """Whether the consumer left the block before the run ended (the run was aborted)."""
        return self._entered and self._controller.signal.reason == CONSUMER_LEFT

    async def __aenter__(self) -> Self:
        if self._entered:
            raise StreamNotEnded("a stream runs once: call stream(...) again for another run")
        self._entered = True
        self._controller: AbortController
        self._controller, self._detach = (
            child_controller(self._signal)
            if self._signal is not None
            else (AbortController(), _nothing)
        )
        self._tg: TaskGroup = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._drive)
        return self

    async def _drive(self) -> None:
        try:
            # Only the signal stops the run: a cancelled caller leaves the block, whose exit
            # aborts it, so even then the run ends in its own verdict and `outcome` has it.
            with anyio.CancelScope(shield=True):
                self._result = await run(self._input, self._controller.signal)
        finally:
            self._ended = True  # the consumer's next wait ends the iteration
            self._wake_consumer()

    def _wake_consumer(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    async def _listen(self, event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
        if self._tap is not None:
            tapped = await emit_to(self._tap, event, signal)
            if isinstance(tapped, Failure):
                return tapped
        if self._closed:
            return _OK  # the consumer left: the run goes on to its end unseen
        # A fresh Event per hand-off: one the run stopped waiting on (it was aborted) may
        # still be set by the consumer, harmlessly; its untaken event is replaced.
        done = anyio.Event()
        self._slot = event
        self._slot_done = done
        self._wake_consumer()
        await done.wait()  # the consumer came back for the next event, or left
        return _OK

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> MuleEvent:
        if not self._entered:
            raise StreamNotEnded("iterate a stream inside `async with stream(...) as run`")
        held = self._held
        if held is not None:
            self._held = None
            held.set()  # the run may go on: the body is done with its event
        while (event := self._slot) is None:
            if self._ended or self._closed:
                raise StopAsyncIteration
            wake = self._wake = anyio.Event()
            await wake.wait()
        self._held = self._slot_done
        self._slot = self._slot_done = None
        return event

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._result is None:
                self._controller.abort(CONSUMER_LEFT)
            # A listener blocked on the consumer returns at once from now on.
            self._closed = True
            for waiting in (self._held, self._slot_done):
                if waiting is not None:
                    waiting.set()
            self._held = self._slot = self._slot_done = None
            # The body's own exception is not the task group's: it propagates unchanged.
            await self._tg.__aexit__(None, None, None)
        finally:
            self._detach()


def stream(inp: MulePortsInput[OutputT], signal: AbortSignal | None = None) -> RunStream[OutputT]:
    """Return the run of `inp` as an async context manager and iterator of its events.

    `async with stream(inp) as run: async for event in run: ...` then `run.outcome`, the run's
    `Result[MuleRunOutcome, MuleError]`. The run waits for the consumer exactly as it waits
    for a listener; leaving the block early cancels it (one `run_end(cancelled)`).
    The input's `ports.emit`, if given, sees every event first, including those after the
    consumer left (a tracer such as `mule.otel.traced`); its failure fails the run as any
    listener's does. With `inp.output_type`, `outcome`'s value carries the decoded `output`.
    """
    return RunStream(inp, signal)


def _nothing() -> None:
    return None


__all__ = ["CONSUMER_LEFT", "RunStream", "StreamNotEnded", "stream"]
