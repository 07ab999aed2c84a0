"""The Effect root: `run(input, listener, signal) -> Result[MuleRunOutcome, MuleError]`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from attrs import evolve
from returns.result import Failure, Result, Success

from mule.effects._checks import RUN_IDENTITY, check_input
from mule.effects._errors import MuleError
from mule.effects._identity import MuleIdentity
from mule.effects._inputs import MulePortsInput
from mule.effects._interpret import Interpreter
from mule.effects._outcome import MuleRunOutcome, OutputT
from mule.effects._output import attach_output, with_output
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
    result = await _run(full, signal)
    if isinstance(result, Failure):
        return result
    return Success(attach_output(result.unwrap(), box))


async def _run(
    inp: MulePortsInput, signal: AbortSignal | None
) -> Result[MuleRunOutcome, MuleError]:
    checked = check_input(inp)
    if isinstance(checked, Failure):
        return checked
    cfg = checked.unwrap()
    if signal is not None and signal.aborted:
        return Success(_cancelled_before_start(inp, signal.reason))
    controller, detach = (
        child_controller(signal) if signal is not None else (AbortController(), _nothing)
    )
    stream_fn = inp.stream or _default_stream()
    state = initial_state(cfg, inp.messages)
    interp: Interpreter | None = None
    try:
        async with anyio.create_task_group() as tg:
            interp = Interpreter(cfg, inp.ports, stream_fn, inp.retry_after_ms, controller, tg)

            def on_abort(_: AbortSignal) -> None:
                if not interp.ended:  # once run_end is out, the run's verdict stands
                    scope.cancel()

            async def watch() -> None:
                await controller.signal.wait()  # a timeout signal aborts when this wakes
                on_abort(controller.signal)

            try:
                finish: Finish | None = None
                with anyio.CancelScope() as scope:
                    if controller.signal.deadline is None:
                        # No clock to watch: cancel from the abort itself, without a task.
                        controller.signal.add_listener(on_abort)
                    else:
                        tg.start_soon(watch)
                    try:
                        finish = await interp.drive(state)
                    finally:
                        controller.signal.remove_listener(on_abort)
                if finish is None:
                    reason = _reason_text(controller.signal.reason)
                    finish = await interp.finish_cancelled(reason)
                done = finish
            except anyio.get_cancelled_exc_class():
                controller.abort(anyio.get_cancelled_exc_class().__name__)
                with anyio.CancelScope(shield=True):
                    await interp.finish_cancelled("The run's task was cancelled")
                raise
            finally:
                # Work still in flight (parallel tools after a failure) sees the run end.
                if not controller.signal.aborted and interp.tools:
                    controller.abort("the run ended")
                await interp.release()
                # Only tool tasks still running (and the watcher of a timeout signal) need
                # cancelling. Cancelling a scope costs about 50 us of a short run on asyncio
                # (anyio formats its reason with the task's repr and retries the delivery on
                # the next loop cycle), so a run with nothing left to cancel skips it.
                if interp.executing or controller.signal.deadline is not None:
                    tg.cancel_scope.cancel()
    finally:
        detach()
        if interp is not None:
            interp.close()
    result = done.result
    if isinstance(result, Failure) and interp is not None and interp.state is not None:
        # A failure has no outcome to carry the run's spend: its error does.
        return Failure(evolve(result.failure(), usage=interp.state.usage))
    return result


def run_future(
    inp: MulePortsInput[OutputT], signal: AbortSignal | None = None
) -> FutureResult[MuleRunOutcome[OutputT], MuleError]:
    """Return `run(...)` as a `FutureResult`, for `returns` pipelines."""
    from returns.future import FutureResult  # returns.future and returns.io: ~15 ms at import

    return FutureResult(run(inp, signal))


def _nothing() -> None:
    return None


__all__ = ["RUN_IDENTITY", "run", "run_future"]
