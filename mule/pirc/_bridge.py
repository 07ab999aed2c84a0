"""The pi RPC bridge: one `pi --mode rpc` child, its commands, events, jobs and shutdown."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, final

import anyio
from anyio.abc import Process, TaskGroup
from attrs import define, field

from mule.effects._events import RunEnd
from mule.effects._identity import MuleIdentity
from mule.pi._codec import to_wire
from mule.pi._content import ImageContent
from mule.pirc._buffer import BufferStats, EventBuffer
from mule.pirc._commands import (
    BridgeError,
    CommandFailed,
    CommandTimeout,
    JobTimeout,
    ProcessExited,
    QueueMode,
    Response,
    StreamingBehavior,
    new_id,
    parse_response,
)
from mule.pirc._config import BridgeConfig, ThinkingOption
from mule.pirc._events import AgentEnd, BridgeEvent, ExtensionUIRequest, JobResult, PiMessage
from mule.pirc._framing import FrameStats, LineFramer, parse_record
from mule.pirc._job import (
    AbortRequested,
    Accepted,
    AgentEnded,
    AgentStarted,
    BarrierPassed,
    CompactionEnded,
    CompactionStarted,
    Finish,
    JobInput,
    JobState,
    ProcessGone,
    RetryEnded,
    RetryStarted,
    SendBarrier,
    step,
)
from mule.pirc._mapper import EventMapper, decode_message, is_droppable

log = logging.getLogger("mule.pirc")

EventCallback = Callable[[BridgeEvent], Awaitable[None] | None]


@define
class BridgeStats:
    """Live counters: framing, parsing, buffering, unmatched responses and UI timeouts."""

    frames: FrameStats = field(factory=FrameStats)
    buffer: BufferStats = field(factory=BufferStats)
    unobserved_events: int = 0
    unmatched_responses: int = 0
    ui_timeouts: int = 0
    stderr_lines: int = 0


@final
class Subscription:
    """A consumer's bounded view of the bridge's events (see `Bridge.subscribe`)."""

    def __init__(self, bridge: Bridge, buffer: EventBuffer[BridgeEvent], run: MuleIdentity | None):
        self._bridge = bridge
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
        self._bridge._unsubscribe(self)
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
class Job:
    """One prompt's run: done when the job state machine says so, with a `JobResult`."""

    def __init__(self, bridge: Bridge, run: MuleIdentity) -> None:
        self._bridge = bridge
        self.run = run
        self.done = anyio.Event()
        self.state = JobState()
        self.prompt_id: str | None = None
        self._result: JobResult | None = None
        self._error: BridgeError | None = None

    @property
    def result(self) -> JobResult | None:
        """The result once done (None while running or if pi died)."""
        return self._result

    async def wait(self, time_limit: float | None = None) -> JobResult:
        """Wait for the result; on timeout or cancellation abort the job and stop pi.

        Raises `JobTimeout`, or `ProcessExited` if pi died before the job finished.
        """
        limit = self._bridge.config.job_timeout if time_limit is None else time_limit
        try:
            with anyio.move_on_after(limit):
                await self.done.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._bridge.stop()
            raise
        if not self.done.is_set():
            with anyio.CancelScope(shield=True):
                await self._bridge.stop()
            raise JobTimeout(limit)
        return self.outcome()

    def outcome(self) -> JobResult:
        """Return the result of a finished job, or raise its failure."""
        if self._error is not None:
            raise self._error
        if self._result is None:
            raise RuntimeError("job is not finished")
        return self._result


@final
class _Pending:
    __slots__ = ("command", "done", "response")

    def __init__(self, command: str) -> None:
        self.command = command
        self.done = anyio.Event()
        self.response: Response | None = None


