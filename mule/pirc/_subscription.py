"""The bridge's consumers: each a bounded buffer of events, fed by one fan-out."""

from __future__ import annotations

from typing import final

import anyio

from mule.effects import MuleIdentity
from mule.pirc._buffer import BufferStats, EventBuffer
from mule.pirc._mapper import is_droppable
from mule.pirc._pi_events import BridgeEvent


@final
class Subscription:
    """A consumer's bounded view of the bridge's events (see `Bridge.subscribe`).

    Attributes:
        run: The run whose events it receives; None: every event.

    """

    def __init__(
        self, subscribers: Subscribers, buffer: EventBuffer[BridgeEvent], run: MuleIdentity | None
    ):
        self._subscribers = subscribers
        self._buffer = buffer
        self.run = run

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> BridgeEvent:
        try:
            return await self._buffer.get()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Stop receiving; the bridge forgets this subscriber."""
        self._subscribers.remove(self)
        self._buffer.close()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stats(self) -> BufferStats:
        """The subscriber's buffer counters."""
        return self._buffer.stats


@final
class Subscribers:
    """Every open subscription, and the fan-out that puts each event in the buffers it concerns."""

    def __init__(self) -> None:
        self._subs: list[Subscription] = []

    def __bool__(self) -> bool:
        return bool(self._subs)

    def add(
        self, run: MuleIdentity | None, capacity: int, stats: BufferStats, *, closed: bool
    ) -> Subscription:
        """Open a subscription (already ended when `closed`: pi is gone)."""
        sub = Subscription(self, EventBuffer(capacity, is_droppable, stats), run)
        if closed:
            sub._buffer.close()
        self._subs.append(sub)
        return sub

    def remove(self, sub: Subscription) -> None:
        """Forget a subscription (closing it twice is harmless)."""
        if sub in self._subs:
            self._subs.remove(sub)

    async def publish(self, ev: BridgeEvent, *, force: bool) -> None:
        """Give `ev` to every subscriber of its run (or of all runs).

        A full buffer holds the caller back, unless `force`: then it evicts instead of waiting.
        """
        for sub in list(self._subs):
            if sub.run is None or getattr(ev, "run", None) in (sub.run, None):
                if force:
                    sub._buffer.force_put(ev)
                else:
                    await sub._buffer.put(ev)

    def end_all(self) -> None:
        """End every subscription's stream (pi exited); buffered events can still be read."""
        for sub in list(self._subs):
            sub._buffer.close()


__all__ = ["Subscribers", "Subscription"]
