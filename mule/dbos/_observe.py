"""What a worker's `listener` factory sees of a run execution, and listeners in sequence."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import final

import mule.promise as promise
from mule.effects import MuleEvent
from mule.pi import AbortSignal


@final
class DurableRun:
    """One execution of a DBOS-run mule run, as a worker's `listener` factory sees it.

    A run executes once, then once more each time DBOS recovers it on another worker.
    `meta` is the run's host metadata as this execution starts (what earlier executions kept
    with `set_meta`): a tracer keeps the run's trace context there, and a recovered execution
    links to it (see docs/otel.md). `replayed(event)` tells which of its steps DBOS replayed
    from its record rather than ran (`traced(..., replayed=run.replayed)` marks their spans).

    Attributes:
        run_id: The run's id (the DBOS workflow id).
        agent: The name of the registered agent the run uses.
        meta: The run's host metadata as this execution starts (kept by earlier ones).

    """

    __slots__ = ("_keep", "_replayed", "agent", "meta", "run_id")

    def __init__(
        self,
        run_id: str,
        agent: str,
        meta: Mapping[str, str],
        keep: Callable[[str, str], None],
        replayed: Callable[[MuleEvent], bool] = lambda event: False,
    ) -> None:
        self.run_id = run_id
        self.agent = agent
        self.meta = meta
        self._keep = keep
        self._replayed = replayed

    def set_meta(self, key: str, value: str) -> None:
        """Keep `key = value` with the run, for later executions and any client.

        Callable from a listener: the write goes to a worker thread, and the workflow ends only
        once it is done. A write that fails is logged, never the run's failure.
        """
        self._keep(key, value)

    def replayed(self, event: MuleEvent) -> bool:
        """Whether this event's step was replayed from DBOS's record in this execution.

        Asked with an assistant message's `message_start` or `message_end` (its model attempt:
        the recorded message, no model call) or a `tool_execution_end` (the recorded result,
        the tool not run again); False for any other event and for steps run here, a safe tool
        run again and an unsafe one answered "interrupted" included. Ask it while the event is
        delivered: it describes the step in progress.
        """
        return self._replayed(event)


ListenerFactory = Callable[[DurableRun], promise.MulePromiseListener | None]
"""Returns the listener of one execution of a run (None: no listener), e.g. a tracer's."""


def both(
    first: promise.MulePromiseListener, then: promise.MulePromiseListener
) -> promise.MulePromiseListener:
    """Return a listener calling `first` then `then`, awaiting what each returns, in order."""

    def call(event: MuleEvent, signal: AbortSignal) -> Awaitable[None] | None:
        a = first(event, signal)
        b = then(event, signal)
        if a is None:
            return b
        if b is None:
            return a
        return _await_both(a, b)

    return call


async def _await_both(a: Awaitable[None], b: Awaitable[None]) -> None:
    await a
    await b


__all__ = ["DurableRun", "ListenerFactory", "both"]
