"""The server's jobs: one bridge (one pi process) per job, its event history and its clients."""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, final

import anyio
import anyio.lowlevel
import attrs
from anyio.abc import TaskGroup

from mule.effects import MessageEnd, MessageUpdate, ToolExecutionEnd
from mule.pirc import (
    Bridge,
    BridgeConfig,
    BridgeError,
    BridgeEvent,
    ConfigError,
    ExtensionUIRequest,
    JobResult,
    Subscription,
)
from mule.serve._agents import OVERRIDABLE
from mule.serve._auth import OWNER
from mule.serve._env import child_environment
from mule.serve._wire import (
    FORWARDED_TYPES,
    Frame,
    control,
    encode_event,
    message_key,
    result_to_wire,
    tool_key,
)

if TYPE_CHECKING:
    from mule.serve._app import ServerConfig
    from mule.serve._ws import ClientQueue

log = logging.getLogger("mule.serve")

JobStatus: TypeAlias = Literal["starting", "running", "completed", "failed", "cancelled"]

_THINKING: Final = ("off", "minimal", "low", "medium", "high", "xhigh")
# What a provider, model or tool name may be: never a flag, never whitespace or a comma (each
# value becomes one argv word of pi's; `--tools` joins the tools with commas).
_NAME: Final = re.compile(r"[A-Za-z0-9_.:/@][A-Za-z0-9_.:/@+-]{0,199}")


class JobRequestError(ValueError):
    """A `POST /jobs` body that cannot start a job (answered with 400)."""


class TooManyJobs(JobRequestError):
    """`max_jobs` jobs are already running (answered with 429)."""


def job_config(
    base: BridgeConfig, overrides: Mapping[str, Any], allowed: frozenset[str] = OVERRIDABLE
) -> BridgeConfig:
    """Apply a client's per-job overrides (keys in `allowed`) to a base config (validated)."""
    unknown = set(overrides) - allowed
    if unknown:
        raise JobRequestError(f"config keys not allowed: {sorted(unknown)}")
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if key in ("provider", "model", "system_prompt"):
            if not isinstance(value, str) or (key != "system_prompt" and not value):
                raise JobRequestError(f"config.{key} must be a non-empty string")
            if key != "system_prompt" and not _NAME.fullmatch(value):
                raise JobRequestError(
                    f"config.{key} must be a plain name (letters, digits, . _ : / @ -, "
                    "not starting with -)"
                )
            changes[key] = value
        elif key == "thinking":
            if value not in _THINKING:
                raise JobRequestError(f"config.thinking must be one of {list(_THINKING)}")
            changes[key] = value
        elif key == "no_tools":
            if not isinstance(value, bool):
                raise JobRequestError("config.no_tools must be a boolean")
            changes[key] = value
        else:  # tools, append_system_prompt
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise JobRequestError(f"config.{key} must be a list of strings")
            if key == "tools" and not all(_NAME.fullmatch(v) for v in value):
                raise JobRequestError("config.tools must be plain tool names")
            changes[key] = tuple(value)
    try:
        return attrs.evolve(base, **changes)
    except ConfigError as exc:  # anything the bridge refuses is the request's fault
        raise JobRequestError(f"config: {exc}") from None


