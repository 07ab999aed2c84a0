"""The promise facade: `await mule.run(input, listener, signal)` over the canonical core."""

from mule.effects import MuleToolExecutionPart, MuleToolRejection, MuleToolResult
from mule.pi import AbortController, AbortError, AbortSignal
from mule.promise._adapt import core_input, emit_port, ports
from mule.promise._encode import ToolResultError
from mule.promise._function_tool import ToolSignatureError, as_result, schema_for, tool
from mule.promise._run_raising import Mule, MuleRunFailed, mule, run
from mule.promise._stream_raising import MuleStream, stream
from mule.promise._sync import run_sync
from mule.promise._tool_context import ToolContext
from mule.promise._types import (
    MulePromiseListener,
    MuleRunInput,
    MuleTool,
    MuleToolPreparation,
    MuleToolPrepared,
    check_listener,
)

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Mule",
    "MulePromiseListener",
    "MuleRunFailed",
    "MuleRunInput",
    "MuleStream",
    "MuleTool",
    "MuleToolExecutionPart",
    "MuleToolPreparation",
    "MuleToolPrepared",
    "MuleToolRejection",
    "MuleToolResult",
    "ToolContext",
    "ToolResultError",
    "ToolSignatureError",
    "as_result",
    "check_listener",
    "core_input",
    "emit_port",
    "mule",
    "ports",
    "run",
    "run_sync",
    "schema_for",
    "stream",
    "tool",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish

_publish(__name__, globals(), __all__)
