"""Pi's EventStream for assistant-message events, on anyio.

Two ways to feed it: Pi's push style (`push` / `end`, from a task the producer runs itself), or
a pull source, an async iterator that is advanced only when the consumer asks for more: of
single events (`AssistantMessageEventStream.from_source`) or of batches, the events one network
read produced (`from_batches`, as the providers' transport feeds it). The pull form needs no
background task, so cancelling the consumer cancels the provider's I/O at once.

Two ways to read it: one event at a time (`async for`), or a batch at a time (`next_batch()`),
which costs one await per network read instead of one per event.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import final

import anyio

from mule.pi._assistant_events import AssistantMessageEvent, DoneEvent, ErrorEvent
from mule.pi._messages import AssistantMessage


@final
class IncompleteStreamError(Exception):
    """The stream ended without a terminal event, so it has no result.

    Pi's `result()` would never resolve here; mule says so instead of hanging.
    """


@final
class AssistantMessageEventStream:
    """A single-consumer async stream of assistant-message events with a final result."""

    __slots__ = (
        "_batches",
        "_direct",
        "_done",
        "_queue",
        "_result",
        "_result_waiters",
        "_source",
        "_waiter",
    )

    def __init__(self) -> None:
        self._queue: deque[AssistantMessageEvent] = deque()
        self._done = False
        self._result: AssistantMessage | None = None
        self._waiter: anyio.Event | None = None
        self._result_waiters: list[anyio.Event] = []
        self._source: AsyncIterator[AssistantMessageEvent] | None = None
        self._batches: AsyncIterator[Sequence[AssistantMessageEvent]] | None = None
        # The source of single events while `next_batch` may read it straight through: set by
        # `from_source`, dropped for good by anything that queues or ends (then the queue's
        # path, which is the same events in the same order).
        self._direct: AsyncIterator[AssistantMessageEvent] | None = None

    @classmethod
    def from_source(
        cls, source: AsyncIterator[AssistantMessageEvent]
    ) -> AssistantMessageEventStream:
        """Return a stream that pulls its events from `source` as the consumer iterates."""
        stream = cls()
        stream._source = stream._direct = source
        return stream

    @classmethod
    def from_batches(
        cls, source: AsyncIterator[Sequence[AssistantMessageEvent]]
    ) -> AssistantMessageEventStream:
        """Return a stream that pulls batches of events from `source` as the consumer asks.

        Each batch is what one read of the source produced (one network read's events, say);
        events after a terminal one are dropped, as `push` drops them.
        """
        stream = cls()
        stream._batches = source
        return stream

    @property
    def done(self) -> bool:
        """Whether a terminal event or `end()` has finished the stream."""
        return self._done

    def push(self, event: AssistantMessageEvent) -> None:
        """Queue an event; ignored once finished. A terminal event finishes the stream."""
        if self._done:
            return
        self._direct = None
        if type(event) is DoneEvent:
            self._finish(event.message)
        elif type(event) is ErrorEvent:
            self._finish(event.error)
        self._queue.append(event)
        self._wake()

    def end(self, result: AssistantMessage | None = None) -> None:
        """Finish the stream, resolving the result with `result` if it has none yet."""
        if result is not None and self._result is None:
            self._result = result
        self._done = True
        self._direct = None
        self._wake()
        self._wake_results()

    def _finish(self, result: AssistantMessage) -> None:
        self._done = True
        self._direct = None
        if self._result is None:
            self._result = result
        self._wake_results()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.set()

    def _wake_results(self) -> None:
        waiters, self._result_waiters = self._result_waiters, []
        for waiter in waiters:
            waiter.set()

    def __aiter__(self) -> AssistantMessageEventStream:
        return self

    async def __anext__(self) -> AssistantMessageEvent:
        # (mule's loop reads batches: `next_batch` holds the per-read fast paths)
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._done:
                await self._close_source()
                raise StopAsyncIteration
            if self._source is not None or self._batches is not None:
                await self._pull()
                continue
            waiter = self._waiter = anyio.Event()
            await waiter.wait()

    async def next_batch(self) -> tuple[AssistantMessageEvent, ...]:
        """Return the next events, in order, as one batch; an empty batch once it is over.

        A batch is what one read of the source produced: a batch source's batch, one event of
        a source of single events, everything queued in push style. A terminal event (done or
        error) always comes in a batch of its own, so whoever reads batches has handled every
        event before it when the terminal arrives. Mixing `next_batch` with `async for` is
        fine: both read the same events once.
        """
        # The pull forms' per-read paths: what `_pull` and `push` do, without the queue.
        source = self._direct
        if source is not None:
            try:
                event = await source.__anext__()
            except StopAsyncIteration:
                self._exhausted()
            else:  # (as `__anext__` takes it)
                if self._direct is source:  # nothing was queued, nor the stream ended, meanwhile
                    kind = type(event)
                    if kind is DoneEvent:
                        self._finish(event.message)  # type: ignore[union-attr]
                    elif kind is ErrorEvent:
                        self._finish(event.error)  # type: ignore[union-attr]
                    return (event,)
                self.push(event)
        elif not self._queue and not self._done:
            batches = self._batches
            if batches is not None:
                try:
                    batch = await batches.__anext__()
                except StopAsyncIteration:
                    self._exhausted()
                else:
                    if batch and not (self._done or self._queue or self._waiter is not None):  # type: ignore[redundant-expr]
                        for event in batch:
                            kind = type(event)
                            if kind is DoneEvent or kind is ErrorEvent:
                                break  # a terminal comes alone: queued below, then split off
                        else:
                            return tuple(batch)
                    for event in batch:
                        self.push(event)
        while True:
            if self._queue:
                return self._take()
            if self._done:
                await self._close_source()
                return ()
            if self._source is not None or self._batches is not None:
                await self._pull()
                continue
            waiter = self._waiter = anyio.Event()
            await waiter.wait()

    def _take(self) -> tuple[AssistantMessageEvent, ...]:
        """Take the queued events up to a terminal one, or the terminal alone."""
        queue = self._queue
        taken: list[AssistantMessageEvent] = []
        while queue:
            kind = type(queue[0])
            if kind is DoneEvent or kind is ErrorEvent:
                if not taken:
                    taken.append(queue.popleft())
                break
            taken.append(queue.popleft())
        return tuple(taken)

    def _exhausted(self) -> None:
        """Account for the end of the source, met on a per-read path."""
        self._source = None
        self._batches = None
        self.end()

    async def _pull(self) -> None:
        batches = self._batches
        if batches is not None:
            try:
                batch = await batches.__anext__()
            except StopAsyncIteration:
                self._exhausted()
                return
            for event in batch:
                self.push(event)
            return
        assert self._source is not None
        try:
            event = await self._source.__anext__()
        except StopAsyncIteration:
            self._exhausted()
            return
        self.push(event)

    async def _close_source(self) -> None:
        source: object = self._source if self._source is not None else self._batches
        self._source = self._batches = None
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()

    async def aclose(self) -> None:
        """Stop the stream and release its source (an open HTTP response, say)."""
        self._done = True
        self._direct = None
        await self._close_source()
        self._wake()
        self._wake_results()

    async def result(self) -> AssistantMessage:
        """Return the final message; raise `IncompleteStreamError` if the stream has none."""
        while self._result is None:
            if self._done:
                raise IncompleteStreamError("the stream ended without a done or error event")
            if self._source is not None or self._batches is not None:
                await self._pull()
                continue
            waiter = anyio.Event()
            self._result_waiters.append(waiter)
            await waiter.wait()
        return self._result


__all__ = ["AssistantMessageEventStream", "IncompleteStreamError"]
