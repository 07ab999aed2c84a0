"""`mule.run_sync(input, listener)`: a run from synchronous code (scripts, notebooks).

From a thread with no event loop it is `anyio.run(mule.run, ...)` on that thread (Ctrl-C
cancels the run honestly: one `run_end(cancelled)`, then `KeyboardInterrupt`). From inside a
running event loop (a notebook cell, an async framework's sync callback) it runs the loop of
its own in a worker thread and blocks until the run ended, as pydantic-ai's `run_sync` does;
interrupting the wait cancels the run before the interruption goes on.
"""

from __future__ import annotations

import functools
from typing import Literal, TypeAlias

import anyio

from mule.effects import MuleRunOutcome, OutputT
from mule.pi import AbortSignal
from mule.promise._run import run
from mule.promise._types import MulePromiseListener, MuleRunInput

Backend: TypeAlias = Literal["asyncio", "trio"]


def _in_event_loop() -> bool:
    try:
        anyio.get_current_task()
    except RuntimeError:  # sniffio's AsyncLibraryNotFoundError: no loop in this thread
        return False
    return True


def run_sync(
    inp: MuleRunInput[OutputT],
    listener: MulePromiseListener | None = None,
    signal: AbortSignal | None = None,
    *,
    backend: Backend = "asyncio",
) -> MuleRunOutcome[OutputT]:
    """Run one complete loop from synchronous code; return its outcome as `mule.run` does.

    Raises what `mule.run` raises (`MuleRunFailed`, the abort reason). Works in a plain script
    and inside an already running event loop (then on a worker thread with its own loop,
    which blocks the calling loop until the run ended, as any synchronous call does).
    `backend` picks the event loop of the run: `"asyncio"` or `"trio"`.
    """
    call = functools.partial(run, inp, listener, signal)
    if not _in_event_loop():
        return anyio.run(call, backend=backend)
    # concurrent.futures and logging: not with `import mule`
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal(backend) as portal:
        future = portal.start_task_soon(call)
        try:
            return future.result()
        except BaseException:
            # Interrupted while waiting (KeyboardInterrupt): cancel the run; leaving the portal
            # waits for it to end (one run_end(cancelled)) before the interruption goes on.
            future.cancel()
            raise


__all__ = ["Backend", "run_sync"]
