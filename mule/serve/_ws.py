"""Each `/ws` client's bounded queue of outgoing frames (the endpoint is `_connection`).

A job's events reach a client through a `ClientQueue` that the job fills synchronously (it
never waits for a client) and one sender task drains into the socket. The queue's policy when
a client is slow:

1. While there is room, every frame is queued.
2. When full, a streaming frame (`message_update`, `tool_execution_update`) first coalesces
   with the queued frames of the same message or tool call: they are removed and the newcomer
   travels as a *snapshot* (`message_update` with `value`, the whole response so far; tool
   updates are cumulative already). Otherwise the oldest queued streaming frame of another
   message is evicted the same way; failing that the newcomer is dropped, and the next update
   of its message is sent as a snapshot so the client resynchronises.
3. Lifecycle frames are never dropped. One that finds the queue full of lifecycle frames (or
   over its byte budget) means the client fell hopelessly behind: it is disconnected with
   close code 4008 and a reason.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final, final

import anyio
from attrs import define

from mule.serve._wire import Frame

if TYPE_CHECKING:
    pass

log = logging.getLogger("mule.serve")

CLOSE_UNAUTHORIZED: Final = 4401
CLOSE_TOO_SLOW: Final = 4008


@define
class ClientStats:
    """Per-client counters: frames sent, coalesced into snapshots, dropped, deepest queue."""

    sent: int = 0
    coalesced: int = 0
    dropped: int = 0
    max_depth: int = 0


@final
class ClientQueue:
    """One client's outgoing frames: priority frames first, then live frames under the policy.

    Attributes:
        capacity: The most frames queued.
        max_bytes: The most bytes queued.
        stats: The client's counters: frames sent, coalesced, dropped, the deepest queue.
        overflow: Why the client was dropped as too slow; None while it keeps up.

    """

    def __init__(
        self,
        capacity: int,
        max_bytes: int,
        on_overflow: Callable[[str], None] | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.stats = ClientStats()
        self.overflow: str | None = None
        self._on_overflow = on_overflow
        self._front: deque[Frame] = deque()  # replies and replays: not subject to the policy
        self._live: deque[Frame] = deque()
        self._bytes = 0
        self._stale: set[str] = set()  # messages whose deltas were lost: next update resyncs
        self._closed = False
        self._wake = anyio.Event()

    def __len__(self) -> int:
        return len(self._live)

    @property
    def queued_bytes(self) -> int:
        """The (estimated) size of the live frames waiting to be sent."""
        return self._bytes

    def push_front(self, frames: Iterable[Frame]) -> None:
        """Queue replies or a replay ahead of live frames (never dropped)."""
        if self._closed or self.overflow is not None:
            return
        self._front.extend(frames)
        self._wake.set()

    def offer(self, frame: Frame) -> None:
        """Queue a live frame without ever waiting (see the module docstring for the policy)."""
        if self._closed or self.overflow is not None:
            return
        if frame.droppable:
            self._offer_streaming(frame)
        else:
            self._offer_lifecycle(frame)
        self.stats.max_depth = max(self.stats.max_depth, len(self._live))
        self._wake.set()

    def offer_latest(self, frame: Frame) -> None:
        """Queue a keyed state frame (the job list) in place of any queued one of its key."""
        if self._closed or self.overflow is not None or frame.key is None:
            return
        self._take(frame.key)
        self._offer_lifecycle(frame)
        self._wake.set()

    def _offer_streaming(self, frame: Frame) -> None:
        key = frame.key
        assert key is not None
        if key in self._stale:
            frame = frame.snapshot()
            self._stale.discard(key)
        if self._full(frame.size):
            removed = self._take(key)
            if removed:
                self.stats.coalesced += len(removed)
                frame = frame.snapshot()
            elif not self._evict_streaming():
                self.stats.dropped += 1
                if frame.event is not None:
                    self._stale.add(key)
                return
        self._append(frame)

    def _offer_lifecycle(self, frame: Frame) -> None:
        while self._full(frame.size) and self._evict_streaming():
            pass
        if self._full(frame.size):
            self._fail(
                f"client too slow: {len(self._live)} events ({self._bytes} bytes) not yet sent"
            )
            return
        self._append(frame)

    def _full(self, incoming: int) -> bool:
        if not self._live:
            return False  # one frame always fits, however large
        return len(self._live) >= self.capacity or self._bytes + incoming > self.max_bytes

    def _append(self, frame: Frame) -> None:
        self._live.append(frame)
        self._bytes += frame.size

    def _take(self, key: str) -> list[tuple[int, Frame]]:
        """Remove the live frames with `key`; return them with their old positions."""
        taken = [(i, f) for i, f in enumerate(self._live) if f.key == key]
        if taken:
            self._live = deque(f for f in self._live if f.key != key)
            self._bytes -= sum(f.size for _, f in taken)
        return taken

    def _evict_streaming(self) -> bool:
        """Free a slot: coalesce the oldest streaming key's frames, or drop its only frame."""
        oldest = next((f for f in self._live if f.droppable), None)
        if oldest is None:
            return False
        key = oldest.key
        assert key is not None
        taken = self._take(key)
        position, newest = taken[-1]
        if len(taken) > 1:
            # Keep only the newest state, as a snapshot, where the newest frame stood.
            snap = newest.snapshot()
            self._live.insert(position - (len(taken) - 1), snap)
            self._bytes += snap.size
            self.stats.coalesced += len(taken) - 1
        else:
            self.stats.dropped += 1
            if newest.event is not None:
                self._stale.add(key)  # a message's text has a hole now: resync on its next update
        return True

    def _fail(self, reason: str) -> None:
        self.overflow = reason
        self._live.clear()
        self._front.clear()
        self._bytes = 0
        self._wake.set()
        if self._on_overflow is not None:
            self._on_overflow(reason)

    def discard_job(self, job: str) -> None:
        """Forget the queued frames of one job (unsubscribed, or about to be replayed)."""
        self._front = deque(f for f in self._front if f.job != job)
        self._live = deque(f for f in self._live if f.job != job)
        self._bytes = sum(f.size for f in self._live)
        self._stale = {k for k in self._stale if not k.startswith(f"{job}/")}

    def close(self) -> None:
        """Stop: the sender ends after what is already queued is gone."""
        self._closed = True
        self._wake.set()

    def pop(self) -> Frame | None:
        """Return the next frame to send now, if any (none at all after an overflow)."""
        if self.overflow is not None:
            return None
        if self._front:
            return self._front.popleft()
        if self._live:
            frame = self._live.popleft()
            self._bytes -= frame.size
            return frame
        return None

    async def next(self) -> Frame | None:
        """Wait for the next frame to send; None once closed (or overflowed) and drained."""
        while True:
            frame = self.pop()
            if frame is not None or self.overflow is not None or self._closed:
                return frame
            if self._wake.is_set():
                self._wake = anyio.Event()
            await self._wake.wait()


__all__ = ["CLOSE_TOO_SLOW", "CLOSE_UNAUTHORIZED", "ClientQueue", "ClientStats"]
