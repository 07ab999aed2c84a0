"""`ToolContext`: what a `@tool` function may know and do while it runs.

Declared as the function's first parameter (`def f(ctx: mule.ToolContext, ...)`), it gives
the tool call, the run's abort signal and `await ctx.progress(...)`, which streams a
`tool_execution_update` and returns once the run has emitted it: dependency injection and
progress without globals.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, final

from mule.pi import AbortSignal, ToolCall


@final
class ToolContext:
    """The running call of a `@tool` function.

    Attributes:
        call: The model's tool call (its id, name and raw arguments).
        signal: The run's abort signal for this execution.

    """

    __slots__ = ("_progress", "call", "signal")

    def __init__(
        self,
        call: ToolCall,
        signal: AbortSignal,
        progress: Callable[[object], Coroutine[Any, Any, None]],
    ) -> None:
        self.call = call
        self.signal = signal
        self._progress = progress

    async def progress(self, update: object) -> None:
        """Stream a partial result (`tool_execution_update`); return once it was emitted.

        `update` is what a tool may return (`mule.promise.as_result`): a string, text/image
        blocks, a `MuleToolResult`, or a value encoded as JSON (dataclasses, attrs classes,
        pydantic models, enums, datetimes...).
        """
        await self._progress(update)

    def progress_from_thread(self, update: object) -> None:
        """`progress` for a sync tool function (it runs in a worker thread)."""
        from anyio.from_thread import run  # concurrent.futures, logging: not with `import mule`

        run(self._progress, update)


__all__ = ["ToolContext"]
