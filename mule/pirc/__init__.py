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
from mule.pirc._events import (
    AgentEnd,
    AutoRetryEnd,
    AutoRetryStart,
    BridgeEvent,
    CompactionEnd,
    CompactionStart,
    ExtensionError,
    ExtensionUIRequest,
    JobResult,
    OtherPiEvent,
    PassThroughEvent,
    PiMessage,
    QueueUpdate,
)
from mule.pirc._framing import FrameStats, LineError, LineFramer, decode_line, parse_record
from mule.pirc._growth import LineDecoder
from mule.pirc._job_handle import Job
from mule.pirc._mapper import EventMapper
from mule.pirc._subscription import Subscription

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_LINE_DEPTH",
    "AgentEnd",
    "AutoRetryEnd",
    "AutoRetryStart",
    "Bridge",
    "BridgeConfig",
    "BridgeError",
    "BridgeEvent",
    "BridgeStats",
    "BufferStats",
    "CommandFailed",
    "CommandTimeout",
    "CompactionEnd",
    "CompactionStart",
    "ConfigError",
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
    "StreamingBehavior",
    "Subscription",
    "ThinkingOption",
    "WriteTimeout",
    "decode_line",
    "default_pi_executable",
    "parse_record",
    "project_pi",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish

_publish(__name__, globals(), __all__)