@final
class Bridge:
    """Drives one pi RPC child: `async with Bridge(config) as pi: result = await pi.run("hi")`."""

    def __init__(self, config: BridgeConfig) -> None:
        self.config = config
        self.stats = BridgeStats()
        self.process_done = anyio.Event()
        self.returncode: int | None = None
        self._process: Process | None = None
        self._tg: TaskGroup | None = None
        self._write_lock = anyio.Lock()
        self._stdout_eof = anyio.Event()
        self._pending: dict[str, _Pending] = {}
        self._barriers: dict[str, tuple[Job, int]] = {}
        self._subscribers: list[Subscription] = []
        self._mapper = EventMapper()
        self._job: Job | None = None
        self._ui_timers: dict[str, anyio.CancelScope] = {}
        self._stderr_tail: deque[str] = deque(maxlen=20)
        self._stopping = False
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
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Spawn pi and start reading its output."""
        if self._process is not None:
            raise RuntimeError("bridge already started")
        cfg = self.config
        try:
            self._process = await anyio.open_process(
                cfg.argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cfg.cwd,
                env=cfg.child_env(),
                start_new_session=True,  # a terminal's Ctrl-C must not reach pi behind our back
            )
        except OSError as exc:
            self.process_done.set()
            raise ProcessExited(f"could not start pi ({cfg.executable}): {exc}") from exc
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._read_stdout)
        self._tg.start_soon(self._read_stderr)
        self._tg.start_soon(self._wait_exit)

    async def aclose(self) -> None:
        """Stop pi (see `stop`) and end the bridge's background tasks."""
        try:
            await self.stop()
        finally:
            tg, self._tg = self._tg, None
            if tg is not None:
                tg.cancel_scope.cancel()
                await tg.__aexit__(None, None, None)

    async def stop(self) -> int | None:
        """Shut pi down: abort if running, close stdin, wait, SIGTERM, then SIGKILL.

        Always reaps the child; returns its exit code.
        """
        proc = self._process
        if proc is None:
            return None
        cfg = self.config
        with anyio.CancelScope(shield=True):
            if not self._stopping and not self.process_done.is_set():
                self._stopping = True
                job = self._job
                if job is not None and not job.done.is_set():
                    try:
                        await self.abort(time_limit=cfg.abort_grace)
                    except BridgeError as exc:
                        log.info("abort during stop failed: %s", exc)
                await self._close_stdin()
                with anyio.move_on_after(cfg.stop_grace):
                    await self.process_done.wait()
                if not self.process_done.is_set():
                    log.warning("pi did not exit after stdin closed; sending SIGTERM")
                    self._signal(signal.SIGTERM)
                    with anyio.move_on_after(cfg.stop_grace):
                        await self.process_done.wait()
                if not self.process_done.is_set():
                    log.warning("pi ignored SIGTERM; killing it")
                    self.kill()
            await self.process_done.wait()
        return self.returncode

    def kill(self) -> None:
        """Send SIGKILL to pi's process group now (the exit is still reaped by the bridge)."""
        self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        proc = self._process
        if proc is None or self.returncode is not None:
            return
        try:
            os.killpg(proc.pid, sig)  # the group: pi's own children go too
        except ProcessLookupError:
            pass
        except PermissionError:
            proc.send_signal(sig)

    async def wait_exit(self) -> int | None:
        """Wait for pi to exit; return its exit code (negative: killed by that signal)."""
        await self.process_done.wait()
        return self.returncode

    async def _close_stdin(self) -> None:
        proc = self._process
        if proc is None or proc.stdin is None:
            return
        async with self._write_lock:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await proc.stdin.aclose()

    async def _wait_exit(self) -> None:
        proc = self._process
        assert proc is not None
        rc = self.returncode = await proc.wait()
        with anyio.move_on_after(2.0):  # a grandchild may hold stdout open
            await self._stdout_eof.wait()
        self._exiting = True  # from now on publishing never waits for consumers
        tail = " | ".join(self._stderr_tail)
        reason = f"pi exited with code {rc}" + (f": {tail}" if tail and rc else "")
        self._exit_reason = reason
        log.info("%s", reason)
        for pending in self._pending.values():
            pending.done.set()
        for scope in self._ui_timers.values():
            scope.cancel()
        job = self._job
        if job is not None and not job.done.is_set():
            await self._feed(job, ProcessGone(reason))
        for sub in list(self._subscribers):
            sub._buffer.close()
        self.process_done.set()

    # -- reading -----------------------------------------------------------------------------

    async def _read_stdout(self) -> None:
        proc = self._process
        assert proc is not None
        assert proc.stdout is not None
        framer = LineFramer(self.config.max_line_bytes, self.stats.frames)
        try:
            async for chunk in proc.stdout:
                for line in framer.feed(chunk):
                    await self._handle_line(line)
            tail = framer.close()
            if tail is not None:
                await self._handle_line(tail)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self._stdout_eof.set()

    async def _read_stderr(self) -> None:
        proc = self._process
        assert proc is not None
        assert proc.stderr is not None
        framer = LineFramer(64 * 1024, FrameStats())
        try:
            async for chunk in proc.stderr:
                for raw in framer.feed(chunk):
                    text = raw.decode("utf-8", "replace")
                    self.stats.stderr_lines += 1
                    self._stderr_tail.append(text[:500])
                    log.info("pi stderr: %s", text)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    async def _handle_line(self, line: bytes) -> None:
        record = parse_record(line, self.stats.frames)
        if record is None:
            return
        if record.get("type") == "response":
            await self._on_response(parse_response(record))
        else:
            await self._on_event(record)

    async def _on_response(self, r: Response) -> None:
        if r.id is not None and r.id in self._barriers:
            barrier_job, token = self._barriers.pop(r.id)
            streaming = isinstance(r.data, Mapping) and r.data.get("isStreaming") is True
            await self._feed(barrier_job, BarrierPassed(token, streaming))
            return
        pending = self._pending.get(r.id) if r.id is not None else None
        if pending is None and r.id is None:
            # pi drops the id for unknown command types; match by command if unambiguous.
            same = [
                p for p in self._pending.values() if p.command == r.command and not p.done.is_set()
            ]
            pending = same[0] if len(same) == 1 else None
        if pending is None or pending.done.is_set():
            self.stats.unmatched_responses += 1
            log.warning("pi response matches no command: %r", r)
            return
        pending.response = r
        pending.done.set()
        job = self._job
        if job is not None and r.success and r.id is not None and r.id == job.prompt_id:
            await self._feed(job, Accepted())

    async def _on_event(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        job = self._job
        if kind == "agent_start" and (job is None or job.done.is_set()):
            job = Job(self, self._mapper.begin())  # pi started a run by itself
            self._job = job
        events = self._mapper.map(record)
        for ev in events:
            if isinstance(ev, ExtensionUIRequest) and ev.expects_answer:
                self._arm_ui_timer(ev)
            await self._publish(ev)
        if job is None or job.done.is_set():
            return
        inp = _job_input(kind, record, events)
        if inp is not None:
            await self._feed(job, inp)

    async def _feed(self, job: Job, inp: JobInput) -> None:
        job.state, actions = step(job.state, inp)
        for action in actions:
            if isinstance(action, SendBarrier):
                bid = f"barrier-{new_id()}"
                self._barriers[bid] = (job, action.token)
                if self._tg is not None:
                    self._tg.start_soon(self._send_barrier, bid)
            elif isinstance(action, Finish):
                await self._finish(job, action, inp)

    async def _send_barrier(self, bid: str) -> None:
        try:
            await self._write({"type": "get_state", "id": bid})
        except BridgeError:
            self._barriers.pop(bid, None)  # the exit path finishes the job

    async def _finish(self, job: Job, fin: Finish, cause: JobInput) -> None:
        if isinstance(cause, ProcessGone):
            job._error = ProcessExited(cause.reason, self.returncode)
        job._result = JobResult(
            run=job.run,
            outcome=fin.outcome,
            messages=fin.messages,
            attempts=fin.attempts,
            error=fin.error,
        )
        for ev in self._mapper.finish(fin.outcome):
            await self._publish(ev)
        job.done.set()

    async def _publish(self, ev: BridgeEvent) -> None:
        if not self._subscribers:
            self.stats.unobserved_events += 1
            return
        for sub in list(self._subscribers):
            if sub.run is None or getattr(ev, "run", None) in (sub.run, None):
                if self._exiting:
                    sub._buffer.force_put(ev)
                else:
                    await sub._buffer.put(ev)

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
        sub = Subscription(self, EventBuffer(size, is_droppable, stats), run)
        if self.process_done.is_set():
            sub._buffer.close()
        self._subscribers.append(sub)
        return sub

    def events(self) -> Subscription:
        """Shorthand for `subscribe()`: iterate the bridge's events until pi exits."""
        return self.subscribe()

    def _unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    # -- jobs --------------------------------------------------------------------------------

    async def prompt(
        self,
        message: str,
        images: Sequence[ImageContent] = (),
        streaming_behavior: StreamingBehavior | None = None,
        time_limit: float | None = None,
    ) -> Job:
        """Send a prompt; return its job (the running job when `streaming_behavior` queues it)."""
        fields: dict[str, Any] = {"message": message}
        if images:
            fields["images"] = [to_wire(i) for i in images]
        if streaming_behavior is not None:
            fields["streamingBehavior"] = streaming_behavior
        running = self._job
        if running is not None and not running.done.is_set():
            # Queued into (or, without streaming_behavior, rejected by) the running job.
            await self._command("prompt", fields, time_limit)
            return running
        job = self._job = Job(self, self._mapper.begin())
        pid = job.prompt_id = new_id()
        try:
            await self._command("prompt", fields, time_limit, cid=pid)
        except CommandFailed as exc:
            await self._finish(job, Finish("failed", (), 0, exc.error), AbortRequested())
            raise
        return job

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

    async def command(
        self, type: str, fields: Mapping[str, Any] | None = None, time_limit: float | None = None
    ) -> Any:
        """Send any command and return its response `data` (raises `CommandFailed` etc.)."""
        return await self._command(type, dict(fields or {}), time_limit)

    async def _command(
        self,
        type: str,
        fields: Mapping[str, Any],
        time_limit: float | None,
        cid: str | None = None,
    ) -> Any:
        limit = self.config.command_timeout if time_limit is None else time_limit
        cid = cid or new_id()
        pending = self._pending[cid] = _Pending(type)
        try:
            await self._write({"type": type, "id": cid, **fields})
            with anyio.move_on_after(limit):
                await pending.done.wait()
        finally:
            del self._pending[cid]
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
        if proc is None or proc.stdin is None:
            raise ProcessExited("pi is not running")
        if self.process_done.is_set():
            raise ProcessExited(self._exit_reason or "pi exited", self.returncode)
        data = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        async with self._write_lock:
            try:
                await proc.stdin.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                raise ProcessExited(f"cannot write to pi: {exc!r}", self.returncode) from exc

    async def steer(self, message: str, images: Sequence[ImageContent] = ()) -> None:
        """Queue a steering message (delivered after the current turn's tools)."""
        await self._command("steer", _message(message, images), None)

    async def follow_up(self, message: str, images: Sequence[ImageContent] = ()) -> None:
        """Queue a follow-up message (delivered when the agent would stop)."""
        await self._command("follow_up", _message(message, images), None)

    async def abort(self, time_limit: float | None = None) -> None:
        """Abort the running job; pi answers after the aborted run's `agent_end`."""
        job = self._job
        if job is not None and not job.done.is_set():
            await self._feed(job, AbortRequested())
        await self._command("abort", {}, time_limit)

    async def new_session(self, parent_session: str | None = None) -> dict[str, Any]:
        """Start a new session (writes a session file even under `--no-session`)."""
        fields = {"parentSession": parent_session} if parent_session else {}
        return dict(await self._command("new_session", fields, None) or {})

    async def get_state(self) -> dict[str, Any]:
        """Return pi's session state (model, isStreaming, messageCount, ...)."""
        return dict(await self._command("get_state", {}, None) or {})

    async def get_messages(self) -> tuple[PiMessage, ...]:
        """Return the session's messages (unknown roles stay raw)."""
        data = await self._command("get_messages", {}, None)
        raw = data.get("messages") if isinstance(data, Mapping) else None
        return tuple(decode_message(m) for m in raw) if isinstance(raw, list) else ()

    async def set_model(self, provider: str, model_id: str) -> dict[str, Any]:
        """Switch model; returns pi's model object."""
        data = await self._command("set_model", {"provider": provider, "modelId": model_id}, None)
        return dict(data or {})

    async def cycle_model(self) -> dict[str, Any] | None:
        """Cycle to the next scoped model (None if there is none)."""
        data = await self._command("cycle_model", {}, None)
        return dict(data) if isinstance(data, Mapping) else None

    async def get_available_models(self) -> list[dict[str, Any]]:
        """Return the models pi has credentials for."""
        data = await self._command("get_available_models", {}, None)
        models = data.get("models") if isinstance(data, Mapping) else None
        return list(models) if isinstance(models, list) else []

    async def set_thinking_level(self, level: ThinkingOption) -> None:
        """Set the thinking level."""
        await self._command("set_thinking_level", {"level": level}, None)

    async def cycle_thinking_level(self) -> str | None:
        """Cycle the thinking level; return the new one (None if the model cannot think)."""
        data = await self._command("cycle_thinking_level", {}, None)
        level = data.get("level") if isinstance(data, Mapping) else None
        return level if isinstance(level, str) else None

    async def set_steering_mode(self, mode: QueueMode) -> None:
        """Deliver steering messages all at once or one per turn (persists to settings)."""
        await self._command("set_steering_mode", {"mode": mode}, None)

    async def set_follow_up_mode(self, mode: QueueMode) -> None:
        """Deliver follow-ups all at once or one per turn."""
        await self._command("set_follow_up_mode", {"mode": mode}, None)

    async def compact(
        self, custom_instructions: str | None = None, time_limit: float | None = None
    ) -> dict[str, Any]:
        """Compact the session now."""
        fields = {"customInstructions": custom_instructions} if custom_instructions else {}
        return dict(await self._command("compact", fields, time_limit) or {})

    async def set_auto_compaction(self, enabled: bool) -> None:
        """Turn auto-compaction on or off."""
        await self._command("set_auto_compaction", {"enabled": enabled}, None)

    async def set_auto_retry(self, enabled: bool) -> None:
        """Turn auto-retry on or off (persists to settings)."""
        await self._command("set_auto_retry", {"enabled": enabled}, None)

    async def abort_retry(self) -> None:
        """Cancel a pending auto-retry."""
        await self._command("abort_retry", {}, None)

    async def bash(self, command: str, time_limit: float | None = None) -> dict[str, Any]:
        """Run a shell command through pi; returns `{output, exitCode, cancelled, truncated}`."""
        return dict(await self._command("bash", {"command": command}, time_limit) or {})

    async def abort_bash(self) -> None:
        """Abort the running `bash` command."""
        await self._command("abort_bash", {}, None)

    async def get_session_stats(self) -> dict[str, Any]:
        """Return message, token and cost counts of the session."""
        return dict(await self._command("get_session_stats", {}, None) or {})

    async def export_html(self, output_path: str | None = None) -> str:
        """Export the session as HTML; return the file's path."""
        fields = {"outputPath": output_path} if output_path else {}
        data = await self._command("export_html", fields, None)
        return str(data.get("path", "")) if isinstance(data, Mapping) else ""

    async def switch_session(self, session_path: str) -> dict[str, Any]:
        """Load another session file."""
        data = await self._command("switch_session", {"sessionPath": session_path}, None)
        return dict(data or {})

    async def fork(self, entry_id: str) -> dict[str, Any]:
        """Fork the session at a user message entry."""
        return dict(await self._command("fork", {"entryId": entry_id}, None) or {})

    async def clone(self) -> dict[str, Any]:
        """Clone the session at its current entry."""
        return dict(await self._command("clone", {}, None) or {})

    async def get_fork_messages(self) -> list[dict[str, Any]]:
        """Return the user messages one can fork at."""
        data = await self._command("get_fork_messages", {}, None)
        msgs = data.get("messages") if isinstance(data, Mapping) else None
        return list(msgs) if isinstance(msgs, list) else []

    async def get_last_assistant_text(self) -> str | None:
        """Return the last assistant message's text (None if there is none)."""
        data = await self._command("get_last_assistant_text", {}, None)
        text = data.get("text") if isinstance(data, Mapping) else None
        return text if isinstance(text, str) else None

    async def set_session_name(self, name: str) -> None:
        """Name the session."""
        await self._command("set_session_name", {"name": name}, None)

    async def get_commands(self) -> list[dict[str, Any]]:
        """Return extension commands, prompt templates and skills."""
        data = await self._command("get_commands", {}, None)
        cmds = data.get("commands") if isinstance(data, Mapping) else None
        return list(cmds) if isinstance(cmds, list) else []

    # -- extension UI ------------------------------------------------------------------------

    async def respond_ui(
        self, request_id: str, *, value: str | None = None, confirmed: bool | None = None
    ) -> None:
        """Answer a dialog: `value` for select/input/editor, `confirmed` for confirm."""
        if (value is None) == (confirmed is None):
            raise ValueError("give exactly one of value= or confirmed=")
        answer: dict[str, Any] = {"type": "extension_ui_response", "id": request_id}
        answer.update({"value": value} if value is not None else {"confirmed": confirmed})
        self._disarm_ui_timer(request_id)
        await self._write(answer)

    async def cancel_ui(self, request_id: str) -> None:
        """Dismiss a dialog (the extension sees `undefined`, or `false` for confirm)."""
        self._disarm_ui_timer(request_id)
        await self._write({"type": "extension_ui_response", "id": request_id, "cancelled": True})

    def _arm_ui_timer(self, req: ExtensionUIRequest) -> None:
        limit = self.config.ui_timeout
        if limit is None or self._tg is None:
            return
        scope = anyio.CancelScope()
        self._ui_timers[req.id] = scope
        self._tg.start_soon(self._ui_timer, req.id, limit, scope)

    def _disarm_ui_timer(self, request_id: str) -> None:
        scope = self._ui_timers.pop(request_id, None)
        if scope is not None:
            scope.cancel()

    async def _ui_timer(self, request_id: str, limit: float, scope: anyio.CancelScope) -> None:
        with scope:
            await anyio.sleep(limit)
        if scope.cancelled_caught or self._ui_timers.get(request_id) is not scope:
            return
        del self._ui_timers[request_id]
        self.stats.ui_timeouts += 1
        log.warning("extension UI request %s unanswered after %g s; cancelled", request_id, limit)
        with contextlib.suppress(BridgeError):
            await self._write(
                {"type": "extension_ui_response", "id": request_id, "cancelled": True}
            )


def _message(message: str, images: Sequence[ImageContent]) -> dict[str, Any]:
    fields: dict[str, Any] = {"message": message}
    if images:
        fields["images"] = [to_wire(i) for i in images]
    return fields


def _job_input(
    kind: object, record: Mapping[str, Any], events: Sequence[BridgeEvent]
) -> JobInput | None:
    match kind:
        case "agent_start":
            return AgentStarted()
        case "agent_end":
            ends = [e for e in events if isinstance(e, AgentEnd)]
            return AgentEnded(ends[0].messages if ends else ())
        case "auto_retry_start":
            return RetryStarted()
        case "auto_retry_end":
            err = record.get("finalError")
            return RetryEnded(record.get("success") is True, err if isinstance(err, str) else None)
        case "compaction_start":
            return CompactionStarted()
        case "compaction_end":
            return CompactionEnded(record.get("willRetry") is True)
    return None


__all__ = ["Bridge", "BridgeStats", "EventCallback", "Job", "Subscription"]
