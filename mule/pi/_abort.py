"""AbortController and AbortSignal for anyio code, as the web platform defines them.

A signal aborts once, with a reason; listeners run synchronously at that moment and `wait()`
wakes every waiter. Timeout signals abort at their deadline: `aborted` reads the clock, and
anything awaiting `wait()` (the run's own watcher, for one) makes the abort happen on time.
Signals belong to one event loop; from another thread, use `anyio.from_thread.run_sync`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import TYPE_CHECKING, final

import anyio


@final
class AbortError(Exception):
    """The operation was aborted; `reason` is the signal's reason when it was not an exception.

    Attributes:
        reason: The abort reason the signal was given (None: no reason).

    """

    def __init__(self, reason: object = None) -> None:
        super().__init__("This operation was aborted" if reason is None else str(reason))
        self.reason = reason


def as_exception(reason: object) -> BaseException:
    """Return `reason` itself if it is an exception, else an `AbortError` wrapping it."""
    return reason if isinstance(reason, BaseException) else AbortError(reason)


@final
class AbortSignal:
    """Tells a running operation to stop; created by an `AbortController`."""

    __slots__ = ("_aborted", "_deadline", "_events", "_listeners", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: object = None
        self._listeners: list[Callable[[AbortSignal], object]] = []
        self._events: list[anyio.Event] = []
        self._deadline: float | None = None

    @property
    def aborted(self) -> bool:
        """Whether the signal has aborted (a due timeout aborts it now)."""
        if not self._aborted and self._deadline is not None and time.monotonic() >= self._deadline:
            self._abort(TimeoutError("The operation timed out"))
        return self._aborted

    # Read-only views for the per-event path: a property over a C getter costs about as
    # much as reading the slot, and reads no clock.
    if TYPE_CHECKING:

        @property
        def fired(self) -> bool:
            """Whether the signal has aborted already (without checking a timeout's clock)."""

        @property
        def deadline(self) -> float | None:
            """The `time.monotonic()` deadline of a timeout signal, else None."""

    else:
        fired = property(
            attrgetter("_aborted"),
            doc="Whether the signal has aborted already (without checking a timeout's clock).",
        )
        deadline = property(
            attrgetter("_deadline"),
            doc="The `time.monotonic()` deadline of a timeout signal, else None.",
        )

    @property
    def reason(self) -> object:
        """The abort reason, or None while not aborted."""
        return self._reason if self.aborted else None

    def add_listener(self, listener: Callable[[AbortSignal], object]) -> None:
        """Call `listener(signal)` when the signal aborts (at once if it already has)."""
        if self.aborted:
            listener(self)
        else:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[AbortSignal], object]) -> None:
        """Forget a listener added with `add_listener`."""
        listeners = self._listeners  # (no `contextlib.suppress`: a few times per model call)
        if listener in listeners:
            listeners.remove(listener)

    def throw_if_aborted(self) -> None:
        """Raise the reason (wrapped in `AbortError` unless it is an exception) if aborted."""
        if self.aborted:
            raise as_exception(self._reason)

    async def wait(self) -> None:
        """Return once the signal has aborted."""
        while not self.aborted:
            event = anyio.Event()
            self._events.append(event)
            try:
                if self._deadline is None:
                    await event.wait()
                else:
                    with anyio.move_on_after(max(0.0, self._deadline - time.monotonic())):
                        await event.wait()
            finally:
                if event in self._events:
                    self._events.remove(event)

    def _abort(self, reason: object) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = AbortError() if reason is None else reason
        listeners, self._listeners = self._listeners, []
        events, self._events = self._events, []
        for event in events:
            event.set()
        for listener in listeners:
            listener(self)

    @staticmethod
    def abort(reason: object = None) -> AbortSignal:
        """Return a signal that is already aborted."""
        signal = AbortSignal()
        signal._abort(reason)
        return signal

    @staticmethod
    def timeout(ms: float) -> AbortSignal:
        """Return a signal that aborts with a `TimeoutError` after `ms` milliseconds."""
        signal = AbortSignal()
        signal._deadline = time.monotonic() + ms / 1000
        return signal

    @staticmethod
    def any(signals: Iterable[AbortSignal]) -> AbortSignal:
        """Return a signal that aborts when any of `signals` does, with its reason."""
        combined = AbortSignal()
        sources = list(signals)
        for source in sources:
            if source.aborted:
                combined._abort(source._reason)
                return combined
        deadlines = [s._deadline for s in sources if s._deadline is not None]
        if deadlines:
            combined._deadline = min(deadlines)
        for source in sources:
            source.add_listener(lambda s: combined._abort(s._reason))
        return combined


@final
class AbortController:
    """Owns one `AbortSignal` and aborts it.

    Attributes:
        signal: The signal this controller aborts; hand it to `mule.run` and to tools.

    """

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: object = None) -> None:
        """Abort the signal; a None reason becomes an `AbortError`."""
        self.signal._abort(reason)


def child_controller(parent: AbortSignal) -> tuple[AbortController, Callable[[], None]]:
    """Return a controller whose signal also aborts when `parent` does, and its detacher."""
    child = AbortController()
    if parent.aborted:
        child.abort(parent._reason)
        return child, _nothing
    child.signal._deadline = parent._deadline

    def forward(source: AbortSignal) -> None:
        child.abort(source._reason)

    parent.add_listener(forward)
    return child, lambda: parent.remove_listener(forward)


def _nothing() -> None:
    return None


__all__ = ["AbortController", "AbortError", "AbortSignal", "as_exception", "child_controller"]
