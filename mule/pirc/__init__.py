"""The pi RPC bridge: drive `pi --mode rpc` from anyio, as mule events with causal identities."""

from mule.pirc._bridge import Bridge, BridgeStats, EventCallback
from mule.pirc._buffer import BufferStats, EventBuffer
from mule.pirc._commands import (
    BridgeError,
    CommandFailed,
    CommandTimeout,
    ConfigError,
    JobTimeout,
    ProcessExited,
    QueueMode,
    StreamingBehavior,
    WriteTimeout,
)
from mule.pirc._config import (
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_MAX_LINE_DEPTH,
    BridgeConfig,
    ThinkingOption,
    default_pi_executable,
    project_pi,
)
from mule.pirc._framing import FrameStats, LineError, LineFramer, decode_line, parse_record
from mule.pirc._growth import DeltaKind, LineDecoder, StreamedDelta, delta_record
from mule.pirc._job_handle import Job
from mule.pirc._mapper import EventMapper
from mule.pirc._pi_events import (
    AgentEnd,
    AgentSettled,
    AutoRetryEnd,
    AutoRetryStart,
    BashExecutionUpdate,
    BridgeEvent,
    CompactionEnd,
    CompactionStart,
    EntryAppended,
    ExtensionError,
    ExtensionUIRequest,
    JobResult,
    OtherPiEvent,
    PassThroughEvent,
    PiMessage,
    QueueUpdate,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
)
from mule.pirc._session_data import (
    ClearedQueue,
    Disposition,
    SessionEntries,
    SessionTree,
    TreeNode,
)
from mule.pirc._subscription import Subscription

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_LINE_DEPTH",
    "AgentEnd",
    "AgentSettled",
    "AutoRetryEnd",
    "AutoRetryStart",
    "BashExecutionUpdate",
    "Bridge",
    "BridgeConfig",
    "BridgeError",
    "BridgeEvent",
    "BridgeStats",
    "BufferStats",
    "ClearedQueue",
    "CommandFailed",
    "CommandTimeout",
    "CompactionEnd",
    "CompactionStart",
    "ConfigError",
    "DeltaKind",
    "Disposition",
    "EntryAppended",
    "EventBuffer",
    "EventCallback",
    "EventMapper",
    "ExtensionError",
    "ExtensionUIRequest",
    "FrameStats",
    "Job",
    "JobResult",
    "JobTimeout",
    "LineDecoder",
    "LineError",
    "LineFramer",
    "OtherPiEvent",
    "PassThroughEvent",
    "PiMessage",
    "ProcessExited",
    "QueueMode",
    "QueueUpdate",
    "SessionEntries",
    "SessionTree",
    "StreamedDelta",
    "StreamingBehavior",
    "Subscription",
    "SummarizationRetryAttemptStart",
    "SummarizationRetryFinished",
    "SummarizationRetryScheduled",
    "ThinkingOption",
    "TreeNode",
    "WriteTimeout",
    "decode_line",
    "default_pi_executable",
    "delta_record",
    "parse_record",
    "project_pi",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish

_publish(__name__, globals(), __all__)
