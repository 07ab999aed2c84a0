"""The pi RPC bridge: one `pi --mode rpc` child, its commands, events, jobs and shutdown.

The parts live apart: the child process (`_process`), which command a response answers
(`_correlation`), the typed session commands (`_session_commands`), the consumers' buffers
(`_subscription`), the job machine (`_job`) and a job's handle (`_job_handle`). This module
wires them: it reads pi's records, tracks the running job, and owns the shutdown policy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, final

import anyio
from anyio.abc import TaskGroup
from attrs import define, evolve, field

from mule.effects import MuleIdentity, RunEnd
from mule.pi import ImageContent
from mule.pirc._buffer import BufferStats
from mule.pirc._commands import (
    BridgeError,
    CommandFailed,
    CommandTimeout,
    JobTimeout,
    ProcessExited,
    Response,
    new_id,
    parse_response,
)
from mule.pirc._config import BridgeConfig
from mule.pirc._correlation import PendingCommands
from mule.pirc._dialogs import Dialogs
from mule.pirc._framing import FrameStats, LineFramer
from mule.pirc._growth import LineDecoder
from mule.pirc._job import (
    AbortRequested,
    Accepted,
    BarrierPassed,
    Finish,
    JobInput,
    ProcessGone,
    SendBarrier,
    job_input,
    step,
)
from mule.pirc._job_commands import JobCommands
from mule.pirc._job_handle import Job
from mule.pirc._mapper import EventMapper
from mule.pirc._pi_events import BridgeEvent, ExtensionUIRequest, JobResult
from mule.pirc._process import PiProcess
from mule.pirc._session_data import Disposition, disposition_of
from mule.pirc._subscription import Subscribers, Subscription

log = logging.getLogger("mule.pirc")

KILL_GRACE_S = 2.0  # after SIGKILL: the kernel reaps at once unless the child is stuck in a syscall

EventCallback = Callable[[BridgeEvent], Awaitable[None] | None]


@define
class BridgeStats:
    """Live counters: framing, parsing, buffering, unmatched responses and UI timeouts.

    Attributes:
        frames: The stdout framer's and decoder's counters.
        buffer: The first subscriber's buffer counters.
        unobserved_events: Events discarded because nobody was subscribed.
        unmatched_responses: pi responses that matched no outstanding command.
        ui_timeouts: Extension dialogs the bridge cancelled after `ui_timeout`.
        stderr_lines: Lines pi wrote to stderr (each logged on the `mule.pirc` logger).
        handler_errors: Records whose handling raised; logged and skipped, the reader goes on.

    """

    frames: FrameStats = field(factory=FrameStats)
    buffer: BufferStats = field(factory=BufferStats)
    unobserved_events: int = 0
    unmatched_responses: int = 0
    ui_timeouts: int = 0
    stderr_lines: int = 0
    handler_errors: int = 0


@final
class Bridge(JobCommands):
    """Drives one pi RPC child: `async with Bridge(config) as pi: result = await pi.run("hi")`.

    Attributes:
        config: How pi is started and the bridge's limits.
        stats: Live counters (framing, buffering, unmatched responses, UI timeouts).
        process_done: Set once the pi child has exited and been reaped.
        returncode: pi's exit code once it exited (negative: killed by that signal); None before.

    """

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self.stats = BridgeStats()
        self.process_done = anyio.Event()
        self.returncode: int | None = None
        self._process: PiProcess | None = None
        self._tg: TaskGroup | None = None
        self._entered = False
        self._guards: list[anyio.CancelScope] = []  # the background tasks' own scopes
        self._pending = PendingCommands()
        self._barriers: dict[str, tuple[Job, int]] = {}
        self._subscribers = Subscribers()
        self._mapper = EventMapper()
        self._read = LineDecoder(config.max_line_depth).read  # one pi, one stdout: one decoder
        self._job: Job | None = None
        self._open_jobs: set[Job] = set()  # the current job and any superseded one still settling
        self._queued: dict[str, Job | None] = {}  # queued message id -> the job open when sent
        self._prompt_lock = anyio.Lock()
        self._dialogs = Dialogs(config.ui_timeout, self._count_ui_timeout)
        self._prompt_jobs: dict[str, Job] = {}  # fresh prompts sent and not yet answered
        self._stale_prompts: set[str] = set()  # prompts whose caller gave up waiting
        self._retry_aborts: dict[str, Job | None] = {}  # abort_retry id -> job in its backoff
        self._stopping = False
        self._spoke = False  # pi has written a stdout line: it is up and reads its commands
        # pi ends each run with `agent_settled` (>= 1.1): learnt from its output, never configured
        self._settles = False
        self._spawned_at = 0.0  # anyio clock when pi was spawned (the start of start_timeout)
        self._exiting = False
        self._exit_reason: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The child's process id once started."""
        return self._process.pid if self._process is not None else None

    @property
    def job(self) -> Job | None:
        """The current (or last) job."""
        return self._job

    async def __aenter__(self) -> Bridge:
        """Spawn pi and start reading its output (the only way to start a bridge)."""
        if self._entered:
            raise RuntimeError("a Bridge is entered once")
        self._entered = True
        self._spawned_at = anyio.current_time()
        try:
            with anyio.CancelScope(shield=True):  # a spawned child is always reaped
                process = self._process = await PiProcess.spawn(self.config)
        except ProcessExited:
            self.process_done.set()
            raise
        framer = LineFramer(self.config.max_line_bytes, self.stats.frames)
        # The task group is entered here and left in `__aexit__`, so it nests exactly as the
        # caller's `async with`; the body's own exceptions never pass through it (they are
        # not wrapped in an ExceptionGroup).
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        # The exit waiter and the readers run shielded from the caller's cancel scopes: a
        # cancel or deadline around `async with` must leave them to see pi exit while `stop()`
        # shuts it down. They end when pi is gone, or when `__aexit__` cancels their scopes.
        guard = self._guards = [anyio.CancelScope(shield=True) for _ in range(3)]
        # The exit waiter comes first and never depends on the readers: whatever they meet,
        # pi's exit is seen, its job ended and `process_done` set.
        tg.start_soon(_guarded, guard[0], self._wait_exit, process)
        tg.start_soon(_guarded, guard[1], process.read_stdout, framer, self._handle_line)
        tg.start_soon(_guarded, guard[2], process.read_stderr, self._count_stderr_line)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop pi (see `stop`), end the bridge's background tasks and close pi's pipes."""
        tg, self._tg = self._tg, None
        try:
            await self.stop()
        finally:
            for guard in self._guards:
                guard.cancel()
            try:
                if tg is not None:
                    tg.cancel_scope.cancel()
                    await tg.__aexit__(None, None, None)
            finally:
                if self._process is not None:
                    with anyio.CancelScope(shield=True):
                        await self._process.close_streams()

    async def stop(self) -> int | None:
        """Shut pi down: abort if running, close stdin, wait, SIGTERM, then SIGKILL.

        A pi that has not written anything yet (still starting) gets SIGTERM at once, with no
        abort and no wait for its EOF.

        Reaps the child and returns its exit code. Bounded whatever pi does (ignores stdin,
        signals or its pipes): at most about `abort_grace + 2 * stop_grace + 2 * KILL_GRACE_S`.
        """
        proc = self._process
        if proc is None:
            return None
        with anyio.CancelScope(shield=True):
            if not self._stopping and not self.process_done.is_set():
                self._stopping = True
                await self._shutdown(proc)
            else:  # another task is stopping pi: wait for it, as long as it can take
                cfg = self.config
                with anyio.move_on_after(cfg.abort_grace + 2 * cfg.stop_grace + 3 * KILL_GRACE_S):
                    await self.process_done.wait()
        return self.returncode

    async def _shutdown(self, proc: PiProcess) -> None:
        cfg = self.config
        job = self._job
        # pi that has not written a line yet is still starting (node loads pi for seconds on a
        # busy box) or idle: it can answer nothing before it is up, and reads stdin's EOF only
        # then. SIGTERM ends it at once: node's default before pi's handler is installed, and
        # pi's own shutdown (the same as on EOF) after.
        up = self._spoke
        if job is not None and not job.done.is_set():
            if up:
                with anyio.move_on_after(cfg.abort_grace):
                    try:
                        await self.abort(time_limit=cfg.abort_grace)
                    except BridgeError as exc:
                        log.info("abort during stop failed: %s", exc)
            else:  # nothing to abort yet: its end (pi gone) is a cancellation
                for open_job in list(self._open_jobs):
                    await self._feed(open_job, AbortRequested())
        with anyio.move_on_after(cfg.stop_grace):
            await proc.close_stdin(cfg.stop_grace)
            if up:
                await self.process_done.wait()
        if not self.process_done.is_set():
            if up:
                log.warning("pi did not exit after stdin closed; sending SIGTERM")
            proc.signal(signal.SIGTERM)
            with anyio.move_on_after(cfg.stop_grace):
                await self.process_done.wait()
        if not self.process_done.is_set():
            log.warning("pi ignored SIGTERM; killing it")
            proc.signal(signal.SIGKILL)
            with anyio.move_on_after(KILL_GRACE_S):
                await self.process_done.wait()
        if not self.process_done.is_set():
            # The exit waiter is stuck (pi's stdout held open by a survivor, say): reap here.
            rc = await proc.reap(KILL_GRACE_S)
            log.error("pi's exit was not observed in time (reaped: %s); giving up on it", rc)
            self.returncode = rc
            await self._exited(proc)

    def kill(self) -> None:
        """Send SIGKILL to pi's process group now (the exit is still reaped by the bridge)."""
        if self._process is not None:
            self._process.signal(signal.SIGKILL)

    async def wait_exit(self) -> int | None:
        """Wait for pi to exit; return its exit code (negative: killed by that signal)."""
        await self.process_done.wait()
        return self.returncode

    async def _wait_exit(self, process: PiProcess) -> None:
        self.returncode = await process.wait()
        await self._exited(process)

    async def _exited(self, process: PiProcess) -> None:
        if self.process_done.is_set():
            return
        try:
            self._exiting = True  # from now on publishing never waits for consumers
            reason = self._exit_reason = process.exit_reason()
            log.info("%s", reason)
            self._pending.release_all()
            self._dialogs.close_all()
            for job in list(self._open_jobs):
                await self._feed(job, ProcessGone(reason))
            self._subscribers.end_all()
        finally:
            self.process_done.set()

    # -- reading -----------------------------------------------------------------------------

    def _count_ui_timeout(self) -> None:
        self.stats.ui_timeouts += 1

    def _count_stderr_line(self, _text: str) -> None:
        self.stats.stderr_lines += 1

    async def _handle_line(self, line: bytes) -> None:
        self._spoke = True
        record = self._read(line, self.stats.frames)
        if record is None:
            return
        try:
            if isinstance(record, tuple):  # a streamed delta (most of pi's lines), from its parts
                await self._publish(self._mapper.delta(record))
            elif record.get("type") == "response":
                await self._on_response(parse_response(record))
            else:
                await self._on_event(record)
        except Exception:
            # A record no handler expected must not end the reader (and with it every job).
            self.stats.handler_errors += 1
            log.exception("pi stdout: record not handled: %.200r", line)

    async def _on_response(self, r: Response) -> None:
        disposition = disposition_of(r.data)
        if disposition is not None and not self._settles:
            self._settles = True  # pi >= 0.99 says what it did with a message
            self._open_to_settle()
        if r.id is not None and r.id in self._barriers:
            barrier_job, token = self._barriers.pop(r.id)
            streaming = isinstance(r.data, Mapping) and r.data.get("isStreaming") is True
            await self._feed(barrier_job, BarrierPassed(token, streaming))
            return
        if r.id is not None and r.id in self._queued and r.success:
            await self._on_queued(r.id, r.command, disposition)
        if r.id is not None and r.id in self._retry_aborts:
            # Read in stdout order: pi answered while this job was (for all it wrote) in its
            # backoff, so the backoff's end, cancelled or not, is on its way.
            job = self._job
            state = job.state if job is not None else None
            in_backoff = state is not None and (
                state.phase == "retrying"
                # pi >= 1.1 ended it already ("Retry cancelled"): its agent_settled follows
                or (state.settles and state.phase == "settling" and state.retry_error is not None)
            )
            self._retry_aborts[r.id] = job if in_backoff else None
        if r.id is not None and r.id in self._stale_prompts:
            # A prompt answered after its caller gave up: its run is nobody's job but its own.
            self._stale_prompts.discard(r.id)
            self.stats.unmatched_responses += 1
            log.warning("pi answered prompt %s after its caller gave up", r.id)
            if r.success and disposition in (None, "started"):
                stale = self._job = self._new_job(fresh=True)
                await self._feed(stale, Accepted(disposition))
            return
        if not self._pending.answer(r):
            self.stats.unmatched_responses += 1
            return
        job = self._prompt_jobs.pop(r.id, None) if r.id is not None else None
        if job is not None and r.success and not job.done.is_set():
            self._job = job  # its answer comes just before its run: what follows is its
            job.disposition = disposition
            await self._feed(job, Accepted(disposition))

    async def _on_queued(
        self, cid: str, command: str, disposition: Disposition | None = None
    ) -> None:
        """Decide, in stdout order, which job a queued message went to.

        pi took it into the job open when it was sent if that job had not reached its
        `agent_end` yet (pi >= 1.1: its `agent_settled`, as pi runs queued messages before it
        settles). Otherwise pi found itself idle: a `prompt` with `streamingBehavior` then
        starts a run of its own (a new job, from this line on; pi >= 0.99 answers `started`); a
        steer or follow-up waits in pi's queue for the next run (no job), as does anything an
        extension `handled`.
        """
        job = self._queued[cid]
        if disposition is not None and disposition != "started":
            joined = disposition == "queued" and job is not None and job is self._job
            if not joined or job is None or job.state.phase == "done":
                self._queued[cid] = None
            return
        if disposition is None and (
            job is not None and job is self._job and job.state.phase not in ("settling", "done")
        ):
            return
        if command == "prompt":
            fresh = self._job = self._new_job(fresh=True)
            fresh.prompt_id, fresh.disposition = cid, disposition
            self._queued[cid] = fresh
            await self._feed(fresh, Accepted(disposition))
        else:
            self._queued[cid] = None

    async def _on_event(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        job = self._job
        if not self._settles and (
            kind == "agent_settled" or (kind == "agent_end" and "willRetry" in record)
        ):
            self._settles = True
            self._open_to_settle()
        if kind == "agent_start" and (
            job is None
            or job.done.is_set()
            or (job.state.phase == "settling" and not job.state.settles)
        ):
            # pi started a run by itself (or the last job only waits for its barrier): a new
            # job, so that no run is ever merged into a finished one. (A pi that settles runs
            # queued messages between `agent_end` and `agent_settled`: the same job.)
            job = self._job = self._new_job(fresh=True)
        events = self._mapper.map(record)
        for ev in events:
            if isinstance(ev, ExtensionUIRequest) and ev.expects_answer:
                self._dialogs.opened(ev, self._tg, self._cancel_dialog)
            await self._publish(ev)
        if job is None or job.done.is_set():
            return
        inp = job_input(kind, record, events)
        if inp is not None:
            await self._feed(job, inp)

    async def _feed(self, job: Job, inp: JobInput) -> None:
        state, actions = step(job.state, inp)
        job.advance(state)
        for action in actions:
            if isinstance(action, SendBarrier):
                bid = f"barrier-{new_id()}"
                self._barriers[bid] = (job, action.token)
                if self._tg is not None:
                    self._tg.start_soon(self._send_barrier, bid)
            elif isinstance(action, Finish):
                await self._finish(job, action, inp)

    def _new_job(self, fresh: bool = False) -> Job:
        job = Job(self._mapper.begin(fresh), self.stop, self.config.job_timeout)
        if self._settles:
            job.advance(evolve(job.state, settles=True))
        self._open_jobs.add(job)
        return job

    def _open_to_settle(self) -> None:
        """Pi turned out to write `agent_settled`: open jobs end there, not at a barrier."""
        for job in self._open_jobs:
            if job.state.phase in ("waiting", "running", "retrying", "compacting"):
                job.advance(evolve(job.state, settles=True))

    async def _send_barrier(self, bid: str) -> None:
        try:
            await self._write({"type": "get_state", "id": bid})
        except BridgeError:
            self._barriers.pop(bid, None)  # the exit path finishes the job

    async def _finish(self, job: Job, fin: Finish, cause: JobInput) -> None:
        gone = (
            ProcessExited(cause.reason, self.returncode) if isinstance(cause, ProcessGone) else None
        )
        result = JobResult(
            run=job.run,
            outcome=fin.outcome,
            messages=fin.messages,
            attempts=fin.attempts,
            error=fin.error,
        )
        job.settle(result, gone)
        self._open_jobs.discard(job)
        for ev in self._mapper.finish(fin.outcome, job.run):
            await self._publish(ev)
        job.done.set()

    async def _publish(self, ev: BridgeEvent) -> None:
        if not self._subscribers:
            self.stats.unobserved_events += 1
            return
        await self._subscribers.publish(ev, force=self._exiting)

    # -- events ------------------------------------------------------------------------------

    def subscribe(
        self, run: MuleIdentity | None = None, capacity: int | None = None
    ) -> Subscription:
        """Start buffering events for a new consumer now (optionally only one run's).

        Events nobody subscribed to are discarded (and counted). A slow subscriber holds the
        reader back once its buffer is full of lifecycle events (see `_buffer`).
        """
        size = self.config.event_buffer if capacity is None else capacity
        stats = self.stats.buffer if not self._subscribers else BufferStats()
        return self._subscribers.add(run, size, stats, closed=self.process_done.is_set())

    def events(self) -> Subscription:
        """Shorthand for `subscribe()`: iterate the bridge's events until pi exits."""
        return self.subscribe()

    # -- jobs --------------------------------------------------------------------------------

    async def run(
        self,
        message: str,
        *,
        images: Sequence[ImageContent] = (),
        on_event: EventCallback | None = None,
        time_limit: float | None = None,
    ) -> JobResult:
        """Prompt and wait for the final result, passing every event of the job to `on_event`.

        On timeout (`config.job_timeout` by default) or cancellation the job is aborted and pi
        stopped; a timeout raises `JobTimeout`, a dead pi `ProcessExited`.
        """
        limit = self.config.job_timeout if time_limit is None else time_limit
        with self.subscribe() as sub:
            try:
                with anyio.move_on_after(limit) as scope:
                    job = await self.prompt(message, images)
                    sub.run = job.run
                    async for ev in sub:
                        if on_event is not None:
                            maybe = on_event(ev)
                            if maybe is not None:
                                await maybe
                        if isinstance(ev, RunEnd) and ev.run == job.run:
                            break
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self.stop()
                raise
            if scope.cancelled_caught:
                with anyio.CancelScope(shield=True):
                    await self.stop()
                raise JobTimeout(limit)
        if not job.done.is_set():
            raise ProcessExited(self._exit_reason or "pi exited", self.returncode)
        return job.outcome()

    # -- commands ----------------------------------------------------------------------------

    async def _command(
        self,
        type: str,
        fields: Mapping[str, Any],
        time_limit: float | None,
        cid: str | None = None,
    ) -> Any:
        limit = self.config.command_timeout if time_limit is None else time_limit
        if time_limit is None and not self._spoke:
            # pi is still starting: its start-up is bounded by start_timeout, not by this command.
            start_left = self._spawned_at + self.config.start_timeout - anyio.current_time()
            limit = max(limit, start_left)
        cid = cid or new_id()
        with self._pending.expect(type, cid) as pending:
            await self._write({"type": type, "id": cid, **fields})
            if type == "prompt":  # a /command's answer waits for its dialogs
                await self._dialogs.wait_answer(pending.done, limit)
            else:
                with anyio.move_on_after(limit):
                    await pending.done.wait()
        r = pending.response
        if r is None:
            if pending.done.is_set() or self.process_done.is_set():
                raise ProcessExited(self._exit_reason or "pi exited", self.returncode)
            raise CommandTimeout(type, limit)
        if not r.success:
            raise CommandFailed(type, r.error or "unknown error")
        return r.data

    async def _write(self, obj: Mapping[str, Any]) -> None:
        proc = self._process
        if proc is None:
            raise ProcessExited("pi is not running")
        if self.process_done.is_set():
            raise ProcessExited(self._exit_reason or "pi exited", self.returncode)
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            data = line.encode()
        except UnicodeEncodeError:  # a lone surrogate: sent escaped, as JS's JSON.stringify does
            data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        try:
            await proc.send(data, self.config.write_timeout)
        except ProcessExited:
            # pi closed its stdin: it is exiting (say, pi failed to start). Its exit code and
            # stderr tell why, not the broken pipe: wait (bounded) for the exit to be seen.
            with anyio.move_on_after(self.config.stop_grace):
                await self.process_done.wait()
            if self.process_done.is_set():
                raise ProcessExited(self._exit_reason or "pi exited", self.returncode) from None
            raise

    # -- extension UI ------------------------------------------------------------------------

    async def respond_ui(
        self, request_id: str, *, value: str | None = None, confirmed: bool | None = None
    ) -> None:
        """Answer a dialog: `value` for select/input/editor, `confirmed` for confirm."""
        if (value is None) == (confirmed is None):
            raise ValueError("give exactly one of value= or confirmed=")
        answer: dict[str, Any] = {"type": "extension_ui_response", "id": request_id}
        answer.update({"value": value} if value is not None else {"confirmed": confirmed})
        self._dialogs.closed(request_id)
        await self._write(answer)

    async def cancel_ui(self, request_id: str) -> None:
        """Dismiss a dialog (the extension sees `undefined`, or `false` for confirm)."""
        self._dialogs.closed(request_id)
        await self._write({"type": "extension_ui_response", "id": request_id, "cancelled": True})

    async def _cancel_dialog(self, request_id: str) -> None:
        with contextlib.suppress(BridgeError):
            await self._write(
                {"type": "extension_ui_response", "id": request_id, "cancelled": True}
            )


async def _guarded(
    scope: anyio.CancelScope, fn: Callable[..., Awaitable[object]], *args: Any
) -> None:
    with scope:
        await fn(*args)


__all__ = ["Bridge", "BridgeStats", "EventCallback"]
