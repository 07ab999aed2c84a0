"""A mule run as a DBOS workflow: model attempts and tool executions are DBOS steps.

The workflow runs mule's own interpreter. The stream function and each tool's executor are
wrapped so that every model attempt and every tool execution is one DBOS step, at a step id
reserved where the interpreter asks for it (the driver task, in the machine's deterministic
order), so a replay after a crash asks for the same steps in the same order:

- a model attempt step runs the real stream, hands each event to the interpreter as it
  arrives (so listeners see the stream live) and returns the final assistant message; on
  replay DBOS returns that message and the attempt re-streams only `start` and the terminal
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
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, final

import anyio
from anyio.abc import TaskGroup
from attrs import evolve
from dbos import DBOS, DBOSConfig, StepReservation
from returns.result import Failure

import mule.promise as promise
from mule.dbos._observe import DurableRun, ListenerFactory, both
from mule.dbos._worker import Runtime, Worker
from mule.effects import (
    INTERRUPTED_UNSAFE,
    MuleEvent,
    MuleToolExecutionPart,
    MuleToolResult,
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
    Context,
    DoneEvent,
    ErrorEvent,
    Message,
    Model,
    StartEvent,
    StreamOptions,
    TextContent,
    ToolCall,
)
from mule.promise import core_input

WORKFLOW_NAME = "mule.run"
DEFAULT_QUEUE = "mule-runs"
DEFAULT_VERSION = "mule-dbos-1"
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
    """One workflow execution's wrappers: model attempts and tool executions as DBOS steps."""

    def __init__(self, rt: Runtime, run_id: str, tg: TaskGroup) -> None:
        self.rt = rt
        self.run_id = run_id
        self.tg = tg
        self.replaying = False  # the current model attempt is replayed from its recorded output

    def skip(self, event: MuleEvent) -> bool:
        """Drop the updates of a replayed attempt: the log has the original stream."""
        return self.replaying and event.type == "message_update"

    async def _pump(
        self,
        reservation: StepReservation,
        name: str,
        body: Callable[[Callable[[Any], Any]], Any],
    ) -> AsyncIterator[tuple[str, Any]]:
        """Run `body` as the reserved step in the run's task group; yield its live items.

        Yields ("item", x) for each item the body hands on, then ("live"|"replayed", output).
        The step's raise is re-raised here.
        """
        send, recv = anyio.create_memory_object_stream[Any](0)
        live = False
        done: list[Any] = []

        async def hand_on(item: Any) -> None:
            await send.send(item)

        async def step_body() -> Any:
            nonlocal live
            live = True
            return await body(hand_on)

        scope = anyio.CancelScope()

        async def runner() -> None:
            with scope:
                try:
                    done.append((True, await reservation.run_async({"name": name}, step_body)))
                except Exception as exc:
                    done.append((False, exc))
                finally:
                    send.close()

        self.tg.start_soon(runner)
        try:
            async with recv:
                async for item in recv:
                    yield "item", item
            if not done:
                raise RuntimeError(f"the {name} step ended without an outcome")
            ok, value = done[0]
            if not ok:
                raise value
            yield ("live" if live else "replayed"), value
        finally:
            scope.cancel()  # the consumer went away (abort, idle timeout): stop the step

    # -- the model ----------------------------------------------------------------------------

    def stream_fn(
        self, real: Callable[..., Any]
    ) -> Callable[[Model, Context, StreamOptions], AssistantMessageEventStream]:
        """Wrap a stream function: each call is one model-attempt step."""

        def call(model: Model, context: Context, options: StreamOptions) -> Any:
            reservation = DBOS.reserve_step()  # in the driver task: deterministic order
            source = self._attempt(reservation, real, model, context, options)
            return AssistantMessageEventStream.from_source(source)

        return call

    async def _attempt(
        self,
        reservation: StepReservation,
        real: Callable[..., Any],
        model: Model,
        context: Context,
        options: StreamOptions,
    ) -> AsyncIterator[AssistantMessageEvent]:
        async def body(hand_on: Callable[[Any], Any]) -> Any:
            made = real(model, context, options)
            if inspect.isawaitable(made):
                made = await made
            try:
                async for event in made:
                    if type(event) is DoneEvent or type(event) is ErrorEvent:
                        # Handed on only once the step is recorded: the interpreter may close
                        # the stream right after it, and the message must be durable by then.
                        terminal.append(event)
                        final = event.message if type(event) is DoneEvent else event.error
                        return to_wire(final)
                    await hand_on(event)
            finally:
                await _aclose(made)
            raise RuntimeError("the model stream ended without a done or error event")

        terminal: list[AssistantMessageEvent] = []
        self.replaying = False
        async for kind, value in self._pump(reservation, MODEL_STEP, body):
            if kind == "item":
                yield value
            elif kind == "live":
                yield terminal[0]
            else:
                message = from_wire(AssistantMessage, value)
                self.replaying = True
                yield StartEvent(partial=evolve(message, content=()))
                if message.stop_reason in ("error", "aborted"):
                    yield ErrorEvent(reason=message.stop_reason, error=message)
                else:
                    yield DoneEvent(reason=message.stop_reason, message=message)

    # -- tools ----------------------------------------------------------------------------------

    def tool(self, tool: promise.MuleTool) -> promise.MuleTool:
        """Wrap a tool: its preparation runs in the workflow, its execution is one step."""
        durable = self

        async def prepare(call: ToolCall, signal: AbortSignal) -> promise.MuleToolPreparation:
            prep = await tool.prepare(call, signal)
            if type(prep) is not promise.MuleToolPrepared:
                return prep
            reservation = DBOS.reserve_step()  # in the driver task: deterministic order
            inner = prep

            def execute(s: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
                return durable._execute(reservation, tool, inner, s)

            return promise.MuleToolPrepared(execute)

        return evolve(tool, prepare=prepare)

    async def _execute(
        self,
        reservation: StepReservation,
        tool: promise.MuleTool,
        prep: promise.MuleToolPrepared,
        signal: AbortSignal,
    ) -> AsyncIterator[MuleToolExecutionPart]:
        rt = self.rt
        step = f"step:{reservation.step_id}"

        async def body(hand_on: Callable[[Any], Any]) -> Any:
            if tool.replay == "unsafe":
                claimed = await anyio.to_thread.run_sync(
                    rt.store.claim, self.run_id, step, rt.executor_id
                )
                if not claimed:  # claimed by an execution that never recorded its output
                    return {"interrupted": True}
            parts = prep.execute(signal)
            try:
                async for part in parts:
                    if part.type == "update":
                        await hand_on(part)
                    else:
                        return {"result": to_wire(part.result)}
            finally:
                await _aclose(parts)
            raise RuntimeError(f"tool {tool.descriptor.name} ended without a result")

        async for kind, value in self._pump(reservation, TOOL_STEP, body):
            if kind == "item":
                yield value
            elif "interrupted" in value:
                text = (TextContent(INTERRUPTED_UNSAFE),)
                result = MuleToolResult(content=text, details={}, is_error=True)
                yield MuleToolExecutionPart("result", result)
            else:
                yield MuleToolExecutionPart("result", from_wire(MuleToolResult, value["result"]))

    def keep_meta(self, key: str, value: str) -> None:
        """Write a metadata entry of the run in a worker thread (see `DurableRun.set_meta`)."""
        self.tg.start_soon(self._write_meta, key, value)

    async def _write_meta(self, key: str, value: str) -> None:
        # Shielded: the workflow's task group is cancelled when the run ends, not this write.
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(self.rt.store.set_meta, self.run_id, key, value)
            except Exception as exc:  # the run goes on; only its metadata is missing
                DBOS.logger.warning(f"mule: could not keep {key!r} of run {self.run_id}: {exc}")

    async def watch_cancel(self, controller: AbortController) -> None:
        """Abort the run once DBOS marks the workflow cancelled (from any process).

        The worker's one poller asks DBOS through a client (a DBOS call made in workflow code
        would be recorded as a step); this task only looks at its answer.
        """
        rt = self.rt
        rt.watch(self.run_id)
        try:
            while True:
                await anyio.sleep(rt.cancel_poll_s)
                if rt.cancelled(self.run_id):
                    controller.abort(AbortError("the run was cancelled through DBOS"))
                    return
        finally:
            rt.unwatch(self.run_id)


@DBOS.workflow(name=WORKFLOW_NAME)
async def _mule_workflow(agent: str, run_id: str) -> dict[str, Any]:
    """Run one mule run; on recovery DBOS runs this again and completed steps replay."""
    rt = _runtime()
    factory = _AGENTS.get(agent)
    if factory is None:
        raise LookupError(f"mule.dbos: agent {agent!r} is not registered on this worker")
    base = await anyio.to_thread.run_sync(rt.store.base, run_id)
    inp = factory(base)
    controller = AbortController()
    async with anyio.create_task_group() as tg:
        durable = _Durable(rt, run_id, tg)
        real = inp.stream or _default_stream()
        wrapped = evolve(
            inp,
            stream=durable.stream_fn(real),
            tools=[durable.tool(t) for t in inp.tools],
        )
        # The log is for followers: DBOS's step records are what a replay relies on, and a
        # replay re-emits every checkpoint event, so commits ride on the flush timer.
        recorder = rt.store.listener(
            run_id, segment=1, skip=durable.skip, commit_at=frozenset({"run_end"})
        )
        listener: promise.MulePromiseListener = recorder
        if rt.listener is not None:
            meta = await anyio.to_thread.run_sync(rt.store.meta, run_id)
            extra = rt.listener(DurableRun(run_id, agent, meta, durable.keep_meta))
            if extra is not None:
                listener = both(listener, extra)
        tg.start_soon(durable.watch_cancel, controller)
        tg.start_soon(_flush_every, recorder, rt.store.flush_ms / 1000)
        result = await run_core(core_input(wrapped, listener), controller.signal)
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


async def _flush_every(listener: Any, seconds: float) -> None:
    """Write buffered events while the run waits on something slow (a tool, a model)."""
    while True:
        await anyio.sleep(seconds)
        if listener.buffer:
            listener.flush()  # on the loop's thread, between two events: never mid-write


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
