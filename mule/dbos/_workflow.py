"""A mule run as a DBOS workflow: model attempts and tool executions are recorded steps.

The workflow runs mule's own interpreter. The stream function and each tool's executor are
wrapped so that every model attempt and every tool execution is one step, at a step id
drawn where the interpreter asks for it (the driver task, in the machine's deterministic
order), so a replay after a crash asks for the same steps in the same order. mule records the
steps itself (`mule.steps`, through the run store's writer thread), not as DBOS steps: a DBOS
step costs two queries and a commit of its own, where the writer commits the records of
every run in flight in one transaction. DBOS queues, recovers and cancels the workflow.

- a model attempt step runs the real stream, hands each event to the interpreter as it
  arrives (so listeners see the stream live) and returns the final assistant message; on
  replay the recorded message is returned and the attempt re-streams only `start` and the terminal
  event (its updates are not recorded again);
- a tool step runs the executor, hands its updates on, and returns the result; an unsafe
  tool's step first commits a claim row, so a claimed step that never recorded its output
  (a crash during the side effect) answers "interrupted, not safe to replay" and is never
  executed again; a safe tool's step simply runs again.

Events go to the run store (`PgStore`, one segment per run): checkpoint events are keyed by
their run-local identities, so a replay does not write them twice.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, final

import anyio
from anyio.abc import TaskGroup
from attrs import evolve
from dbos import DBOS, DBOSConfig
from returns.result import Failure

import mule.promise as promise
from mule.dbos._observe import DurableRun, ListenerFactory, both
from mule.dbos._store import StepRecord, StoreError
from mule.dbos._worker import Runtime, Worker, loop_post
from mule.effects import (
    INTERRUPTED_UNSAFE,
    MessageEnd,
    MessageStart,
    MuleEvent,
    MuleToolExecutionPart,
    MuleToolResult,
    ToolExecutionEnd,
    from_wire,
    to_wire,
)
from mule.effects import run as run_core
from mule.pi import (
    AbortController,
    AbortError,
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    AssistantMessageEventStream,
    DoneEvent,
    ErrorEvent,
    Message,
    Model,
    StartEvent,
    StreamOptions,
    TextContent,
    ToolCall,
    TranscriptContext,
)
from mule.promise import core_input

WORKFLOW_NAME = "mule.run"
DEFAULT_QUEUE = "mule-runs"
DEFAULT_VERSION = "mule-dbos-2"  # 2: steps recorded in mule.steps, not by DBOS
MODEL_STEP = "mule.model_attempt"
TOOL_STEP = "mule.tool_execution"

AgentFactory = Callable[[tuple[Message, ...]], promise.MuleRunInput]
"""Builds a run's input (model, prompt, tools, stream, retry...) from its starting messages."""

_AGENTS: dict[str, AgentFactory] = {}


def register_agent(name: str, factory: AgentFactory) -> None:
    """Register an agent by name in this process; every worker must register the same ones.

    The factory and the run's callbacks run in workflow code and run again on a replay, so
    they must be deterministic (hooks such as `get_steering_messages` included).
    """
    _AGENTS[name] = factory


_RUNTIME: Runtime | None = None


def _runtime() -> Runtime:
    if _RUNTIME is None:
        raise RuntimeError("mule.dbos: call launch_worker() in this process first")
    return _RUNTIME


