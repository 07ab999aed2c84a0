"""mule: Pi's agent loop in Python, honestly.

Every event carries a causal identity, every failure is a typed value, a crash never loses a
committed result nor repeats an unsafe tool, and a run ends in exactly one true outcome.

`await mule.run(input, listener, signal)` is the promise-style entry point; `mule.effects.run`
is the canonical core, returning `Result[MuleRunOutcome, MuleError]`; `mule.pi` is Pi's data
model, wire codec and model streams.
"""

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


def __getattr__(name: str) -> str:
    """`mule.__version__`: the installed distribution's version (PEP 440), read on first use.

    importlib.metadata costs about a third of `import mule` (email, zipfile, csv), and a run
    never needs it.
    """
    if name != "__version__":
        raise AttributeError(f"module 'mule' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("mule")
    except PackageNotFoundError:  # running from a source tree that was never installed
        value = "0+unknown"
    globals()["__version__"] = value
    return value


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

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish  # noqa: E402 (after every name is bound)

_publish(__name__, globals(), __all__)
