"""The bounded event buffer between pi's stdout reader and the consumer, with its drop policy.

Policy when the buffer is full:

1. an incoming item evicts the oldest *droppable* item already buffered (streaming deltas), so
   the newest snapshot survives and every drop is counted;
2. if nothing buffered is droppable, a droppable incoming item is itself dropped (counted);
3. if nothing buffered is droppable and the incoming item is a lifecycle item, `put` waits:
   back-pressure on the reader, which stops reading pi's stdout until the consumer catches up.
   Lifecycle items are never lost.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar, final

import anyio
from attrs import define

T = TypeVar("T")


@define
class BufferStats:
    """Live counters of the event buffer.

    Attributes:
        delivered: Events the consumer has taken.
        dropped: `message_update` events dropped because the buffer was full.
        blocked_puts: Times the reader waited for room (a full buffer of lifecycle events).
        max_depth: The most events the buffer has held at once.

    """

    delivered: int = 0
    dropped: int = 0
    blocked_puts: int = 0
    max_depth: int = 0


@final
class EventBuffer(Generic[T]):
    """A bounded FIFO for one producer and one consumer, dropping only `droppable` items.

    Attributes:
        stats: The buffer's live counters.

    """

    def __init__(
        self, capacity: int, droppable: Callable[[T], bool], stats: BufferStats | None = None
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be positive")
        self._capacity = capacity
        self._droppable = droppable
        self._items: deque[T] = deque()
        self._closed = False
        self._readable = anyio.Event()
        self._writable = anyio.Event()
        self.stats = stats if stats is not None else BufferStats()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        """Whether `close` was called (buffered items can still be read)."""
        return self._closed

    async def put(self, item: T) -> bool:
        """Buffer `item`; return False if it was dropped (policy 2) or the buffer is closed."""
        while not self._closed:
            if len(self._items) < self._capacity:
                self._append(item)
                return True
            if self._evict_one():
                self._append(item)
                return True
            if self._droppable(item):
                self.stats.dropped += 1
                return False
            self.stats.blocked_puts += 1
            if self._writable.is_set():
                self._writable = anyio.Event()
            await self._writable.wait()
        return False

    def force_put(self, item: T) -> None:
        """Buffer `item` past capacity (used once pi is gone, so nothing waits on a consumer)."""
        if not self._closed:
            self._append(item)

    async def get(self) -> T:
        """Return the oldest item; raise `anyio.EndOfStream` once closed and drained."""
        while not self._items:
            if self._closed:
                raise anyio.EndOfStream
            if self._readable.is_set():
                self._readable = anyio.Event()
            await self._readable.wait()
        item = self._items.popleft()
        self.stats.delivered += 1
        self._writable.set()
        return item

    def close(self) -> None:
        """End the stream: readers drain what is left, writers stop waiting."""
        self._closed = True
        self._readable.set()
        self._writable.set()

    def _append(self, item: T) -> None:
        self._items.append(item)
        self.stats.max_depth = max(self.stats.max_depth, len(self._items))
        self._readable.set()

    def _evict_one(self) -> bool:
        for i, old in enumerate(self._items):
            if self._droppable(old):
                del self._items[i]
                self.stats.dropped += 1
                return True
        return False


__all__ = ["BufferStats", "EventBuffer"]
