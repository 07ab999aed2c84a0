"""mule's canonical core: Pi's loop as a pure state machine plus an anyio interpreter."""

from typing import TYPE_CHECKING

from mule.effects._batch import INTERRUPTED_UNSAFE
from mule.effects._errors import MuleError, MulePhase, MuleRunFailed
from mule.effects._identity import MuleIdentity, MuleIdentityKind
from mule.effects._inputs import MulePortsInput
from mule.effects._lifecycle import (
    EVENT_TYPES,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelPrompt,
    MuleEvent,
    RunEnd,
    RunStart,
    RunStatus,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from mule.effects._limits import LimitName, RunLimits
from mule.effects._outcome import MuleCompletedTurn, MuleRunOutcome, OutputT
from mule.effects._output import OUTPUT_TOOL
from mule.effects._ports import (
    EmitPort,
    PollPort,
    Ports,
    PreparePort,
    ResolveKeyPort,
    StopPort,
)
from mule.effects._resume import MuleResume
from mule.effects._root import run, run_future
from mule.effects._run_stream import CONSUMER_LEFT, RunStream, StreamNotEnded, stream
from mule.effects._settings import MuleRunSettings, MuleStreamFunction
from mule.effects._tool_types import ToolSignatureError, schema_for
from mule.effects._tool_types import decode as decode_as
from mule.effects._tool_types import with_default as schema_with_default
from mule.effects._tools import (
    ExecutionMode,
    MuleCallPreparation,
    MuleToolCheckpoint,
    MuleToolDeclaration,
    MuleToolExecutionPart,
    MuleToolPrepared,
    MuleToolRejection,
    MuleToolResult,
    Replay,
    ToolCompleted,
    ToolExecution,
    ToolPending,
    ToolStarted,
)

if TYPE_CHECKING:
    from mule.effects._codec import (
        MULE_CODEC,
        event_from_record,
        event_from_wire,
        event_to_record,
        event_to_wire,
        from_json,
        from_wire,
        to_json,
        to_wire,
        update_to_wire,
    )

# The codec (cattrs, Pi's codec and the event encoders) loads on first use: a run does not
# encode; the journal, the server and DBOS do.
_CODEC_NAMES = (
    "MULE_CODEC",
    "event_from_record",
    "event_from_wire",
    "event_to_record",
    "event_to_wire",
    "from_json",
    "from_wire",
    "to_json",
    "to_wire",
    "update_to_wire",
)

__all__ = [
    "CONSUMER_LEFT",
    "EVENT_TYPES",
    "INTERRUPTED_UNSAFE",
    "MULE_CODEC",
    "OUTPUT_TOOL",
    "EmitPort",
    "ExecutionMode",
    "LimitName",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "ModelPrompt",
    "MuleCallPreparation",
    "MuleCompletedTurn",
    "MuleError",
    "MuleEvent",
    "MuleIdentity",
    "MuleIdentityKind",
    "MulePhase",
    "MulePortsInput",
    "MuleResume",
    "MuleRunFailed",
    "MuleRunOutcome",
    "MuleRunSettings",
    "MuleStreamFunction",
    "MuleToolCheckpoint",
    "MuleToolDeclaration",
    "MuleToolExecutionPart",
    "MuleToolPrepared",
    "MuleToolRejection",
    "MuleToolResult",
    "OutputT",
    "PollPort",
    "Ports",
    "PreparePort",
    "Replay",
    "ResolveKeyPort",
    "RunEnd",
    "RunLimits",
    "RunStart",
    "RunStatus",
    "RunStream",
    "StopPort",
    "StreamNotEnded",
    "ToolCompleted",
    "ToolExecution",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolPending",
    "ToolSignatureError",
    "ToolStarted",
    "TurnEnd",
    "TurnStart",
    "decode_as",
    "event_from_record",
    "event_from_wire",
    "event_to_record",
    "event_to_wire",
    "from_json",
    "from_wire",
    "run",
    "run_future",
    "schema_for",
    "schema_with_default",
    "stream",
    "to_json",
    "to_wire",
    "update_to_wire",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import lazy as _lazy  # noqa: E402
from mule._publish import listing as _listing  # noqa: E402
from mule._publish import publish as _publish  # noqa: E402

_lazy_getattr = _lazy(__name__, globals(), dict.fromkeys(_CODEC_NAMES, "mule.effects._codec"))
__dir__ = _listing(globals(), _CODEC_NAMES)


def __getattr__(name: str) -> object:
    """Import a codec on first read; `MulePreparedCall` is `MuleToolPrepared`'s old name."""
    if name == "MulePreparedCall":
        import warnings

        warnings.warn(
            "mule.effects.MulePreparedCall is deprecated: use mule.effects.MuleToolPrepared",
            DeprecationWarning,
            stacklevel=2,
        )
        return MuleToolPrepared
    return _lazy_getattr(name)


_publish(__name__, globals(), __all__)
