"""mule: Pi's agent loop in Python, honestly.

Every event carries a causal identity, every failure is a typed value, a crash never loses a
committed result nor repeats an unsafe tool, and a run ends in exactly one true outcome.

`await mule.run(input, listener, signal)` is the promise-style entry point; `mule.effects.run`
is the canonical core, returning `Result[MuleRunOutcome, MuleError]`; `mule.pi` is Pi's data
model, wire codec and model streams.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from mule.effects import (
    MuleCompletedTurn,
    MuleResume,
    MuleRunOutcome,
    MuleRunSettings,
    MuleStreamFunction,
    RunLimits,
    StreamNotEnded,
)
from mule.effects._errors import MuleError, MulePhase
from mule.effects._events import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelPrompt,
    MuleEvent,
    RunEnd,
    RunStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from mule.effects._identity import MuleIdentity, MuleIdentityKind
from mule.effects._tools import (
    MuleToolCheckpoint,
    MuleToolExecutionPart,
    MuleToolRejection,
    MuleToolResult,
    ToolCompleted,
    ToolPending,
    ToolStarted,
)
from mule.pi import AbortController, AbortError, AbortSignal, MissingExtraError
from mule.pi._retry import PI_CODING_AGENT_RETRY_DEFAULTS, RetryPolicy
from mule.promise._function_tool import tool
from mule.promise._run import Mule, MuleRunFailed, mule, run
from mule.promise._stream import MuleStream, stream
from mule.promise._sync import run_sync
from mule.promise._tool_context import ToolContext
from mule.promise._types import (
    MulePromiseListener,
    MuleRunInput,
    MuleTool,
    MuleToolPreparation,
    MuleToolPrepared,
)

try:
    __version__: str = _version("mule")
    """The installed distribution's version (PEP 440), from its package metadata."""
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "PI_CODING_AGENT_RETRY_DEFAULTS",
    "AbortController",
    "AbortError",
    "AbortSignal",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "MissingExtraError",
    "ModelPrompt",
    "Mule",
    "MuleCompletedTurn",
    "MuleError",
    "MuleEvent",
    "MuleIdentity",
    "MuleIdentityKind",
    "MulePhase",
    "MulePromiseListener",
    "MuleResume",
    "MuleRunFailed",
    "MuleRunInput",
    "MuleRunOutcome",
    "MuleRunSettings",
    "MuleStream",
    "MuleStreamFunction",
    "MuleTool",
    "MuleToolCheckpoint",
    "MuleToolExecutionPart",
    "MuleToolPreparation",
    "MuleToolPrepared",
    "MuleToolRejection",
    "MuleToolResult",
    "RetryPolicy",
    "RunEnd",
    "RunLimits",
    "RunStart",
    "StreamNotEnded",
    "ToolCompleted",
    "ToolContext",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolPending",
    "ToolStarted",
    "TurnEnd",
    "TurnStart",
    "mule",
    "run",
    "run_sync",
    "stream",
    "tool",
]
