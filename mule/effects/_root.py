"""The Effect root: `run(input, listener, signal) -> Result[MuleRunOutcome, MuleError]`."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, cast

import anyio
from attrs import evolve
from returns.result import Failure, Result, Success

from mule.effects._checks import RUN_IDENTITY, check_input
from mule.effects._errors import MuleError
from mule.effects._identity import MuleIdentity
from mule.effects._inputs import MulePortsInput
from mule.effects._interpret import Interpreter
from mule.effects._outcome import MuleRunOutcome, OutputT
from mule.effects._output import OutputBox, attach_output, with_output
from mule.effects._protocol import Finish
from mule.effects._settings import MuleStreamFunction
from mule.effects._transition import initial_state
from mule.pi import (
    ZERO_USAGE,
    AbortController,
    AbortSignal,
    AssistantMessage,
    TextContent,
    as_exception,
    child_controller,
    now_ms,
)

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from returns.future import FutureResult


def _default_stream() -> MuleStreamFunction:
    from mule.pi.providers import stream_simple

    return stream_simple


def _reason_text(reason: object) -> str:
    return str(as_exception(reason)) or "The operation was aborted"


def _cancelled_before_start(inp: MulePortsInput, reason: object) -> MuleRunOutcome:
    m = inp.model
    message = AssistantMessage(
        content=(TextContent(""),),
        api=m.api,
        provider=m.provider,
        model=m.id,
        usage=ZERO_USAGE,
        stop_reason="aborted",
        timestamp=now_ms(),
        error_message=_reason_text(reason),
    )
    terminal = MuleIdentity("terminal", "terminal:0", RUN_IDENTITY)
    return MuleRunOutcome(
        status="cancelled",
        run=RUN_IDENTITY,
        terminal=terminal,
        message=message,
        messages=(),
        all_messages=tuple(inp.messages),
    )


async def run(
    inp: MulePortsInput[OutputT], signal: AbortSignal | None = None
) -> Result[MuleRunOutcome[OutputT], MuleError]:
    """Run one complete Pi model/tool loop; the host takes part through `inp.ports`.

    Returns `Success(outcome)` when the run completed or was cancelled through `signal`
    (`outcome.status` says which), and `Failure(MuleError)` when it failed. Cancelling the
    calling task emits `run_end(cancelled)` and re-raises the backend's cancellation.
    With `inp.output_type`, the model answers through the `final_result` tool and
    `outcome.output` is the decoded value.
    """
    wired = with_output(inp)
    if isinstance(wired, Failure):
        return wired
    full, box = wired.unwrap()
    checked = check_input(full)
    if isinstance(checked, Failure):
        return checked
    cfg = checked.unwrap()
    if signal is not None and signal.aborted:
        return _attach(Success(_cancelled_before_start(full, signal.reason)), box)
    controller, detach = (
        child_controller(signal) if signal is not None else (AbortController(), _nothing)
    )
    stream_fn = full.stream or _default_stream()
    state = initial_state(cfg, full.messages)
    interp = Interpreter(cfg, full.ports, stream_fn, full.retry_after_ms, controller)
    run_signal = controller.signal
    abortable = signal is not None
    # A run needs a task group only for tools that run side by side, and for the watcher of a
    # timeout signal's clock; any other run is the caller's task alone (a tool that runs alone
    # runs in it too).
    grouped = (cfg.tools and not cfg.sequential) or run_signal.deadline is not None
    group: AbstractAsyncContextManager[TaskGroup | None] = (
        anyio.create_task_group() if grouped else nullcontext()
    )
    # The run is driven here, not in helper coroutines: every resume of the calling task
    # passes through each coroutine level between it and the interpreter (twice per delta).
    # A run given no signal has nothing outside it that can abort its controller, so it needs
    # no cancel scope and no abort listener.
    try:
        async with group as tg:
            interp.tg = tg
            if tg is not None and run_signal.deadline is not None:
                # The signal aborts when this wakes at its deadline; the run's end wakes it
                # too (the abort below), so it is never cancelled (a cancelled task costs more,
                # and on asyncio leaves a cycle of its cancellation's traceback for the
                # collector).
                tg.start_soon(run_signal.wait)
            try:
                finish: Finish | None = None
                if abortable:

                    def on_abort(_: AbortSignal) -> None:
                        if not interp.ended:  # once run_end is out, the run's verdict stands
                            scope.cancel()

                    with anyio.CancelScope() as scope:
                        run_signal.add_listener(on_abort)
                        try:
                            finish = await interp.drive(state)
                        finally:
                            run_signal.remove_listener(on_abort)
                else:
                    finish = await interp.drive(state)
                if finish is None:
                    finish = await interp.finish_cancelled(_reason_text(run_signal.reason))
                done = finish
            except anyio.get_cancelled_exc_class():
                controller.abort(anyio.get_cancelled_exc_class().__name__)
                with anyio.CancelScope(shield=True):
                    await interp.finish_cancelled("The run's task was cancelled")
                raise
            finally:
                # Work still in flight (tools after a failure, a timeout's watcher) sees the
                # run end.
                if not run_signal.aborted and (
                    interp.tools or interp.inline is not None or run_signal.deadline is not None
                ):
                    controller.abort("the run ended")
                await interp.release()
                # Only tool tasks still running need cancelling. Cancelling a scope costs about
                # 50 us of a short run on asyncio (anyio formats its reason with the task's repr
                # and retries the delivery on the next loop cycle), so a run with nothing left
                # to cancel skips it.
                if interp.executing and tg is not None:
                    tg.cancel_scope.cancel()
    finally:
        detach()
        interp.close()
    result = done.result
    if isinstance(result, Failure):
        if interp.state is not None:
            # A failure has no outcome to carry the run's spend: its error does.
            return Failure(evolve(result.failure(), usage=interp.state.usage))
        return result
    return _attach(result, box)


def _attach(
    result: Result[MuleRunOutcome, MuleError], box: OutputBox | None
) -> Result[MuleRunOutcome[OutputT], MuleError]:
    if box is None or isinstance(result, Failure):
        return cast("Result[MuleRunOutcome[OutputT], MuleError]", result)
    return Success(attach_output(result.unwrap(), box))


def run_future(
    inp: MulePortsInput[OutputT], signal: AbortSignal | None = None
) -> FutureResult[MuleRunOutcome[OutputT], MuleError]:
    """Return `run(...)` as a `FutureResult`, for `returns` pipelines."""
    from returns.future import FutureResult  # returns.future and returns.io: ~15 ms at import

    return FutureResult(run(inp, signal))


def _nothing() -> None:
    return None


__all__ = ["RUN_IDENTITY", "run", "run_future"]
