"""mule: Pi's agent loop in Python, honestly.

Every event carries a causal identity, every failure is a typed value, a crash never loses a
committed result nor repeats an unsafe tool, and a run ends in exactly one true outcome.

`await mule.run(input, listener, signal)` is the promise-style entry point; `mule.effects.run`
is the canonical core, returning `Result[MuleRunOutcome, MuleError]`; `mule.pi` is Pi's data
model, wire codec and model streams.
"""

from mule._code_cache import cached_attrs_code as _cached_attrs_code

# attrs compiles the methods of each of mule's classes: reuse last time's bytecode (like .pyc).
with _cached_attrs_code():
    from mule.effects import (
        MessageEnd,
        MessageStart,
        MessageUpdate,
        ModelPrompt,
        MuleCompletedTurn,
        MuleError,
        MuleEvent,
        MuleIdentity,
        MuleIdentityKind,
        MulePhase,
        MuleResume,
        MuleRunOutcome,
        MuleRunSettings,
        MuleStreamFunction,
        MuleToolCheckpoint,
        MuleToolExecutionPart,
        MuleToolRejection,
        MuleToolResult,
        RunEnd,
        RunLimits,
        RunStart,
        StreamNotEnded,
        ToolCompleted,
        ToolExecutionEnd,
        ToolExecutionStart,
        ToolExecutionUpdate,
        ToolPending,
        ToolStarted,
        TurnEnd,
        TurnStart,
    )
    from mule.pi import (
        PI_CODING_AGENT_RETRY_DEFAULTS,
        AbortController,
        AbortError,
        AbortSignal,
        MissingExtraError,
        RetryPolicy,
    )
    from mule.promise import (
        Mule,
        MulePromiseListener,
        MuleRunFailed,
        MuleRunInput,
        MuleStream,
        MuleTool,
        MuleToolPreparation,
        MuleToolPrepared,
        ToolContext,
        ToolResultError,
        mule,
        run,
        run_sync,
        stream,
        tool,
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
    "ToolResultError",
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
