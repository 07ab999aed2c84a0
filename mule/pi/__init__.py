"""Pi's data model, wire codec and model-stream protocol, in Python.

`stream_simple` dispatches on `model.api` to the real providers (`mule[providers]` installs
httpx); `mule.pi.models` is the model registry; `mule.pi.providers` has the provider registry.
"""

from typing import TYPE_CHECKING

from mule.pi._abort import (
    AbortController,
    AbortError,
    AbortSignal,
    as_exception,
    child_controller,
)
from mule.pi._assistant_events import (
    BLOCK_EVENT_TYPES,
    EVENT_CLASSES,
    AssistantMessageEvent,
    BlockEvent,
    DoneEvent,
    ErrorEvent,
    PartialSource,
    StartEvent,
    TerminalEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from mule.pi._content import (
    AssistantContent,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserContent,
)
from mule.pi._context import (
    CacheRetention,
    Context,
    PayloadHook,
    ProviderResponse,
    SimpleStreamOptions,
    StreamOptions,
    ThinkingBudgets,
    Tool,
    ToolReference,
    Transport,
)
from mule.pi._cost import calculate_cost
from mule.pi._error_text import ToolArgumentsError, ToolSchemaError
from mule.pi._event_stream import AssistantMessageEventStream, IncompleteStreamError
from mule.pi._extras import MissingExtraError, needs_extra
from mule.pi._json import JsonError, JsonObject, JsonValue, loads, stringify
from mule.pi._messages import (
    FAILURE_STOP_REASONS,
    SUCCESS_STOP_REASONS,
    ZERO_USAGE,
    AssistantMessage,
    Diagnostic,
    DiagnosticError,
    Message,
    StopReason,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UsageCost,
    UserMessage,
    now_ms,
    text_of,
)
from mule.pi._model import (
    InputKind,
    Model,
    ModelCost,
    ModelCostTier,
    ModelThinkingLevel,
    ThinkingLevel,
)
from mule.pi._partial import PartialBuilder, PartialSnapshot
from mule.pi._partial_json import parse_streaming_json
from mule.pi._retry import (
    PI_CODING_AGENT_RETRY_DEFAULTS,
    RetryPolicy,
    is_retryable_assistant_error,
    retry_delay_ms,
)
from mule.pi._transcript import (
    SystemReplay,
    TranscriptContext,
    collapse_context,
    create_initial_system_message,
    get_current_system_prompt,
    get_current_tools,
    get_tool_state_changes,
    normalize_context,
    without_system_messages,
)

if TYPE_CHECKING:
    from mule.pi._codec import (
        PI_CODEC,
        WireCodec,
        WireError,
        camel,
        decode,
        from_json,
        from_wire,
        to_json,
        to_wire,
    )
    from mule.pi._validate import ToolValidator, validate_tool_arguments
    from mule.pi.providers import (
        ProviderSetupError,
        complete_simple,
        register_provider,
        retry_after_ms,
        stream_simple,
    )

# Loaded on first use, as a run given its own stream function needs neither: the codec (cattrs
# and its hooks; a run does not encode), the provider registry (`stream_simple`, the default
# when a run names no stream function) and the tool-argument gate (a run with no tools has no
# schema to compile).
_LAZY = {
    **dict.fromkeys(
        (
            "PI_CODEC",
            "WireCodec",
            "WireError",
            "camel",
            "decode",
            "from_json",
            "from_wire",
            "to_json",
            "to_wire",
        ),
        "mule.pi._codec",
    ),
    **dict.fromkeys(
        (
            "ProviderSetupError",
            "complete_simple",
            "register_provider",
            "retry_after_ms",
            "stream_simple",
        ),
        "mule.pi.providers",
    ),
    **dict.fromkeys(("ToolValidator", "validate_tool_arguments"), "mule.pi._validate"),
}

__all__ = [
    "BLOCK_EVENT_TYPES",
    "EVENT_CLASSES",
    "FAILURE_STOP_REASONS",
    "PI_CODEC",
    "PI_CODING_AGENT_RETRY_DEFAULTS",
    "SUCCESS_STOP_REASONS",
    "ZERO_USAGE",
    "AbortController",
    "AbortError",
    "AbortSignal",
    "AssistantContent",
    "AssistantMessage",
    "AssistantMessageEvent",
    "AssistantMessageEventStream",
    "BlockEvent",
    "CacheRetention",
    "Context",
    "Diagnostic",
    "DiagnosticError",
    "DoneEvent",
    "ErrorEvent",
    "ImageContent",
    "IncompleteStreamError",
    "InputKind",
    "JsonError",
    "JsonObject",
    "JsonValue",
    "Message",
    "MissingExtraError",
    "Model",
    "ModelCost",
    "ModelCostTier",
    "ModelThinkingLevel",
    "PartialBuilder",
    "PartialSnapshot",
    "PartialSource",
    "PayloadHook",
    "ProviderResponse",
    "ProviderSetupError",
    "RetryPolicy",
    "SimpleStreamOptions",
    "StartEvent",
    "StopReason",
    "StreamOptions",
    "SystemMessage",
    "SystemReplay",
    "TerminalEvent",
    "TextContent",
    "TextDeltaEvent",
    "TextEndEvent",
    "TextStartEvent",
    "ThinkingBudgets",
    "ThinkingContent",
    "ThinkingDeltaEvent",
    "ThinkingEndEvent",
    "ThinkingLevel",
    "ThinkingStartEvent",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolReference",
    "ToolResultMessage",
    "ToolSchemaError",
    "ToolValidator",
    "TranscriptContext",
    "Transport",
    "Usage",
    "UsageCost",
    "UserContent",
    "UserMessage",
    "WireCodec",
    "WireError",
    "as_exception",
    "calculate_cost",
    "camel",
    "child_controller",
    "collapse_context",
    "complete_simple",
    "create_initial_system_message",
    "decode",
    "from_json",
    "from_wire",
    "get_current_system_prompt",
    "get_current_tools",
    "get_tool_state_changes",
    "is_retryable_assistant_error",
    "loads",
    "needs_extra",
    "normalize_context",
    "now_ms",
    "parse_streaming_json",
    "register_provider",
    "retry_after_ms",
    "retry_delay_ms",
    "stream_simple",
    "stringify",
    "text_of",
    "to_json",
    "to_wire",
    "validate_tool_arguments",
    "without_system_messages",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import lazy as _lazy  # noqa: E402
from mule._publish import listing as _listing  # noqa: E402
from mule._publish import publish as _publish  # noqa: E402

__getattr__ = _lazy(__name__, globals(), _LAZY)
__dir__ = _listing(globals(), _LAZY)
_publish(__name__, globals(), __all__)