@final
class ServerJob:
    """One prompt on its own pi: status, result, the lifecycle history and subscribed clients.

    Attributes:
        id: The job's id, as in `/jobs/{id}`.
        prompt: The prompt the job was started with.
        config: The job's bridge config (the server's, with the request's overrides).
        owner: The principal that created it (the server token's, or a client token's).
        agent: The agent profile it runs (see `ServerConfig.agents`); None: the server's config.
        granted: Other principals that may watch, answer and cancel it.
        status: `starting`, `running`, `completed`, `failed` or `cancelled`.
        created: When the job was created, in seconds since the epoch.
        ended: When it ended, in seconds since the epoch; None while it runs.
        result: How its prompt ended (the last `agent_end`); None until then.
        error: Why it failed or was cancelled, if it did.
        pid: Its pi child's process id, once started.
        returncode: Its pi child's exit code, once it exited.
        cancel_requested: Whether a client asked to cancel it.
        done: Set once the job ended and its pi was reaped.
        slow_disconnects: Clients dropped as too slow while watching it.
        bridge: The bridge to its pi once started; None before.
        scope: The cancel scope the job runs in (cancelling it stops the job).
        pending_ui: Extension dialogs waiting for an answer, by request id.

    """

    def __init__(
        self,
        job_id: str,
        prompt: str,
        config: BridgeConfig,
        owner: str = OWNER,
        agent: str | None = None,
    ) -> None:
        self.id = job_id
        self.prompt = prompt
        self.config = config
        self.owner = owner
        self.agent = agent
        self.granted: set[str] = set()  # other principals that may watch, answer and cancel
        self.status: JobStatus = "starting"
        self.created = time.time()
        self.ended: float | None = None
        self.result: JobResult | None = None
        self.error: str | None = None
        self.pid: int | None = None
        self.returncode: int | None = None
        self.cancel_requested = False
        self.done = anyio.Event()
        self.slow_disconnects = 0
        self.bridge: Bridge | None = None
        self.scope = anyio.CancelScope()
        self.pending_ui: dict[str, ExtensionUIRequest] = {}
        # Replay for late subscribers: every lifecycle frame, plus the newest streaming frame
        # of each message or tool call still in progress.
        self._history: list[Frame] = []
        self._partials: dict[str, Frame] = {}
        self._clients: set[ClientQueue] = set()
        self._seq = itertools.count(1)
        self._resync = False

    def visible_to(self, who: str | None) -> bool:
        """Whether principal `who` may see and act on this job (None: the server itself)."""
        return who is None or who == self.owner or who in self.granted

    @property
    def finished(self) -> bool:
        """Whether the job ended (its pi has been reaped)."""
        return self.done.is_set()

    @property
    def clients(self) -> int:
        """How many clients are subscribed."""
        return len(self._clients)

    def summary(self) -> dict[str, Any]:
        """Return the job's JSON without its messages (for listings)."""
        return {
            "id": self.id,
            "status": self.status,
            "prompt": self.prompt,
            "owner": self.owner,
            "agent": self.agent,
            "provider": self.config.provider,
            "model": self.config.model,
            "created": self.created,
            "ended": self.ended,
            "text": self.result.text if self.result is not None else None,
            "error": self.error,
            "clients": len(self._clients),
            "pendingUi": sorted(self.pending_ui),
        }

    def to_json(self) -> dict[str, Any]:
        """Return the full JSON: summary, process facts and the result (last `agent_end`)."""
        out = self.summary()
        out["pid"] = self.pid
        out["returncode"] = self.returncode
        out["slowDisconnects"] = self.slow_disconnects
        out["result"] = result_to_wire(self.result) if self.result is not None else None
        return out

    # -- fan-out -----------------------------------------------------------------------------

    def attach(self, queue: ClientQueue, replay: bool = True) -> list[Frame]:
        """Subscribe a client; return the replay it gets first (none if `replay` is False).

        Synchronous on purpose: no frame can be published between the replay and the first
        live frame, so a late subscriber sees neither a gap nor a duplicate.
        """
        self._clients.add(queue)
        if not replay:
            return []
        frames = list(self._history)
        for partial in self._partials.values():
            bisect.insort(frames, partial.snapshot(), key=lambda f: f.seq)
        return frames

    def detach(self, queue: ClientQueue) -> None:
        """Unsubscribe a client."""
        self._clients.discard(queue)

    def _publish(self, frame: Frame) -> None:
        if frame.key is None:
            self._history.append(frame)
        else:
            self._partials[frame.key] = frame
        for client in list(self._clients):
            client.offer(frame)

    def publish_event(self, event: BridgeEvent) -> None:
        """Encode and fan out one bridge event (if clients see its type)."""
        if event.type not in FORWARDED_TYPES:
            return
        frame = encode_event(self.id, next(self._seq), event)
        if isinstance(event, MessageUpdate) and self._resync:
            frame = frame.snapshot()  # the bridge dropped deltas: resynchronise every client
            self._resync = False
        if isinstance(event, ExtensionUIRequest) and event.expects_answer:
            self.pending_ui[event.id] = event
        self._publish(frame)
        if isinstance(event, MessageEnd):
            self._partials.pop(message_key(self.id, event.message.value), None)
        elif isinstance(event, ToolExecutionEnd):
            self._partials.pop(tool_key(self.id, event.tool_call.value), None)

    def publish_control(self, kind: str, **fields: Any) -> None:
        """Fan out a server frame (`ui_resolved`, `job_status`, `job_end`); it is replayed too."""
        self._publish(control(self.id, next(self._seq), kind, **fields))

    def mark_gap(self) -> None:
        """Note that the bridge dropped events: the next update goes out as a snapshot."""
        self._resync = True

    def close_clients(self) -> None:
        """Forget all clients (the server is stopping)."""
        self._clients.clear()


