"""Which command a `response` answers: pending commands by id, and pi's id-less answers."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import final

import anyio

from mule.pirc._commands import Response

log = logging.getLogger("mule.pirc")


@final
class Pending:
    """A command sent and not yet answered; `done` is set by its response (or by pi's exit)."""

    __slots__ = ("command", "done", "response")

    def __init__(self, command: str) -> None:
        self.command = command
        self.done = anyio.Event()
        self.response: Response | None = None


@final
class PendingCommands:
    """The commands awaiting a response, keyed by the id they were sent with."""

    def __init__(self) -> None:
        self._by_id: dict[str, Pending] = {}

    @contextmanager
    def expect(self, command: str, cid: str) -> Iterator[Pending]:
        """Hold a command open under `cid` while its caller writes it and waits."""
        pending = self._by_id[cid] = Pending(command)
        try:
            yield pending
        finally:
            del self._by_id[cid]

    def answer(self, r: Response) -> bool:
        """Hand a response to its command; return False (and log it) if it matches none.

        pi drops the id for unknown command types, so an id-less response goes to the one open
        command of that type, if exactly one is open.
        """
        pending = self._by_id.get(r.id) if r.id is not None else None
        if pending is None and r.id is None:
            same = [
                p for p in self._by_id.values() if p.command == r.command and not p.done.is_set()
            ]
            pending = same[0] if len(same) == 1 else None
        if pending is None or pending.done.is_set():
            log.warning("pi response matches no command: %r", r)
            return False
        pending.response = r
        pending.done.set()
        return True

    def release_all(self) -> None:
        """Wake every waiting command without a response (pi is gone)."""
        for pending in self._by_id.values():
            pending.done.set()


__all__ = ["Pending", "PendingCommands"]
