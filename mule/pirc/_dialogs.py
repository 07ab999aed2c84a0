"""Open extension dialogs: their timers, and the dialog-aware wait for a prompt's answer.

pi answers a `/command` prompt only once its handler has returned, dialogs included: while a
dialog is open, the answer waits on a person, so the wait is governed by the UI timeout (which
cancels the dialog), and `command_timeout` runs again, afresh, once no dialog is open.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, final

import anyio
from anyio.abc import TaskGroup

from mule.pirc._pi_events import ExtensionUIRequest

log = logging.getLogger("mule.pirc")


async def _first(*events: anyio.Event) -> None:
    """Return as soon as any of `events` is set."""
    async with anyio.create_task_group() as tg:

        async def one(ev: anyio.Event) -> None:
            await ev.wait()
            tg.cancel_scope.cancel()

        for ev in events:
            tg.start_soon(one, ev)


@final
class Dialogs:
    """The dialogs pi has asked for and nobody has answered yet.

    A dialog closes when it is answered or cancelled, when the bridge's `ui_timeout` passes
    (the bridge then cancels it) or when pi's own `timeout` for it passes (pi resolves it).
    """

    def __init__(self, ui_timeout: float | None, on_timeout: Callable[[], None]) -> None:
        self._ui_timeout = ui_timeout
        self._on_timeout = on_timeout
        self.open: set[str] = set()
        self.changed = anyio.Event()
        self._timers: dict[str, anyio.CancelScope] = {}

    def _pulse(self) -> None:
        changed, self.changed = self.changed, anyio.Event()
        changed.set()

    def opened(
        self,
        req: ExtensionUIRequest,
        tg: TaskGroup | None,
        cancel: Callable[[str], Awaitable[None]],
    ) -> None:
        """Track a dialog that waits for an answer, with its timer."""
        self.open.add(req.id)
        self._pulse()
        own: Any = req.data.get("timeout")
        pi_limit = own / 1000 if isinstance(own, int | float) and own > 0 else math.inf
        limit = min(self._ui_timeout if self._ui_timeout is not None else math.inf, pi_limit)
        if tg is None or math.isinf(limit):
            return
        scope = anyio.CancelScope()
        self._timers[req.id] = scope
        tg.start_soon(self._timer, req.id, limit, scope, cancel, limit < pi_limit)

    def closed(self, request_id: str) -> None:
        """Forget a dialog that was answered or dismissed."""
        scope = self._timers.pop(request_id, None)
        if scope is not None:
            scope.cancel()
        if request_id in self.open:
            self.open.discard(request_id)
            self._pulse()

    def close_all(self) -> None:
        """Forget every dialog (pi is gone)."""
        for scope in self._timers.values():
            scope.cancel()
        self._timers.clear()
        self.open.clear()
        self._pulse()

    async def _timer(
        self,
        request_id: str,
        limit: float,
        scope: anyio.CancelScope,
        cancel: Callable[[str], Awaitable[None]],
        ours: bool,
    ) -> None:
        with scope:
            await anyio.sleep(limit)
        if scope.cancelled_caught or self._timers.get(request_id) is not scope:
            return
        del self._timers[request_id]
        if ours:
            self._on_timeout()
            log.warning(
                "extension UI request %s unanswered after %g s; cancelled", request_id, limit
            )
            await cancel(request_id)
        self.open.discard(request_id)
        self._pulse()

    async def wait_answer(self, done: anyio.Event, limit: float) -> None:
        """Wait for `done`, for up to `limit` s of time with no dialog open.

        Each dialog is bounded by its own timer; `limit` starts afresh when the last closes.
        """
        deadline = anyio.current_time() + limit
        while not done.is_set():
            if self.open:
                await _first(done, self.changed)
                deadline = anyio.current_time() + limit  # afresh once the dialogs are closed
                continue
            if anyio.current_time() >= deadline:
                return
            with anyio.move_on_at(deadline):
                await _first(done, self.changed)


__all__ = ["Dialogs"]
