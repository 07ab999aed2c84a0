"""Pi's EventStream for assistant-message events, on anyio.

Two ways to feed it: Pi's push style (`push` / `end`, from a task the producer runs itself), or
a pull source (`AssistantMessageEventStream.from_source`), an async iterator that is advanced
only when the consumer asks for the next event. The pull form needs no background task, so
cancelling the consumer cancels the provider's I/O at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
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

    __slots__ = ("_done", "_queue", "_result", "_result_waiters", "_source", "_waiter")

    def __init__(self) -> None:
        self._queue: deque[AssistantMessageEvent] = deque()
        self._done = False
        self._result: AssistantMessage | None = None
        self._waiter: anyio.Event | None = None
        self._result_waiters: list[anyio.Event] = []
        self._source: AsyncIterator[AssistantMessageEvent] | None = None

    @classmethod
    def from_source(
        cls, source: AsyncIterator[AssistantMessageEvent]
    ) -> AssistantMessageEventStream:
        """Return a stream that pulls its events from `source` as the consumer iterates."""
        stream = cls()
        stream._source = source
        return stream

    @property
    def done(self) -> bool:
        """Whether a terminal event or `end()` has finished the stream."""
        return self._done

    def push(self, event: AssistantMessageEvent) -> None:
        """Queue an event; ignored once finished. A terminal event finishes the stream."""
        if self._done:
            return
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
        self._wake()
        self._wake_results()

    def _finish(self, result: AssistantMessage) -> None:
        self._done = True
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
        source = self._source
        if source is not None and not self._queue and not self._done:
            # The pull form's per-event path: what `_pull` and `push` do, without the queue.
            try:
                event = await source.__anext__()
            except StopAsyncIteration:
                self._exhausted()
            else:
                # (the await may have ended the stream: mypy cannot know)
                if not (self._done or self._queue or self._waiter is not None):  # type: ignore[redundant-expr]
                    kind = type(event)
                    if kind is DoneEvent:
                        self._finish(event.message)  # type: ignore[union-attr]
                    elif kind is ErrorEvent:
                        self._finish(event.error)  # type: ignore[union-attr]
                    return event
                self.push(event)  # the stream changed meanwhile: queued, read below
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._done:
                await self._close_source()
                raise StopAsyncIteration
            if self._source is not None:
                await self._pull()
                continue
            waiter = self._waiter = anyio.Event()
            await waiter.wait()

    def _exhausted(self) -> None:
        """Account for the end of the source, awaited by `__anext__`'s per-event path."""
        self._source = None
        self.end()

    async def _pull(self) -> None:
        assert self._source is not None
        try:
            event = await self._source.__anext__()
        except StopAsyncIteration:
            self._source = None
            self.end()
            return
        self.push(event)

    async def _close_source(self) -> None:
        source, self._source = self._source, None
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()

    async def aclose(self) -> None:
        """Stop the stream and release its source (an open HTTP response, say)."""
        self._done = True
        await self._close_source()
        self._wake()
        self._wake_results()

    async def result(self) -> AssistantMessage:
        """Return the final message; raise `IncompleteStreamError` if the stream has none."""
        while self._result is None:
            if self._done:
                raise IncompleteStreamError("the stream ended without a done or error event")
            if self._source is not None:
                await self._pull()
                continue
            waiter = anyio.Event()
            self._result_waiters.append(waiter)
            await waiter.wait()
        return self._result


__all__ = ["AssistantMessageEventStream", "IncompleteStreamError"]
