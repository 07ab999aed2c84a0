"""A prompt's job as its caller sees it: a run identity, `done`, then a result or a failure."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import final

import anyio
from attrs import evolve

from mule.effects import MuleIdentity
from mule.pirc._commands import BridgeError, JobTimeout
from mule.pirc._job import JobState
from mule.pirc._pi_events import JobResult
from mule.pirc._session_data import Disposition


@final
class Job:
    """One prompt's run: done when the job state machine says so, with a `JobResult`.

    `stop` shuts the bridge's pi down (a job that times out or is cancelled takes pi with it);
    `timeout` is the default limit of `wait`.

    Attributes:
        run: The job's run identity (its events carry it).
        done: Set once the job ended and its result is known.
        changed: Set, then replaced, at every change of `state` (wait on the current one).
        state: The job's state machine state (waiting, running, settling, retrying, compacting,
            done).
        prompt_id: The id of the `prompt` command that started it; None until it is sent.
        disposition: What pi did with that prompt, once it answered (pi >= 0.99): `started`
            a run, or `handled` it without one (an extension); None before or with an older pi.

    """

    def __init__(
        self, run: MuleIdentity, stop: Callable[[], Awaitable[object]], timeout: float
    ) -> None:
        self.run = run
        self.done = anyio.Event()
        self.changed = anyio.Event()  # set (and replaced) at every change of `state`
        self.state = JobState()
        self.prompt_id: str | None = None
        self.disposition: Disposition | None = None
        self._stop = stop
        self._timeout = timeout
        self._result: JobResult | None = None
        self._error: BridgeError | None = None

    @property
    def result(self) -> JobResult | None:
        """The result once done (None while running or if pi died)."""
        return self._result

    def advance(self, state: JobState) -> None:
        """Take the job machine's new state, waking whoever waits on `changed`."""
        if state is self.state:
            return
        self.state = state
        changed, self.changed = self.changed, anyio.Event()
        changed.set()

    def settle(self, result: JobResult, error: BridgeError | None = None) -> None:
        """Record how the job ended (the bridge calls this, then sets `done`)."""
        self._result = result
        self._error = error
        self.advance(evolve(self.state, phase="done"))

    async def wait(self, time_limit: float | None = None) -> JobResult:
        """Wait for the result; on timeout or cancellation abort the job and stop pi.

        Raises `JobTimeout`, or `ProcessExited` if pi died before the job finished.
        """
        limit = self._timeout if time_limit is None else time_limit
        try:
            with anyio.move_on_after(limit):
                await self.done.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._stop()
            raise
        if not self.done.is_set():
            with anyio.CancelScope(shield=True):
                await self._stop()
            raise JobTimeout(limit)
        return self.outcome()

    def outcome(self) -> JobResult:
        """Return the result of a finished job, or raise its failure."""
        if self._error is not None:
            raise self._error
        if self._result is None:
            raise RuntimeError("job is not finished")
        return self._result


__all__ = ["Job"]
