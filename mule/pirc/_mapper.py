"""pi's RPC events → mule events with causal identities, plus typed pass-through events.

Identities follow section 5.2 of the loop semantics: one run per prompt (its whole chain of
`agent_start`…`agent_end`, auto-retries included), a turn per `turn_start`, a message per
message, a tool_call per ToolCall block (parent: its assistant message) and a tool_result per
result message (parent: its tool_call). `RunEnd` is emitted by `finish`, when the job state
machine decides the prompt is over, never at a (possibly retried) `agent_end`.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Mapping
from typing import Any, Final, cast, final, get_args

from attrs import evolve

from mule.effects import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    MuleEvent,
    MuleIdentity,
    MuleIdentityKind,
    MuleToolResult,
    RunEnd,
    RunStart,
    RunStatus,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from mule.pi import (
    ZERO_USAGE,
    AssistantContent,
    AssistantMessage,
    AssistantMessageEvent,
    ImageContent,
    Message,
    PartialSource,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultMessage,
    Usage,
    WireError,
    decode,
    from_wire,
)
from mule.pirc._assembly import DeltaAssembly
from mule.pirc._growth import StreamedDelta, delta_record
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
    OtherPiEvent,
    PiMessage,
    QueueUpdate,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
)

log = logging.getLogger("mule.pirc")

# Events that carry the run's structure; the buffer never drops them.
LIFECYCLE_TYPES: frozenset[str] = frozenset(
    {
        "run_start",
        "run_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "agent_end",
        "agent_settled",
        "auto_retry_start",
        "auto_retry_end",
        "compaction_start",
        "compaction_end",
        "extension_ui_request",
        "extension_error",
    }
)


def is_droppable(event: BridgeEvent) -> bool:
    """Whether the buffer may drop `event` under pressure (streaming deltas only)."""
    return event.type == "message_update"


def _str(data: Mapping[str, Any], key: str, default: str = "") -> str:
    v = data.get(key)
    return v if isinstance(v, str) else default


def _int(data: Mapping[str, Any], key: str) -> int:
    v = data.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


@final
class WirePartial:
    """A lazy snapshot of pi's partial message JSON, decoded on first read."""

    # One slot, the JSON until the first read and its value after: one write makes a snapshot.
    __slots__ = ("_state",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._state: Mapping[str, Any] | AssistantMessage = data

    def materialize(self) -> AssistantMessage:
        """Decode the partial (tolerating half-built blocks, which are left out)."""
        state = self._state
        if isinstance(state, AssistantMessage):
            return state
        value = self._state = _decode_partial(state)
        return value


def _decode_partial(data: Mapping[str, Any]) -> AssistantMessage:
    try:
        return decode(AssistantMessage, data)
    except WireError:
        pass
    blocks: list[AssistantContent] = []
    raw = data.get("content")
    for b in raw if isinstance(raw, list) else ():
        try:
            blocks.append(cast(AssistantContent, from_wire(AssistantContent, b)))
        except WireError:
            continue
    base = {k: v for k, v in data.items() if k != "content"}
    try:
        return evolve(decode(AssistantMessage, {**base, "content": []}), content=tuple(blocks))
    except WireError:
        return AssistantMessage(
            content=tuple(blocks),
            api=_str(data, "api"),
            provider=_str(data, "provider"),
            model=_str(data, "model"),
            usage=ZERO_USAGE,
            stop_reason="stop",
            timestamp=_int(data, "timestamp"),
        )


def _assistant_event(
    data: Mapping[str, Any], partial: PartialSource
) -> AssistantMessageEvent | None:
    kind = data.get("type")
    index = _int(data, "contentIndex")
    match kind:
        case "text_start":
            return TextStartEvent(content_index=index, partial=partial)
        case "text_delta":
            return TextDeltaEvent(content_index=index, delta=_str(data, "delta"), partial=partial)
        case "text_end":
            return TextEndEvent(content_index=index, content=_str(data, "content"), partial=partial)
        case "thinking_start":
            return ThinkingStartEvent(content_index=index, partial=partial)
        case "thinking_delta":
            return ThinkingDeltaEvent(
                content_index=index, delta=_str(data, "delta"), partial=partial
            )
        case "thinking_end":
            return ThinkingEndEvent(
                content_index=index, content=_str(data, "content"), partial=partial
            )
        case "toolcall_start":
            return ToolCallStartEvent(content_index=index, partial=partial)
        case "toolcall_delta":
            return ToolCallDeltaEvent(
                content_index=index, delta=_str(data, "delta"), partial=partial
            )
        case "toolcall_end":
            try:
                call = decode(ToolCall, data.get("toolCall"))
            except WireError:
                return None
            return ToolCallEndEvent(content_index=index, tool_call=call, partial=partial)
    return None


# A streamed delta's event class and the block it grows (pi >= 0.84, where the bridge builds
# the response itself), by its kind: one lookup per delta.
_DELTAS: Final[
    dict[str, tuple[str, type[TextDeltaEvent | ThinkingDeltaEvent | ToolCallDeltaEvent]]]
] = {
    "text_delta": ("text", TextDeltaEvent),
    "thinking_delta": ("thinking", ThinkingDeltaEvent),
    "toolcall_delta": ("toolCall", ToolCallDeltaEvent),
}


def _tool_result(data: Any, is_error: bool = False) -> MuleToolResult:
    if not isinstance(data, Mapping):
        return MuleToolResult(content=(), is_error=is_error)
    blocks: list[TextContent | ImageContent] = []
    raw = data.get("content")
    for b in raw if isinstance(raw, list) else ():
        try:
            blocks.append(
                cast(TextContent | ImageContent, from_wire(TextContent | ImageContent, b))
            )
        except WireError:
            continue
    usage: Usage | None = None
    if data.get("usage") is not None:  # a tool that spent tokens itself (pi >= 0.84)
        with contextlib.suppress(WireError):
            usage = decode(Usage, data.get("usage"))
    return MuleToolResult(
        content=tuple(blocks),
        is_error=is_error,
        details=data.get("details"),
        structured_content=data.get("structuredContent"),
        usage=usage,
    )


# The roles mule's model has a class for (user, assistant, toolResult; more as it grows).
_MESSAGE_CLASSES: Final = get_args(Message)
_MESSAGE_ROLES: Final = frozenset(cls.role for cls in _MESSAGE_CLASSES)


def decode_message(data: Any) -> PiMessage:
    """Decode one pi message; roles mule has no class for stay raw."""
    if isinstance(data, Mapping) and data.get("role") in _MESSAGE_ROLES:
        try:
            return cast(Message, from_wire(Message, data))
        except WireError as exc:
            log.warning("pi message did not decode (%s); kept raw", exc)
    return cast(Mapping[str, Any], data if isinstance(data, Mapping) else {"value": data})


@final
class EventMapper:
    """Stateful translation of pi's event stream (in stdout order) into bridge events."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._run: MuleIdentity | None = None
        self._run_started = False
        self._turn: MuleIdentity | None = None
        self._message: MuleIdentity | None = None
        self._calls: dict[str, MuleIdentity] = {}
        self._last_assistant: MuleIdentity | None = None
        self._superseded: dict[MuleIdentity, bool] = {}  # open runs a fresh one replaced
        self._args: dict[str, Mapping[str, Any]] = {}  # arguments of started tool calls, by id
        self._stream: DeltaAssembly | None = None  # the streaming assistant message (pi >= 0.84)

    @property
    def run(self) -> MuleIdentity | None:
        """The open run, if any."""
        return self._run

    def _new(self, kind: MuleIdentityKind, parent: MuleIdentity | None) -> MuleIdentity:
        return MuleIdentity(kind, f"{kind}:{next(self._ids)}", parent)

    def begin(self, fresh: bool = False) -> MuleIdentity:
        """Open a run for a new job (its `RunStart` waits for pi's first `agent_start`).

        Without `fresh`, an open run is reused (pi's own `agent_start` inside a job). With it,
        a new run opens even while the last one waits to settle: its events map to the new run
        from now on, and the old one still gets its `RunEnd` from `finish`.
        """
        if self._run is None or fresh:
            if self._run is not None:
                self._superseded[self._run] = self._run_started
            self._run = self._new("run", None)
            self._run_started = False
            self._turn, self._message, self._stream = None, None, None
            self._calls.clear()
        return self._run

    def finish(self, outcome: RunStatus, run: MuleIdentity | None = None) -> list[BridgeEvent]:
        """Close `run` (default: the open one) with its one `RunEnd`.

        A `RunStart` comes first if pi never ran it.
        """
        current = self._run
        if run is None:
            run = current
        if run is None:
            return []
        started = self._run_started if run == current else self._superseded.pop(run, True)
        out: list[BridgeEvent] = [] if started else [RunStart(run=run)]
        out.append(RunEnd(run=run, terminal=self._new("terminal", run), outcome=outcome))
        if run == current:
            self._run, self._turn, self._message, self._stream = None, None, None, None
            self._calls.clear()
        return out

    def map(self, data: Mapping[str, Any]) -> list[BridgeEvent]:
        """Translate one pi event (never a `response`)."""
        kind = data.get("type")
        if kind == "message_update":  # most of pi's lines: first, and inline
            run, turn, ident = self._run, self._turn, self._message
            raw = data.get("message")
            ame = data.get("assistantMessageEvent")
            # `type(x) is dict` first: decoded records are dicts, and the ABC check costs more
            if (
                run is not None
                and turn is not None
                and ident is not None
                and (type(ame) is dict or isinstance(ame, Mapping))
            ):
                kind = ame.get("type")
                delta_kind = kind in _DELTAS
                if raw is None and (stream := self._stream) is not None:  # pi >= 0.84: a delta
                    usage = data.get("usage")
                    if delta_kind:
                        index, delta = ame.get("contentIndex"), ame.get("delta")
                        return [
                            self.delta(
                                (
                                    kind,  # type: ignore[arg-type]
                                    index if type(index) is int else _int(ame, "contentIndex"),
                                    delta if type(delta) is str else "",
                                    usage,
                                )
                            )
                        ]
                    if usage is not stream.last_usage:  # the decoder shares a repeated one
                        stream.usage(usage)
                    snapshot = stream.apply(ame)
                    event = _assistant_event(ame, snapshot)
                    if event is not None:
                        return [
                            MessageUpdate(
                                run=run, turn=turn, message=ident, value=snapshot, event=event
                            )
                        ]
                elif type(raw) is dict or isinstance(raw, Mapping):  # pi < 0.84: the partial
                    partial = WirePartial(raw)
                    if delta_kind:
                        index, delta = ame.get("contentIndex"), ame.get("delta")
                        event = _DELTAS[kind][1](  # type: ignore[index]
                            content_index=index
                            if type(index) is int
                            else _int(ame, "contentIndex"),
                            delta=delta if isinstance(delta, str) else "",
                            partial=partial,
                        )
                    else:
                        event = _assistant_event(ame, partial)
                    if event is not None:
                        return [
                            MessageUpdate(
                                run=run, turn=turn, message=ident, value=partial, event=event
                            )
                        ]
            return [OtherPiEvent(run=run, data=data)]
        run = self._run
        match kind:
            case "agent_start":
                run = self.begin()
                if self._run_started:
                    return []  # a retry's new attempt: same run
                self._run_started = True
                return [RunStart(run=run)]
            case "agent_end":
                self._stream = None
                raw = data.get("messages")
                msgs = tuple(decode_message(m) for m in raw) if isinstance(raw, list) else ()
                again = data.get("willRetry")
                return [
                    AgentEnd(
                        run=run,
                        messages=msgs,
                        will_retry=again if isinstance(again, bool) else None,
                    )
                ]
            case "agent_settled":
                return [AgentSettled(run=run, aborted=data.get("aborted") is True)]
            case "entry_appended":
                entry = data.get("entry")
                return [EntryAppended(run=run, entry=entry if isinstance(entry, Mapping) else {})]
            case "bash_execution_update":
                bash_id = data.get("id")
                return [
                    BashExecutionUpdate(
                        run=run,
                        id=bash_id if isinstance(bash_id, str) else None,
                        delta=_str(data, "delta"),
                    )
                ]
            case "summarization_retry_scheduled":
                return [
                    SummarizationRetryScheduled(
                        run=run,
                        attempt=_int(data, "attempt"),
                        max_attempts=_int(data, "maxAttempts"),
                        delay_ms=_int(data, "delayMs"),
                        error_message=_str(data, "errorMessage"),
                    )
                ]
            case "summarization_retry_attempt_start":
                reason = data.get("reason")
                return [
                    SummarizationRetryAttemptStart(
                        run=run,
                        source=_str(data, "source"),
                        reason=reason if isinstance(reason, str) else None,
                    )
                ]
            case "summarization_retry_finished":
                return [SummarizationRetryFinished(run=run)]
            case "turn_start":
                if run is None:
                    run = self.begin()
                self._turn = self._new("turn", run)
                return [TurnStart(run=run, turn=self._turn)]
            case "turn_end":
                return self._turn_end(data)
            case "message_start" | "message_end":
                return self._message_event(kind, data)
            case "tool_execution_start" | "tool_execution_update" | "tool_execution_end":
                return self._tool_event(kind, data)
            case "auto_retry_start":
                return [
                    AutoRetryStart(
                        run=run,
                        attempt=_int(data, "attempt"),
                        max_attempts=_int(data, "maxAttempts"),
                        delay_ms=_int(data, "delayMs"),
                        error_message=_str(data, "errorMessage"),
                    )
                ]
            case "auto_retry_end":
                err = data.get("finalError")
                return [
                    AutoRetryEnd(
                        run=run,
                        success=data.get("success") is True,
                        attempt=_int(data, "attempt"),
                        final_error=err if isinstance(err, str) else None,
                    )
                ]
            case "compaction_start":
                return [CompactionStart(run=run, reason=_str(data, "reason"))]
            case "compaction_end":
                result = data.get("result")
                err = data.get("errorMessage")
                return [
                    CompactionEnd(
                        run=run,
                        reason=_str(data, "reason"),
                        result=result if isinstance(result, Mapping) else None,
                        aborted=data.get("aborted") is True,
                        will_retry=data.get("willRetry") is True,
                        error_message=err if isinstance(err, str) else None,
                    )
                ]
            case "queue_update":
                return [
                    QueueUpdate(
                        run=run,
                        steering=_strings(data.get("steering")),
                        follow_up=_strings(data.get("followUp")),
                    )
                ]
            case "extension_error":
                return [
                    ExtensionError(
                        run=run,
                        extension_path=_str(data, "extensionPath"),
                        event=_str(data, "event"),
                        error=_str(data, "error"),
                    )
                ]
            case "extension_ui_request":
                return [
                    ExtensionUIRequest(
                        run=run, id=_str(data, "id"), method=_str(data, "method"), data=data
                    )
                ]
        return [OtherPiEvent(run=run, data=data)]

    def delta(self, streamed: StreamedDelta) -> BridgeEvent:
        """Translate one streamed delta of pi >= 0.84 (as `LineDecoder.read` hands it over).

        Most of pi's lines: the delta grows the response this mapper builds (`DeltaAssembly`),
        and its one update holds the event and a snapshot of that response. Out of place (no
        assistant message streaming), it maps as its record does (to an `OtherPiEvent`).
        """
        run, turn, ident, stream = self._run, self._turn, self._message, self._stream
        if run is None or turn is None or ident is None or stream is None:
            return OtherPiEvent(run=run, data=delta_record(streamed))
        kind, index, text, usage = streamed
        if usage is not stream.last_usage:  # the decoder shares a repeated one
            stream.usage(usage)
        block, cls = _DELTAS[kind]
        snapshot = stream.append(index, block, text)
        event = cls(index, text, snapshot)  # (positional: one per delta)
        return MessageUpdate(run, turn, ident, snapshot, event)

    def _turn_end(self, data: Mapping[str, Any]) -> list[BridgeEvent]:
        run, turn = self._run, self._turn
        msg = decode_message(data.get("message"))
        raw = data.get("toolResults")
        results = tuple(decode_message(m) for m in raw) if isinstance(raw, list) else ()
        tool_results = tuple(r for r in results if isinstance(r, ToolResultMessage))
        if run is None or turn is None or not isinstance(msg, AssistantMessage):
            return [OtherPiEvent(run=run, data=data)]
        return [TurnEnd(run=run, turn=turn, message=msg, tool_results=tool_results)]

    def _message_event(self, kind: str, data: Mapping[str, Any]) -> list[BridgeEvent]:
        run, turn = self._run, self._turn
        raw = data.get("message")
        if run is None or turn is None or not isinstance(raw, Mapping):
            return [OtherPiEvent(run=run, data=data)]
        role = raw.get("role")
        msg = decode_message(raw)
        if role == "assistant":
            self._stream = None
            if kind == "message_start" and isinstance(msg, AssistantMessage):
                self._stream = DeltaAssembly(msg)  # pi >= 0.84 streams only deltas from here
        if not isinstance(msg, _MESSAGE_CLASSES):
            return [OtherPiEvent(run=run, data=data)]
        if kind == "message_start":
            if role == "toolResult" and isinstance(msg, ToolResultMessage):
                call = self._calls.get(msg.tool_call_id) or self._call(msg.tool_call_id)
                self._message = self._new("tool_result", call)
            else:
                self._message = self._new("message", turn)
            return [MessageStart(run=run, turn=turn, message=self._message, value=msg)]
        ident = self._message or self._new("message", turn)
        self._message = None
        if isinstance(msg, AssistantMessage):
            self._last_assistant = ident
            for block in msg.content:
                if isinstance(block, ToolCall):
                    self._calls[block.id] = self._new("tool_call", ident)
        return [MessageEnd(run=run, turn=turn, message=ident, value=msg)]

    def _call(self, call_id: str) -> MuleIdentity:
        parent = self._last_assistant or self._turn
        ident = self._new("tool_call", parent)
        self._calls[call_id] = ident
        return ident

    def _tool_event(self, kind: str, data: Mapping[str, Any]) -> list[BridgeEvent]:
        run, turn = self._run, self._turn
        if run is None or turn is None:
            return [OtherPiEvent(run=run, data=data)]
        call_id = _str(data, "toolCallId")
        args = data.get("args")
        if isinstance(args, Mapping):
            self._args[call_id] = args
        else:  # pi's tool_execution_end has no args: the call's arguments from its start
            args = self._args.get(call_id, {})
        call = ToolCall(id=call_id, name=_str(data, "toolName"), arguments=args)
        if kind == "tool_execution_end":
            self._args.pop(call_id, None)
        ident = self._calls.get(call_id) or self._call(call_id)
        if kind == "tool_execution_start":
            return [
                ToolExecutionStart(run=run, turn=turn, tool_call=ident, call=call, replay="unsafe")
            ]
        if kind == "tool_execution_update":
            result = _tool_result(data.get("partialResult"))
            return [
                ToolExecutionUpdate(run=run, turn=turn, tool_call=ident, call=call, result=result)
            ]
        result = _tool_result(data.get("result"), data.get("isError") is True)
        took = data.get("durationMs")  # pi >= 0.84; absent for a call that did not run
        return [
            ToolExecutionEnd(
                run=run,
                turn=turn,
                tool_call=ident,
                call=call,
                result=result,
                duration_ms=took if type(took) is int else None,
            )
        ]


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


__all__ = [
    "LIFECYCLE_TYPES",
    "EventMapper",
    "MuleEvent",
    "WirePartial",
    "decode_message",
    "is_droppable",
]
