"""The interpreter: performs the pure machine's commands on anyio and feeds back the facts.

One task drives the machine and awaits the listener for each event (back-pressure, as in
Pi's Agent). Model streams are pulled inline in that task, and so is a tool that runs alone
(a sequential tool, a batch of one): its parts are pulled when the machine asks, as a model
stream's are. Only tools that run side by side get tasks of their own, which report parts
through an inbox. The run's abort signal reaches every callback; cancellation ends the run
with nothing but `run_end(cancelled)`.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, assert_never, cast

import anyio
import attrs
from anyio.abc import TaskGroup
from anyio.lowlevel import checkpoint, checkpoint_if_cancelled
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from returns.result import Failure, Result, Success

from mule.effects._errors import MuleError, MulePhase, error_from
from mule.effects._lifecycle import EVENT_TYPES, MessageUpdate, MuleEvent, RunEnd
from mule.effects._ports import Ports, emit_to
from mule.effects._protocol import (
    AskFollowUp,
    AskRetryAfter,
    AskSteering,
    AskStop,
    Began,
    CallModel,
    CancelRequested,
    CloseModel,
    CloseTool,
    Fact,
    Finish,
    KeyResolved,
    ListenerFailed,
    MessagesAnswered,
    PrepareTool,
    PullModel,
    PullTool,
    ResolveKey,
    RetryAfterAnswered,
    Sleep,
    Slept,
    StartTools,
    StopAnswered,
    StreamBatch,
    StreamExhausted,
    StreamIdled,
    StreamOpened,
    ToolExhausted,
    ToolPartArrived,
    ToolPrepared,
    WorkFailed,
    WorldCommand,
)
from mule.effects._settings import MuleStreamFunction
from mule.effects._state import RunConfig, RunState
from mule.effects._streaming import stream_updates
from mule.effects._tools import (
    MuleToolExecutionPart,
    MuleToolPrepared,
    MuleToolRejection,
    ToolExecution,
)
from mule.effects._transition import step
from mule.pi import (
    EVENT_CLASSES,
    AbortController,
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    AssistantMessageEventStream,
    StreamOptions,
    child_controller,
    now_ms,
)

_EVENTS = frozenset(EVENT_TYPES.values())
_PI_EVENTS = frozenset(EVENT_CLASSES)
_PULL = "pull"
_OPENED = StreamOpened()  # facts with no fields: made once
_SLEPT = Slept()
_TOOL_TASK = "mule tool executor"


def _failed(phase: MulePhase, what: str, exc: BaseException) -> WorkFailed:
    return WorkFailed(error_from(phase, what, exc))


class _ToolRun:
    """The interpreter's handle on one executing tool: a channel of pull orders.

    Both are made only when needed: most tools yield one result part and are closed before the
    machine asks, so the order channel (made before the first update part goes out) and the
    `done` event (made by a `CloseTool` that has to wait) are rarely built.
    """

    __slots__ = ("done", "finished", "orders")

    def __init__(self) -> None:
        self.orders: MemoryObjectSendStream[str] | None = None
        self.finished = False  # the executor is closed
        self.done: anyio.Event | None = None

    def finish(self) -> None:
        self.finished = True
        if self.done is not None:
            self.done.set()

    async def wait_finished(self) -> None:
        if not self.finished:
            if self.done is None:
                self.done = anyio.Event()
            await self.done.wait()


class Interpreter:
    """Runs one run's commands; holds the live resources the pure state only names."""

    __slots__ = (
        "attempt",
        "cfg",
        "deadline",
        "detach_attempt",
        "ended",
        "executing",
        "final",
        "idle_s",
        "inbox",
        "inbox_send",
        "inline",
        "last_event",
        "listener",
        "names",
        "options",
        "ports",
        "prepared",
        "retry_after_ms",
        "run",
        "signal",
        "state",
        "stream",
        "stream_fn",
        "tg",
        "tools",
    )

    def __init__(
        self,
        cfg: RunConfig,
        ports: Ports,
        stream_fn: MuleStreamFunction,
        retry_after_ms: Callable[[AssistantMessage], float | None] | None,
        run: AbortController,
        tg: TaskGroup | None = None,
    ) -> None:
        self.cfg = cfg
        self.ports = ports
        self.stream_fn = stream_fn
        self.retry_after_ms = retry_after_ms
        self.listener = ports.emit
        self.run = run
        self.signal: AbortSignal = run.signal
        self.tg = tg  # for tools that run side by side (None: a run that never has them)
        self.state: RunState | None = None
        self.stream: AssistantMessageEventStream | None = None
        self.attempt: AbortController | None = None
        self.detach_attempt: Any = None
        self.deadline: float | None = None
        self.last_event: object = None  # a timed pull's last event (its partial, on idling)
        # The last attempt's options as the machine gave them, and with the run's signal.
        self.options: tuple[StreamOptions, StreamOptions] | None = None
        self.prepared: dict[int, MuleToolPrepared[ToolExecution]] = {}
        self.names: dict[int, str] = {}
        self.tools: dict[int, _ToolRun] = {}
        # The tool running alone in this task, and its parts (None: no such tool is open).
        self.inline: tuple[int, AsyncIterator[Result[MuleToolExecutionPart, MuleError]]] | None = (
            None
        )
        self.executing = 0  # tool tasks started and not yet returned
        self.ended = False  # `run_end` was handed out: no cancellation may follow it
        self.final: Finish | None = None  # the machine's verdict that came with `run_end`
        send, recv = anyio.create_memory_object_stream[Fact](math.inf)
        self.inbox_send: MemoryObjectSendStream[Fact] = send
        self.inbox: MemoryObjectReceiveStream[Fact] = recv
        idle = cfg.idle_timeout_ms
        self.idle_s: float | None = None if idle is None else idle / 1000

    async def drive(self, state: RunState) -> Finish | None:
        """Run the machine from `state` until it finishes; None once the run signal aborted.

        The abort is checked after every await, so work that noticed the signal first (a model
        stream answering "aborted", say) never reaches the machine as if it were news. Only the
        last command of a step may produce an answer, so each step's commands are performed in
        order and that answer is the next fact. This is the per-event path: it avoids helper
        calls and allocations it can do without.
        """
        listener = self.listener
        signal = self.signal
        run = self.cfg.run
        timed = signal.deadline is not None  # a timeout signal aborts by the clock
        # A coroutine function's answer is always awaited: known once here, where any other
        # port's answer is asked per event whether it is a `Result` already.
        awaits = inspect.iscoroutinefunction(listener)
        # The signal's abort, as a local: read once per streamed delta, and a local is
        # cheaper than the signal's property (listeners run inside `abort()`, so it is as
        # current as `signal.fired`; a due timeout is still read from `signal.aborted`).
        fired = False
        # This task, asked after each lifecycle event whether the listener cancelled one of
        # its scopes: its public `has_pending_cancellation` is a fraction of a checkpoint's
        # cost (no backend lookup per call), and the checkpoint that raises is awaited only then.
        task = anyio.get_current_task()

        def on_abort(_: AbortSignal) -> None:
            nonlocal fired
            fired = True

        signal.add_listener(on_abort)
        try:
            fact: Fact | None = Began(now_ms())
            ticks = 0
            timed_pull = False
            while True:
                state, commands = step(state, fact)  # type: ignore[arg-type]
                self.state = state
                fact = None
                for cmd in commands:
                    kind = type(cmd)
                    if kind in _EVENTS:
                        if kind is RunEnd:
                            self.ended = True
                            last = commands[-1]
                            self.final = last if isinstance(last, Finish) else None
                        # Every 32nd event yields to the loop (a stream whose events are
                        # always ready must still let a deadline fire and other tasks run);
                        # every other lifecycle event heeds a cancellation at once.
                        if listener is None:
                            if not (ticks := ticks + 1) & 31:
                                await checkpoint()
                            continue
                        try:
                            res = listener(cmd, signal)  # type: ignore[arg-type]
                            if awaits or (type(res) is not Success and type(res) is not Failure):
                                res = await res  # type: ignore[misc]  # an async port answers later
                        except Exception as exc:  # a Result listener that raised anyway
                            res = Failure(error_from("listener", "the listener raised", exc))
                        # (after the listener, which may have cancelled this task's scope)
                        if not (ticks := ticks + 1) & 31:
                            await checkpoint()
                        elif kind is not MessageUpdate and task.has_pending_cancellation():
                            await checkpoint_if_cancelled()
                        if (fired or (timed and signal.aborted)) and not self.ended:
                            return None
                        if type(res) is not Success and isinstance(res, Failure):
                            fact = ListenerFailed(res.failure())
                            break
                    elif kind is PullModel:
                        if self.deadline is not None:  # a timed pull: below, the step let go
                            timed_pull = True
                            break
                        stream = self.stream
                        assert stream is not None
                        pull = stream.next_batch
                        # One pull per read of the stream, its events one fact. While `step`'s
                        # answer to a read would only be its deltas' message_updates and the
                        # next pull (`stream_updates`, the rule's own answer, made once per
                        # delta; the state does not change meanwhile), emit them and pull again
                        # here; any other read goes to `step`.
                        while fact is None:
                            try:
                                batch = await pull()
                            except Exception as exc:
                                fact = _failed("model", "the model stream raised", exc)
                                break
                            updates = stream_updates(run, state.phase, batch)
                            if updates is None:
                                fact = self._read(batch)
                                break
                            # (`last_event` is the idle timeout's, read only by timed pulls)
                            if (fired or (timed and signal.aborted)) and not self.ended:
                                return None
                            for update in updates:
                                if listener is None:
                                    if not (ticks := ticks + 1) & 31:
                                        await checkpoint()
                                    continue
                                try:
                                    res = listener(update, signal)
                                    if awaits or (
                                        type(res) is not Success and type(res) is not Failure
                                    ):
                                        res = await res  # type: ignore[misc]
                                except Exception as exc:  # a Result listener that raised anyway
                                    res = Failure(
                                        error_from("listener", "the listener raised", exc)
                                    )
                                if not (ticks := ticks + 1) & 31:
                                    await checkpoint()
                                if (fired or (timed and signal.aborted)) and not self.ended:
                                    return None
                                if type(res) is not Success and isinstance(res, Failure):
                                    fact = ListenerFailed(res.failure())
                                    break
                            # This read's objects die here, not after the next read: held
                            # across its await, 10,000 runs' deltas would each reach the
                            # collector's oldest generation.
                            batch = updates = update = res = None  # type: ignore[assignment]
                    elif kind is Finish:
                        return cmd  # type: ignore[return-value]
                    else:
                        fact = await self._perform(cmd)  # type: ignore[arg-type]  # the rest
                if fact is None:
                    if timed_pull:
                        timed_pull = False
                        commands = cmd = None  # type: ignore[assignment]  # (its updates)
                        fact = await self._pull_model()
                    else:
                        fact = await self.inbox.receive()
                if (fired or (timed and signal.aborted)) and not self.ended:
                    return None
        finally:
            signal.remove_listener(on_abort)

    def close(self) -> None:
        """Release the inbox and the order channels of tools still running."""
        for tool_run in self.tools.values():
            if tool_run.orders is not None:
                tool_run.orders.close()
        self.inbox_send.close()
        self.inbox.close()

    async def finish_cancelled(self, reason: str) -> Finish:
        """Feed the cancellation to the machine and emit its `run_end` (nothing else)."""
        assert self.state is not None
        if self.ended:  # aborted while `run_end` was out: the run already has its verdict
            assert self.final is not None  # `run_end` always comes with its Finish
            return self.final
        self.state, commands = step(self.state, CancelRequested(reason, now_ms()))
        for cmd in commands:
            if type(cmd) in _EVENTS:
                if self.listener is not None:
                    try:
                        res = await emit_to(self.listener, cast(MuleEvent, cmd), self.signal)
                    except Exception as exc:
                        res = Failure(error_from("listener", "the listener raised", exc))
                    if isinstance(res, Failure):
                        return Finish(Failure(res.failure()))
            elif isinstance(cmd, Finish):
                return cmd
        raise AssertionError("a cancelled run did not finish")

    # -- the model --------------------------------------------------------------------------

    async def _open_model(self, cmd: CallModel) -> Fact:
        if self.detach_attempt is not None:
            self.detach_attempt()
            self.detach_attempt = None
        if self.idle_s is None:
            # Nothing aborts an attempt but the run: the stream gets the run's signal. The
            # machine hands the run's own options for every attempt (unless a key hook gave a
            # key): given the signal once, they serve each attempt.
            mine = self.options
            if mine is None or mine[0] is not cmd.options:
                mine = self.options = (cmd.options, attrs.evolve(cmd.options, signal=self.signal))
            options = mine[1]
        else:  # an idle timeout aborts this attempt alone
            self.attempt, self.detach_attempt = child_controller(self.signal)
            options = attrs.evolve(cmd.options, signal=self.attempt.signal)
        self.last_event = None
        if self.idle_s is not None:
            self.deadline = anyio.current_time() + self.idle_s
        try:
            made = self.stream_fn(self.cfg.model, cmd.context, options)
            if inspect.isawaitable(made):
                if self.deadline is None:
                    made = await made
                else:
                    with anyio.move_on_after(self.deadline - anyio.current_time()):
                        made = await made
                    if inspect.isawaitable(made):  # timed out waiting for the stream
                        return self._idled()
        except Exception as exc:
            return _failed("model", "the stream function failed", exc)
        if not hasattr(made, "__anext__"):
            return WorkFailed(
                MuleError("model", f"the stream function returned {type(made).__name__}", made)
            )
        given: object = made  # a hand-written stream function may return any async iterator
        if type(given) is not AssistantMessageEventStream:  # read it through one: a batch each
            made = AssistantMessageEventStream.from_source(made)
        self.stream = made
        return _OPENED

    def _idled(self) -> Fact:
        if self.attempt is not None:
            self.attempt.abort(TimeoutError("model stream idle timeout"))
        last = self.last_event
        partial = getattr(last, "partial", None) if last is not None else None
        return StreamIdled(partial if type(partial) is AssistantMessage else None, now_ms())

    async def _pull_model(self) -> Fact:
        stream = self.stream
        assert stream is not None
        try:
            if self.deadline is None:
                batch = await stream.next_batch()
            else:
                with anyio.move_on_after(self.deadline - anyio.current_time()) as scope:
                    batch = await stream.next_batch()
                if scope.cancelled_caught:
                    return self._idled()
                self.deadline = anyio.current_time() + cast(float, self.idle_s)
        except Exception as exc:
            return _failed("model", "the model stream raised", exc)
        return self._read(batch)

    def _read(self, batch: tuple[AssistantMessageEvent, ...]) -> Fact:
        """Return the fact of one read of the model stream: its one Pi event, or the batch.

        (A read of deltas only needs no fact: `drive` emits what `step` would answer.)
        """
        if not batch:
            return StreamExhausted()
        last = self.last_event = batch[-1]
        if len(batch) == 1 and type(last) in _PI_EVENTS:
            return last
        return StreamBatch(batch)  # (an untyped stream's stray object: the machine's to judge)

    async def release(self) -> None:
        """Close whatever the run still holds open (a model stream or a tool cut off)."""
        if self.stream is not None or self.inline is not None:
            with anyio.CancelScope(shield=True):
                if self.stream is not None:
                    await self._close_model()
                await self._close_inline()

    async def _close_model(self) -> None:
        stream, self.stream = self.stream, None
        self.deadline = None
        if self.detach_attempt is not None:
            self.detach_attempt()
            self.detach_attempt = None
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            try:  # (no `contextlib.suppress`: once per model attempt)
                await aclose()
            except Exception:  # releasing a stream must not fail the run
                return

    # -- everything else --------------------------------------------------------------------

    async def _perform(self, cmd: WorldCommand) -> Fact | None:
        ports = self.ports
        signal = self.signal
        match cmd:
            case CallModel():
                return await self._open_model(cmd)
            case CloseModel():
                await self._close_model()
                return None
            case PrepareTool():
                return await self._prepare(cmd)
            case StartTools():
                indices = cmd.indices
                if len(indices) == 1 and not self.executing:
                    # Alone: no task, no inbox; the machine pulls its parts as a stream's.
                    return await self._start_inline(indices[0])
                for i in indices:
                    self._start_tool(i)
                return None
            case PullTool():
                if self.inline is not None and self.inline[0] == cmd.index:
                    return await self._pull_inline()
                orders = self.tools[cmd.index].orders
                assert orders is not None  # made before the update part that asked for this
                await orders.send(_PULL)
                return None
            case CloseTool():
                # The executor closes itself after its result part (the first result is final);
                # the tool is over only once it has (sequential tools never overlap).
                run = self.tools.pop(cmd.index, None)
                if run is None:  # it ran inline, and closed with its result
                    await self._close_inline()
                    return None
                if run.orders is not None:
                    run.orders.close()
                await run.wait_finished()
                return None
            case ResolveKey():
                assert ports.resolve_key is not None
                key = await _call(
                    "model", "resolve_api_key", ports.resolve_key, cmd.provider, signal
                )
                return key if isinstance(key, WorkFailed) else KeyResolved(cast(str | None, key))
            case AskSteering() | AskFollowUp():
                steering = isinstance(cmd, AskSteering)
                hook = ports.steering if steering else ports.follow_up
                assert hook is not None
                name = "get_steering_messages" if steering else "get_follow_up_messages"
                got = await _call("control", name, hook, signal)
                return got if isinstance(got, WorkFailed) else MessagesAnswered(tuple(got))
            case AskStop():
                assert ports.should_stop is not None
                got = await _call(
                    "control", "should_stop_after_turn", ports.should_stop, cmd.turn, signal
                )
                return got if isinstance(got, WorkFailed) else StopAnswered(bool(got))
            case AskRetryAfter():
                assert self.retry_after_ms is not None
                ms: object
                try:
                    ms = self.retry_after_ms(cmd.message)
                except Exception as exc:
                    return _failed("control", "retry_after_ms raised", exc)
                if ms is not None and (type(ms) is bool or not isinstance(ms, int | float)):
                    return WorkFailed(MuleError("control", f"retry_after_ms returned {ms!r}", ms))
                return RetryAfterAnswered(None if ms is None else float(ms))
            case Sleep():
                await anyio.sleep(cmd.ms / 1000)
                return _SLEPT
            case _:
                assert_never(cmd)

    async def _prepare(self, cmd: PrepareTool) -> Fact:
        prepare = self.ports.prepare_tool
        assert prepare is not None  # checked with the input: tools come with their door
        what = f"prepare of tool {cmd.call.name}"
        got = await _call("tool", what, prepare, cmd.call, self.signal)
        if isinstance(got, WorkFailed):
            return got
        if type(got) is MuleToolPrepared:
            self.prepared[cmd.index] = got
            self.names[cmd.index] = cmd.call.name
        elif type(got) is not MuleToolRejection:  # untyped ports can answer anything
            return WorkFailed(MuleError("tool", f"{what} returned {type(got).__name__}", got))
        return ToolPrepared(cmd.index, got, now_ms())

    async def _start_inline(self, index: int) -> Fact:
        prepared = self.prepared.pop(index)
        try:
            parts = prepared.execute(self.signal)
        except Exception as exc:
            return _failed("tool", self._raised(index), exc)
        self.inline = (index, parts)
        return await self._pull_inline()

    async def _pull_inline(self) -> Fact:
        """Pull the next part of the tool running alone; close it once it has answered."""
        assert self.inline is not None
        index, parts = self.inline
        try:
            got = await parts.__anext__()
        except StopAsyncIteration:
            fact: Fact = ToolExhausted(index)
        except Exception as exc:
            fact = _failed("tool", self._raised(index), exc)
        else:
            fact = _part_fact(index, got)
        if type(fact) is not ToolPartArrived or fact.part.type == "result":
            # The first result is final (an update asks for more): close the executor now,
            # before the machine hears of it, as a tool's own task does.
            await self._close_inline()
        return fact

    async def _close_inline(self) -> None:
        inline, self.inline = self.inline, None
        if inline is None:
            return
        aclose = getattr(inline[1], "aclose", None)
        if aclose is not None:
            # The result is already in: a failing cleanup is moot.
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await aclose()

    def _start_tool(self, index: int) -> None:
        assert self.tg is not None  # a run with tools side by side has its task group
        prepared = self.prepared.pop(index)
        tool_run = self.tools[index] = _ToolRun()
        self.tg.start_soon(self._execute, index, prepared, tool_run, name=_TOOL_TASK)
        self.executing += 1

    async def _execute(
        self, index: int, prepared: MuleToolPrepared[ToolExecution], tool_run: _ToolRun
    ) -> None:
        inbox = self.inbox_send
        try:
            parts: AsyncIterator[Result[MuleToolExecutionPart, MuleError]] = prepared.execute(
                self.signal
            )
        except Exception as exc:
            tool_run.finish()
            try:
                await inbox.send(_failed("tool", self._raised(index), exc))
            finally:
                self.executing -= 1
            return
        orders: MemoryObjectReceiveStream[str] | None = None
        try:
            while True:
                try:
                    got = await parts.__anext__()
                except StopAsyncIteration:
                    await inbox.send(ToolExhausted(index))
                    return
                except Exception as exc:
                    await inbox.send(_failed("tool", self._raised(index), exc))
                    return
                fact = _part_fact(index, got)
                if type(fact) is not ToolPartArrived:
                    await inbox.send(fact)
                    return
                if fact.part.type == "result":
                    # Final: stop pulling and close the executor now. The inbox is unbounded
                    # and open while the run's tasks live, so this never blocks or fails; not
                    # yielding first lets the executor close before the machine's CloseTool.
                    inbox.send_nowait(fact)
                    return
                if orders is None:  # the first update: the machine will ask for more
                    tool_run.orders, orders = anyio.create_memory_object_stream[str](1)
                await inbox.send(fact)
                try:
                    await orders.receive()  # the machine asks for the next part
                except anyio.EndOfStream:  # the run is over
                    return
        finally:
            if orders is not None:
                orders.close()
            aclose = getattr(parts, "aclose", None)
            if aclose is not None:
                # The result is already in: a failing cleanup is moot.
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await aclose()
            tool_run.finish()
            self.executing -= 1

    def _raised(self, index: int) -> str:
        return f"execute of tool {self.names.get(index, '?')} raised"


def _part_fact(index: int, got: object) -> Fact:
    """Return the fact of what a tool's executor yielded: its part, or the failure it reported."""
    if isinstance(got, Failure):
        return WorkFailed(got.failure())
    part = got.unwrap() if isinstance(got, Success) else got
    if type(part) is not MuleToolExecutionPart:
        return WorkFailed(MuleError("tool", f"a tool yielded {type(part).__name__}", part))
    return ToolPartArrived(index, part, now_ms())


async def _call(
    phase: MulePhase,
    what: str,
    fn: Callable[..., Awaitable[Result[Any, MuleError]]],
    *args: Any,
) -> Any:
    """Call a Result-returning callback; return its value, or a `WorkFailed` fact."""
    try:
        res = await fn(*args)
    except Exception as exc:
        return _failed(phase, f"{what} raised", exc)
    if isinstance(res, Failure):
        return WorkFailed(res.failure())
    if isinstance(res, Success):
        return res.unwrap()
    return WorkFailed(MuleError(phase, f"{what} returned {type(res).__name__}, not a Result", res))


__all__ = ["Interpreter", "now_ms"]