@final
class _Durable:
    """One workflow execution's wrappers: model attempts and tool executions as recorded steps."""

    def __init__(self, rt: Runtime, run_id: str, recorded: dict[int, tuple[str, str]]) -> None:
        self.rt = rt
        self.run_id = run_id
        self.recorded = recorded  # step id -> (name, output JSON), read as the execution starts
        self.tg: TaskGroup | None = None
        self.next_step = 0
        self.replaying = False  # the current model attempt is replayed from its recorded output
        self.replayed_calls: set[str] = set()  # tool call ids whose last step was replayed

    def was_replayed(self, event: MuleEvent) -> bool:
        """Whether the step of this event came from its record (see `DurableRun.replayed`)."""
        kind = type(event)
        if kind is ToolExecutionEnd:
            return event.call.id in self.replayed_calls  # type: ignore[union-attr]
        if kind is MessageStart or kind is MessageEnd:
            return self.replaying and type(event.value) is AssistantMessage  # type: ignore[union-attr]
        return False

    def skip(self, event: MuleEvent) -> bool:
        """Drop the updates of a replayed attempt: the log has the original stream."""
        return self.replaying and event.type == "message_update"

    def reserve(self) -> int:
        """Draw the next step id (called in the driver task: the machine's deterministic order)."""
        self.next_step += 1
        return self.next_step

    def replayed(self, step: int, name: str) -> Any:
        """Return the recorded output of `step` (None: not recorded); check it is a `name`."""
        got = self.recorded.pop(step, None)
        if got is None:
            return None
        if got[0] != name:
            raise RuntimeError(
                f"mule.dbos: run {self.run_id} diverged from its recorded steps: step {step}"
                f" was a {got[0]}, this execution asks for a {name} (non-deterministic workflow"
                " code?)"
            )
        return json.loads(got[1])

    async def record(self, step: int, name: str, output: Any) -> Any:
        """Commit a step's output before the run acts on it; return the output that stands.

        The writer thread groups every run's records into one transaction. If another
        execution of this workflow recorded the step first, its output is returned.
        """
        rec = StepRecord(self.run_id, step, name, json.dumps(output, separators=(",", ":")))
        wait = self.rt.store.record(rec)
        if wait is not None:
            await wait
        if rec.kept is None:
            raise StoreError(f"step {step} of run {self.run_id} was not recorded")
        return output if rec.kept is rec.output else json.loads(rec.kept)

    async def claim(self, step: int) -> bool:
        """Commit a claim on an unsafe step before its side effect; False if it was claimed."""
        # The nonce tells this claim from another execution's in the same process and batch.
        rec = StepRecord(self.run_id, step, None, f"{self.rt.executor_id} {uuid.uuid4().hex[:8]}")
        wait = self.rt.store.record(rec)
        if wait is not None:
            await wait
        return bool(rec.kept)

    # -- the model ----------------------------------------------------------------------------

    def stream_fn(
        self, real: Callable[..., Any]
    ) -> Callable[[Model, TranscriptContext, StreamOptions], AssistantMessageEventStream]:
        """Wrap a stream function: each call is one model-attempt step."""

        def call(model: Model, context: TranscriptContext, options: StreamOptions) -> Any:
            step = self.reserve()
            source = self._attempt(step, real, model, context, options)
            return AssistantMessageEventStream.from_batches(source)

        return call

    async def _attempt(
        self,
        step: int,
        real: Callable[..., Any],
        model: Model,
        context: TranscriptContext,
        options: StreamOptions,
    ) -> AsyncIterator[tuple[AssistantMessageEvent, ...]]:
        """Yield the attempt's reads as batches (a provider's network reads pass through whole)."""
        self.replaying = False
        value = self.replayed(step, MODEL_STEP)
        if value is None:
            made = real(model, context, options)
            if inspect.isawaitable(made):
                made = await made
            given: object = made
            stream = (
                made
                if type(given) is AssistantMessageEventStream
                else AssistantMessageEventStream.from_source(made)
            )
            try:
                while batch := await stream.next_batch():
                    event = batch[0]  # a terminal event comes in a batch of its own
                    if type(event) is DoneEvent or type(event) is ErrorEvent:
                        # Handed on only once the step is recorded: the interpreter may close
                        # the stream right after it, and the message must be durable by then.
                        final = event.message if type(event) is DoneEvent else event.error
                        mine = to_wire(final)
                        value = await self.record(step, MODEL_STEP, mine)
                        if value is mine:
                            yield batch
                            return
                        break  # another execution's attempt was recorded first: it stands
                    yield batch
                    del batch, event  # handed on: not held while the next read waits
            finally:
                await _aclose(stream)
            if value is None:
                raise RuntimeError("the model stream ended without a done or error event")
        else:
            self.replaying = True
        message = from_wire(AssistantMessage, value)
        if self.replaying:
            yield (StartEvent(partial=evolve(message, content=())),)
        if message.stop_reason in ("error", "aborted"):
            yield (ErrorEvent(reason=message.stop_reason, error=message),)
        else:
            yield (DoneEvent(reason=message.stop_reason, message=message),)

    # -- tools ----------------------------------------------------------------------------------

    def tool(self, tool: promise.MuleTool) -> promise.MuleTool:
        """Wrap a tool: its preparation runs in the workflow, its execution is one step."""
        durable = self

        async def prepare(call: ToolCall, signal: AbortSignal) -> promise.MuleToolPreparation:
            prep = await tool.prepare(call, signal)
            if type(prep) is not promise.MuleToolPrepared:
                return prep
            step = durable.reserve()  # in the driver task: deterministic order
            inner = prep

            def execute(s: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
                return durable._execute(step, tool, inner, s, call.id)

            return promise.MuleToolPrepared(execute)

        return evolve(tool, prepare=prepare)

    async def _execute(
        self,
        step: int,
        tool: promise.MuleTool,
        prep: promise.MuleToolPrepared[AsyncIterator[MuleToolExecutionPart]],
        signal: AbortSignal,
        call_id: str,
    ) -> AsyncIterator[MuleToolExecutionPart]:
        value = self.replayed(step, TOOL_STEP)
        # Kept by call id until a step of the same id runs here (a model may reuse ids by turn).
        if value is not None:
            self.replayed_calls.add(call_id)
        else:
            self.replayed_calls.discard(call_id)
            if tool.replay == "unsafe" and not await self.claim(step):
                # Claimed by an execution that never recorded its output: never run it again.
                value = await self.record(step, TOOL_STEP, {"interrupted": True})
            else:
                parts = prep.execute(signal)
                try:
                    async for part in parts:
                        if part.type == "update":
                            yield part
                        else:
                            mine = {"result": to_wire(part.result)}
                            value = await self.record(step, TOOL_STEP, mine)
                            break
                finally:
                    await _aclose(parts)
                if value is None:
                    raise RuntimeError(f"tool {tool.descriptor.name} ended without a result")
        if "interrupted" in value:
            text = (TextContent(INTERRUPTED_UNSAFE),)
            result = MuleToolResult(content=text, details={}, is_error=True)
            yield MuleToolExecutionPart("result", result)
        else:
            yield MuleToolExecutionPart("result", from_wire(MuleToolResult, value["result"]))

    def keep_meta(self, key: str, value: str) -> None:
        """Write a metadata entry of the run in a worker thread (see `DurableRun.set_meta`)."""
        assert self.tg is not None
        self.tg.start_soon(self._write_meta, key, value)

    async def _write_meta(self, key: str, value: str) -> None:
        # Shielded: the workflow's task group is cancelled when the run ends, not this write.
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(self.rt.store.set_meta, self.run_id, key, value)
            except Exception as exc:  # the run goes on; only its metadata is missing
                DBOS.logger.warning(f"mule: could not keep {key!r} of run {self.run_id}: {exc}")


@DBOS.workflow(name=WORKFLOW_NAME)
async def _mule_workflow(agent: str, run_id: str) -> dict[str, Any]:
    """Run one mule run; on recovery DBOS runs this again and completed steps replay."""
    rt = _runtime()
    factory = _AGENTS.get(agent)
    if factory is None:
        raise LookupError(f"mule.dbos: agent {agent!r} is not registered on this worker")
    base, recorded, recorder, meta = await anyio.to_thread.run_sync(
        _open_execution, rt, run_id, rt.listener is not None
    )
    durable = _Durable(rt, run_id, recorded)
    recorder.skip = durable.skip
    inp = factory(base)
    controller = AbortController()
    async with anyio.create_task_group() as tg:
        durable.tg = tg
        real = inp.stream or _default_stream()
        wrapped = evolve(
            inp,
            stream=durable.stream_fn(real),
            tools=[durable.tool(t) for t in inp.tools],
        )
        listener: promise.MulePromiseListener = recorder
        if rt.listener is not None:
            extra = rt.listener(
                DurableRun(run_id, agent, meta, durable.keep_meta, durable.was_replayed)
            )
            if extra is not None:
                listener = both(listener, extra)
        # The worker's threads abort the run once DBOS marks it cancelled (from any process;
        # a DBOS call in workflow code would be recorded as a step), and flush its buffered
        # events while it waits on something slow (a tool, a model).
        post = loop_post()
        rt.watch(run_id, post, lambda: controller.abort(_cancelled()))
        rt.flush_every(recorder, post, recorder.flush)
        try:
            result = await run_core(core_input(wrapped, listener), controller.signal)
        finally:
            rt.unwatch(run_id)
            rt.unflush(recorder)
        tg.cancel_scope.cancel()
    if isinstance(result, Failure):
        error = result.failure()
        return {
            "status": "failed",
            "messages": [],
            "message": None,
            "error": f"{error.phase}: {error.message}",
        }
    outcome = result.unwrap()
    return {
        "status": outcome.status,
        "messages": [to_wire(m) for m in outcome.messages],
        "message": to_wire(outcome.message),
        "error": None,
    }


def _open_execution(
    rt: Runtime, run_id: str, with_meta: bool
) -> tuple[tuple[Message, ...], dict[int, tuple[str, str]], Any, dict[str, str]]:
    """Read what an execution starts from, in one worker-thread hop (never on the loop).

    The log is for followers: the step records are what a replay relies on, and a replay
    re-emits every checkpoint event, so the log's commits ride on the flush timer.
    """
    store = rt.store
    recorder = store.listener(run_id, segment=1, commit_at=frozenset({"run_end"}))
    meta = store.meta(run_id) if with_meta else {}
    return store.base(run_id), store.steps(run_id), recorder, meta


def _cancelled() -> AbortError:
    return AbortError("the run was cancelled through DBOS")


async def _aclose(it: object) -> None:
    aclose = getattr(it, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):  # the output is in: a failing cleanup is moot
            await aclose()


def _default_stream() -> Callable[..., Any]:
    from mule.pi.providers import stream_simple

    return stream_simple


def dbos_config(url: str, *, executor_id: str, app_version: str = DEFAULT_VERSION) -> DBOSConfig:
    """Return the DBOS configuration of a mule worker or launcher on `url`."""
    return {
        "name": "mule",
        "system_database_url": url,
        "executor_id": executor_id,
        "application_version": app_version,
        "notification_listener_polling_interval_sec": 0.1,
        "log_level": "WARNING",
    }


def launch_worker(
    url: str,
    *,
    executor_id: str | None = None,
    queue: str = DEFAULT_QUEUE,
    worker_concurrency: int = 4,
    global_concurrency: int | None = None,
    app_version: str = DEFAULT_VERSION,
    schema: str = "mule",
    heartbeat_s: float = 1.0,
    dead_after_s: float = 10.0,
    queue_poll_s: float = 0.2,
    cancel_poll_s: float = 0.2,
    listener: ListenerFactory | None = None,
) -> Worker:
    """Launch DBOS in this process and consume `queue` (register agents first).

    Workers on any number of machines share one PostgreSQL; `worker_concurrency` bounds the
    runs one worker executes at once, `global_concurrency` those of all workers together.
    `listener` is called at the start of each execution of a run (the first, and each
    recovery) and returns a listener that sees its events after the run store (a tracer:
    see docs/otel.md); it runs in workflow code, so it must be deterministic.
    """
    global _RUNTIME
    executor_id = executor_id or f"mule-{uuid.uuid4().hex[:12]}"
    _RUNTIME = Runtime(url, executor_id, schema, cancel_poll_s, listener)
    DBOS(config=dbos_config(url, executor_id=executor_id, app_version=app_version))
    DBOS.launch()
    DBOS.register_queue(
        queue,
        worker_concurrency=worker_concurrency,
        global_concurrency=global_concurrency,
        polling_interval_sec=queue_poll_s,
        on_conflict="always_update",
    )
    return Worker(_RUNTIME, heartbeat_s, dead_after_s)


# -- clients ----------------------------------------------------------------------------------


__all__ = [
    "DEFAULT_QUEUE",
    "DEFAULT_VERSION",
    "WORKFLOW_NAME",
    "AgentFactory",
    "dbos_config",
    "launch_worker",
    "register_agent",
]
