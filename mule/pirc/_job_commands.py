"""Commands that make, join or end jobs: prompt, steer, follow_up, abort, abort_retry.

The contract (docs/pirc.md, "Jobs racing their end") lives here; `Bridge` provides the state
it works on (the current job, the job machine's inputs) and inherits these methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from mule.pi import ImageContent
from mule.pirc._commands import (
    BridgeError,
    CommandFailed,
    CommandTimeout,
    StreamingBehavior,
    new_id,
)
from mule.pirc._config import BridgeConfig
from mule.pirc._job import AbortRequested, Finish, JobInput
from mule.pirc._job_handle import Job
from mule.pirc._session_commands import SessionCommands, message_fields


class JobCommands(SessionCommands):
    """The job-level commands; a subclass provides the state and primitives declared here."""

    config: BridgeConfig
    _job: Job | None
    _prompt_lock: anyio.Lock
    _queued: dict[str, Job | None]
    _prompt_jobs: dict[str, Job]
    _stale_prompts: set[str]
    _retry_aborts: dict[str, Job | None]

    def _new_job(self, fresh: bool = False) -> Job:
        raise NotImplementedError

    async def _feed(self, job: Job, inp: JobInput) -> None:
        raise NotImplementedError

    async def _finish(self, job: Job, fin: Finish, cause: JobInput) -> None:
        raise NotImplementedError

    async def prompt(
        self,
        message: str,
        images: Sequence[ImageContent] = (),
        streaming_behavior: StreamingBehavior | None = None,
        time_limit: float | None = None,
    ) -> Job:
        """Send a prompt; return the job that carries it.

        Without `streaming_behavior` it always starts a new job: a job that only waits to
        settle (its `agent_end` seen, or its abort sent) is waited for first, and a job still
        running makes it fail at once with `CommandFailed` (as pi would). With
        `streaming_behavior` it joins the open job, or starts a new one when there is none, or
        when that job reached its `agent_end` before pi took the message. A job in its retry
        backoff takes no prompt (`CommandFailed`): pi would start a second run beside the retry.
        """
        fields = message_fields(message, images)
        if streaming_behavior is not None:
            fields["streamingBehavior"] = streaming_behavior
        limit = self.config.command_timeout if time_limit is None else time_limit
        # One prompt in flight: pi answers a fresh prompt just before its run starts, so what
        # the reader sees next belongs to it.
        async with self._prompt_lock:
            open_job = await self._settled_or_open(limit)
            if open_job is not None and open_job.state.phase == "retrying":
                raise CommandFailed("prompt", "the job is waiting to retry; abort it first")
            if open_job is not None and streaming_behavior is None:
                raise CommandFailed(
                    "prompt", "a job is running: pass streaming_behavior to queue the message"
                )
            if open_job is not None:
                return await self._send_queued("prompt", fields, open_job, limit) or open_job
            job = self._job = self._new_job()
            pid = job.prompt_id = new_id()
            self._prompt_jobs[pid] = job
            try:
                await self._command("prompt", fields, time_limit, cid=pid)
            except CommandTimeout:
                # pi may still answer and run it: that run must never attach to a later job.
                self._stale_prompts.add(pid)
                await self._finish(
                    job, Finish("failed", (), 0, "no answer to prompt"), AbortRequested()
                )
                raise
            except BridgeError as exc:
                error = exc.error if isinstance(exc, CommandFailed) else str(exc)
                await self._finish(job, Finish("failed", (), 0, error), AbortRequested())
                raise
            finally:
                self._prompt_jobs.pop(pid, None)
            return job

    async def _settled_or_open(self, limit: float) -> Job | None:
        """Return the open job, after waiting (bounded) for one that is only settling to end."""
        job = self._job
        if job is None or job.done.is_set():
            return None
        with anyio.move_on_after(limit):
            while job.state.phase != "done" and (
                job.state.phase == "settling" or job.state.aborted
            ):
                await job.changed.wait()
            if job.state.phase == "done":
                await job.done.wait()
        if job.done.is_set():
            return None
        if job.state.phase == "settling" or job.state.aborted:
            raise CommandTimeout("prompt (waiting for the last job to settle)", limit)
        return job

    async def _send_queued(
        self, command: str, fields: dict[str, Any], job: Job | None, limit: float
    ) -> Job | None:
        """Send a message pi queues; return the job it went to (None: none yet)."""
        cid = new_id()
        self._queued[cid] = job
        try:
            await self._command(command, fields, limit, cid=cid)
            return self._queued[cid]
        finally:
            self._queued.pop(cid, None)

    async def steer(self, message: str, images: Sequence[ImageContent] = ()) -> Job | None:
        """Queue a steering message (delivered after the current turn's tools).

        Returns the running job it went to, or None when no job had not yet reached its
        `agent_end` as pi took it: pi then keeps it for the next prompt's run.
        """
        return await self._queue_message("steer", message, images)

    async def follow_up(self, message: str, images: Sequence[ImageContent] = ()) -> Job | None:
        """Queue a follow-up (delivered when the agent would stop); returns like `steer`."""
        return await self._queue_message("follow_up", message, images)

    async def _queue_message(
        self, command: str, message: str, images: Sequence[ImageContent]
    ) -> Job | None:
        job = self._job
        open_job = job if job is not None and not job.done.is_set() else None
        fields = message_fields(message, images)
        return await self._send_queued(command, fields, open_job, self.config.command_timeout)

    async def abort(self, time_limit: float | None = None) -> None:
        """Abort the running job; return once it has ended (its `RunEnd` published).

        pi answers `abort` after the aborted run's `agent_end`; the bridge then settles the
        job. A run that pi had not started yet when it read the abort is aborted again once it
        starts. Raises `CommandTimeout` if the job has not ended within the limit.
        """
        limit = self.config.command_timeout if time_limit is None else time_limit
        job = self._job
        if job is None or job.done.is_set():
            await self._command("abort", {}, limit)
            return
        with anyio.move_on_after(limit) as scope:
            await self._feed(job, AbortRequested())
            await self._command("abort", {}, limit)
            while job.state.phase != "done":
                started = job.state.phase == "running"
                await job.changed.wait()
                if not started and job.state.phase == "running":
                    await self._command("abort", {}, limit)  # it started after our abort
            await job.done.wait()
        if scope.cancelled_caught and not job.done.is_set():
            raise CommandTimeout("abort", limit)

    async def abort_retry(self) -> None:
        """Cancel a pending auto-retry; return once pi has answered and the job left its backoff.

        pi decides when it reads the command, which may be in a backoff whose start the bridge
        has not read yet (or after the backoff, as the retry starts). Where pi's answer falls
        in stdout says which: a backoff pi cancelled ends its job `cancelled` (pi's
        `auto_retry_end{finalError:"Retry cancelled"}`, before or after the answer), and this
        call returns once that job has ended; a retry pi had already begun runs on. Outside a
        backoff it is pi's no-op. Raises `CommandTimeout` past `command_timeout`.
        """
        limit = self.config.command_timeout
        cid = new_id()
        self._retry_aborts[cid] = None
        with anyio.move_on_after(limit) as scope:
            try:
                await self._command("abort_retry", {}, limit, cid=cid)
                job = self._retry_aborts[cid]  # the job in its backoff at pi's answer, if any
            finally:
                self._retry_aborts.pop(cid, None)
            if job is not None:
                # (a pi that settles ends the cancelled backoff's job at its agent_settled)
                while job.state.phase == "retrying" or (
                    job.state.settles and job.state.phase == "settling"
                ):
                    await job.changed.wait()
                if job.state.phase == "done":
                    await job.done.wait()
        if scope.cancelled_caught:
            raise CommandTimeout("abort_retry", limit)


__all__ = ["JobCommands"]