def _new_id() -> str:
    return "job-" + secrets.token_hex(6)


@final
class JobManager:
    """Starts, tracks, cancels and reaps jobs inside one task group (the app's lifespan).

    Attributes:
        config: The server's config (every job starts from its bridge config).

    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._jobs: dict[str, ServerJob] = {}
        self._tg: TaskGroup | None = None
        self._watchers: set[Callable[[], None]] = set()

    def watch(self, callback: Callable[[], None]) -> None:
        """Call `callback` (synchronously) whenever a job starts, changes status or goes."""
        self._watchers.add(callback)

    def unwatch(self, callback: Callable[[], None]) -> None:
        """Stop calling `callback`."""
        self._watchers.discard(callback)

    def jobs_changed(self) -> None:
        """Tell the watchers that the job list changed."""
        for callback in list(self._watchers):
            callback()

    async def __aenter__(self) -> JobManager:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        tg, self._tg = self._tg, None
        try:
            with anyio.CancelScope(shield=True):
                for job in self._jobs.values():
                    job.cancel_requested = True
                    job.scope.cancel()
                for job in list(self._jobs.values()):
                    await job.done.wait()
        finally:
            if tg is not None:
                await tg.__aexit__(None, None, None)

    def get(self, job_id: str, who: str | None = None) -> ServerJob | None:
        """Return a job by id, if principal `who` may see it (None: any job)."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.visible_to(who) else None

    def jobs(self, who: str | None = None) -> list[ServerJob]:
        """Return the jobs principal `who` may see (None: all), oldest first."""
        return [j for j in self._jobs.values() if j.visible_to(who)]

    def running(self) -> int:
        """How many jobs have not ended."""
        return sum(not j.finished for j in self._jobs.values())

    def start(
        self,
        prompt: str,
        overrides: Mapping[str, Any] | None = None,
        owner: str = OWNER,
        agent: str | None = None,
    ) -> ServerJob:
        """Start a job for `owner` on a new pi process; raise `JobRequestError` if bad.

        `agent` names one of `config.agents` (default: `config.default_agent`, else none: the
        server's bridge config); `overrides` may set only what that agent leaves overridable.
        """
        if self._tg is None:
            raise RuntimeError("the job manager is not running")
        if not prompt.strip():
            raise JobRequestError("prompt must not be empty")
        if not _is_unicode(prompt):
            raise JobRequestError("prompt holds a lone surrogate (not valid Unicode text)")
        name = agent if agent is not None else self.config.default_agent
        base, allowed = self.config.bridge, OVERRIDABLE
        if name is not None:
            profile = self.config.agents.get(name)
            if profile is None:
                raise JobRequestError(f"no agent {name[:64]!r}; GET /agents lists them")
            base, allowed = profile.apply(base), profile.overridable
        cfg = job_config(base, overrides or {}, allowed)
        env = child_environment(
            os.environ,
            provider=cfg.provider,
            allow=self.config.env_allow,
            fixed=cfg.env,
            secret_values=(self.config.token,),
        )
        cfg = attrs.evolve(cfg, env=env, inherit_env=False)
        if self.running() >= self.config.max_jobs:
            raise TooManyJobs(f"too many running jobs (max {self.config.max_jobs})")
        job = ServerJob(_new_id(), prompt, cfg, owner, name)
        self._jobs[job.id] = job
        self._forget_old()
        self._tg.start_soon(self._run, job)
        self.jobs_changed()
        return job

    def _forget_old(self) -> None:
        ended = [j for j in self._jobs.values() if j.finished]
        for job in ended[: max(0, len(ended) - self.config.keep_jobs)]:
            del self._jobs[job.id]

    async def cancel(self, job: ServerJob, wait: float | None = None) -> None:
        """Cancel a job (abort, then stop its pi); wait up to `wait` seconds for it to end."""
        if not job.finished:
            job.cancel_requested = True
            job.scope.cancel()
        if wait is not None:
            with anyio.move_on_after(wait):
                await job.done.wait()

    async def remove(self, job: ServerJob, wait: float) -> bool:
        """Cancel a job, wait for it, and forget it; False if it did not end in time."""
        await self.cancel(job, wait)
        if not job.finished:
            return False
        self._jobs.pop(job.id, None)
        self.jobs_changed()
        return True

    async def answer_ui(
        self,
        job: ServerJob,
        request_id: str,
        *,
        value: object = None,
        confirmed: object = None,
        cancelled: bool = False,
    ) -> None:
        """Answer (or dismiss) one of a job's open extension dialogs; raise ValueError if bad."""
        req = job.pending_ui.get(request_id)
        if req is None:
            raise ValueError(f"no open dialog {request_id!r} in {job.id}")
        bridge = job.bridge
        if bridge is None or job.finished:
            raise ValueError(f"{job.id} is not running")
        if cancelled:
            answer: dict[str, Any] = {"cancelled": True}
        elif req.method == "confirm":
            if not isinstance(confirmed, bool):
                raise ValueError("a confirm dialog needs confirmed: true|false")
            answer = {"confirmed": confirmed}
        else:
            if not isinstance(value, str):
                raise ValueError(f"a {req.method} dialog needs a string value")
            if req.method == "select" and value not in req.options:
                raise ValueError(f"{value!r} is not one of the options {list(req.options)}")
            answer = {"value": value}
        del job.pending_ui[request_id]  # first answer wins, even between clients
        self.jobs_changed()
        if cancelled:
            await bridge.cancel_ui(request_id)
        elif "confirmed" in answer:
            await bridge.respond_ui(request_id, confirmed=answer["confirmed"])
        else:
            await bridge.respond_ui(request_id, value=answer["value"])
        job.publish_control("ui_resolved", id=request_id, answer=answer)

    async def _run(self, job: ServerJob) -> None:
        cfg = job.config
        try:
            async with anyio.create_task_group() as tg:
                bridge = job.bridge = Bridge(cfg)
                try:
                    # `async with`: the bridge's task group nests inside ours and outside the
                    # job's cancel scope; leaving it stops pi and reaps it (stop is shielded).
                    async with bridge:
                        job.pid = bridge.pid
                        sub = bridge.subscribe(capacity=self.config.bridge_buffer)
                        tg.start_soon(self._pump, job, sub)
                        job.status = "running"
                        job.publish_control("job_status", status="running", pid=job.pid)
                        self.jobs_changed()
                        with job.scope:
                            pi_job = await bridge.prompt(job.prompt)
                            job.result = await pi_job.wait()
                except BridgeError as exc:  # pi could not start, died, or timed out
                    job.error = str(exc)
                finally:
                    job.returncode = bridge.returncode
                    if job.result is None and bridge.job is not None:
                        job.result = bridge.job.result  # cancelled or dead: the partial run
        except Exception as exc:  # a bug must not take the server down with it
            log.exception("job %s crashed", job.id)
            job.error = f"internal error: {exc!r}"
        finally:
            job.status = _final_status(job)
            job.ended = time.time()
            job.pending_ui.clear()
            result = result_to_wire(job.result) if job.result is not None else None
            job.publish_control("job_end", status=job.status, error=job.error, result=result)
            job.done.set()
            self.jobs_changed()

    async def _pump(self, job: ServerJob, sub: Subscription) -> None:
        """Move the job's bridge events to its clients; never waits on a client."""
        dropped = 0
        with sub:
            async for event in sub:
                if sub.stats.dropped != dropped:
                    dropped = sub.stats.dropped
                    job.mark_gap()
                job.publish_event(event)
                if isinstance(event, ExtensionUIRequest) and event.expects_answer:
                    self.jobs_changed()  # listings show open dialogs
                # One stdout chunk can hold dozens of events: let the clients' senders run
                # between them, so a burst alone never counts as a client falling behind.
                await anyio.lowlevel.checkpoint()


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _final_status(job: ServerJob) -> JobStatus:
    if job.result is not None:
        if job.cancel_requested and job.result.outcome != "completed":
            return "cancelled"
        return job.result.outcome
    return "cancelled" if job.cancel_requested else "failed"


__all__ = [
    "OVERRIDABLE",
    "JobManager",
    "JobRequestError",
    "JobStatus",
    "ServerJob",
    "TooManyJobs",
    "job_config",
]
