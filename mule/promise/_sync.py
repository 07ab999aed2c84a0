"""`mule.run_sync(input, listener)`: a run from synchronous code (scripts, notebooks).

From a thread with no event loop it is `anyio.run(mule.run, ...)` on that thread. From inside
a running event loop (a notebook cell, an async framework's sync callback) it runs a loop of
its own in a worker thread and blocks until the run ended, as pydantic-ai's `run_sync` does.

Ctrl-C, either way, cancels the run honestly (one `run_end(cancelled)`, in-flight work
stopped) and then raises `KeyboardInterrupt`. Neither backend does this by itself: trio
throws `KeyboardInterrupt` into whatever task is at a checkpoint (the run would end with no
`run_end`), and `asyncio.run` only cancels its main task, which cannot notice while a
synchronous call blocks it (the run would go on to its end). So the plain path takes SIGINT
itself, and the threaded path watches for it while it waits.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal, TypeAlias

import anyio

from mule.effects import MuleRunOutcome, OutputT
from mule.pi import AbortSignal
from mule.promise._run_raising import run
from mule.promise._types import MulePromiseListener, MuleRunInput, check_listener

if TYPE_CHECKING:
    import asyncio  # noqa: TID251 (asyncio.run's Ctrl-C cancels a task; only asyncio shows that)

Backend: TypeAlias = Literal["asyncio", "trio"]

# How often the waiting thread looks at its asyncio task: `asyncio.run`'s Ctrl-C handler
# cancels the main task, and a blocked task can only notice by looking.
_POLL_S = 0.05


def _in_event_loop() -> bool:
    try:
        anyio.get_current_task()
    except RuntimeError:  # sniffio's AsyncLibraryNotFoundError: no loop in this thread
        return False
    return True


def _owns_sigint() -> bool:
    """Whether this thread may take SIGINT for the run: the main thread, default handler."""
    import signal as signals  # with the first run_sync, not `import mule` (its enums: ~1 ms)

    return (
        sys.platform != "win32"  # anyio's signal receiver needs POSIX signals
        and threading.current_thread() is threading.main_thread()
        and signals.getsignal(signals.SIGINT) is signals.default_int_handler
    )


async def _until(
    call: Callable[[], Awaitable[MuleRunOutcome[OutputT]]], stop: Callable[[], Awaitable[None]]
) -> MuleRunOutcome[OutputT] | None:
    """Run `call`; if `stop()` returns first, cancel it and return None once it has ended."""
    outcome: list[MuleRunOutcome[OutputT]] = []
    error: list[BaseException] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            await stop()
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        try:
            outcome.append(await call())
        except anyio.get_cancelled_exc_class():
            raise  # the run ended cancelled (run_end emitted); the task group absorbs it
        except BaseException as exc:  # raised as is, not inside the task group's group
            error.append(exc)
        finally:
            tg.cancel_scope.cancel()
    if error:
        raise error[0]
    return outcome[0] if outcome else None


async def _sigint() -> None:
    import signal as signals

    with anyio.open_signal_receiver(signals.SIGINT) as received:
        async for _ in received:
            return  # leaving restores the handler: a second Ctrl-C interrupts at once


def _asyncio_task() -> asyncio.Task[object] | None:
    if "asyncio" not in sys.modules:
        return None  # then no asyncio loop runs anywhere
    import asyncio  # noqa: TID251 (asyncio.run's Ctrl-C cancels a task; only asyncio shows that)

    try:
        return asyncio.current_task()
    except RuntimeError:  # no asyncio loop in this thread (trio's, say)
        return None


def _in_a_thread(
    call: Callable[[], Awaitable[MuleRunOutcome[OutputT]]], backend: Backend
) -> MuleRunOutcome[OutputT]:
    # Not anyio's blocking portal: it schedules through `trio.from_thread`, which refuses a
    # caller that is itself a trio thread (and the portal then never stops).
    stop = threading.Event()
    done = threading.Event()
    outcome: list[MuleRunOutcome[OutputT] | None] = []
    error: list[BaseException] = []

    import anyio.to_thread  # not with `import mule`: only the in-loop path needs it

    async def stopped() -> None:
        await anyio.to_thread.run_sync(stop.wait, abandon_on_cancel=True)

    def worker() -> None:
        try:
            outcome.append(anyio.run(_until, call, stopped, backend=backend))
        except BaseException as exc:
            error.append(exc)
        finally:
            stop.set()  # releases the abandoned waiter
            done.set()

    # A daemon: a second Ctrl-C, while a cancelled run is still ending, must end the process.
    thread = threading.Thread(target=worker, name="mule.run_sync", daemon=True)
    task = _asyncio_task()
    asked = task.cancelling() if task is not None else 0
    interrupt: BaseException | None = None
    thread.start()
    # Waits on `done`, not `thread.join()`: a KeyboardInterrupt raised inside `join` can mark
    # the thread stopped while it still runs (CPython 3.11's `_wait_for_tstate_lock` releases
    # the lock the live thread holds), and a later `join` returns at once.
    try:
        while not done.wait(_POLL_S):
            if task is not None and task.cancelling() > asked:
                import asyncio  # noqa: TID251 (loaded already: the task is one of its)

                interrupt = asyncio.CancelledError()  # asyncio.run's Ctrl-C, or task.cancel()
                break
    except KeyboardInterrupt as exc:  # the default handler, trio's, a notebook kernel's
        interrupt = exc
    if interrupt is not None:
        stop.set()
        done.wait()
        raise interrupt
    if error:
        raise error[0]
    result = outcome[0]
    assert result is not None  # only `stop` makes it None, and only an interrupt sets it first
    return result


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
    Ctrl-C cancels the run (one `run_end(cancelled)`) and then raises `KeyboardInterrupt`
    (inside `asyncio.run`, the main task's `CancelledError`, which `asyncio.run` turns into
    `KeyboardInterrupt`); a second Ctrl-C does not wait for the run to end.
    `backend` picks the event loop of the run: `"asyncio"` or `"trio"`.
    """
    check_listener(listener)  # before any loop starts
    call = functools.partial(run, inp, listener, signal)
    if _in_event_loop():
        return _in_a_thread(call, backend)
    if not _owns_sigint():  # another thread, or the host handles SIGINT itself
        return anyio.run(call, backend=backend)
    outcome = anyio.run(_until, call, _sigint, backend=backend)
    if outcome is None:
        raise KeyboardInterrupt
    return outcome


__all__ = ["Backend", "run_sync"]
