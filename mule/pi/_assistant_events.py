"""Pi's assistant-message stream events, with lazy snapshots of the response so far."""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeAlias, final

from attrs import field, fields, frozen

from mule._fields_repr import fields_repr
from mule.pi._content import ToolCall
from mule.pi._messages import AssistantMessage


class PartialSource(Protocol):
    """Something that yields the response-so-far when asked (a lazy snapshot)."""

    def materialize(self) -> AssistantMessage:
        """Return the partial message this snapshot stands for."""
        ...


def _resolve(source: AssistantMessage | PartialSource) -> AssistantMessage:
    return source if type(source) is AssistantMessage else source.materialize()


class _PartialEvent:
    """Shared behaviour of events whose `partial` may be a lazy snapshot.

    Pi's `partial` is a live mutable object; mule's is an immutable snapshot, materialised only
    when read, so streaming n deltas costs O(n) and not O(n²) when nobody reads the partials.
    """

    __slots__ = ()
    _partial: AssistantMessage | PartialSource

    @property
    def partial(self) -> AssistantMessage:
        """The response so far, as of this event."""
        return _resolve(self._partial)

    # A property over a C getter: the machine reads it for every streamed delta.
    if TYPE_CHECKING:

        @property
        def partial_source(self) -> AssistantMessage | PartialSource:
            """The partial as given: a message, or a lazy snapshot not yet materialised."""

    else:
        partial_source = property(
            attrgetter("_partial"),
            doc="The partial as given: a message, or a lazy snapshot not yet materialised.",
        )

    def _key(self) -> tuple[Any, ...]:
        return tuple(
            self.partial if a.name == "_partial" else getattr(self, a.name)
            for a in fields(type(self))  # type: ignore[arg-type]
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(
            f"{a.name.lstrip('_')}={v!r}"
            for a, v in zip(fields(type(self)), self._key(), strict=True)  # type: ignore[arg-type]
        )
        return f"{type(self).__name__}({inner})"


class _DeltaEvent(_PartialEvent):
    """The constructor of the three delta events: their fields, set in the instance's dict.

    A delta event is made for every streamed delta, so its `__init__` is written here rather
    than generated: attrs' frozen `__init__` sets the same dict entries, and also fetches a
    bound `object.__setattr__` that a dict class never calls (about 100 ns per event). Each
    subclass is `init=False`; a test checks this sets exactly its attrs fields.
    """

    __slots__ = ()

    def __init__(
        self, content_index: int, delta: str, partial: AssistantMessage | PartialSource
    ) -> None:
        d = self.__dict__
        d["content_index"] = content_index
        d["delta"] = delta
        d["_partial"] = partial


@final
@frozen(kw_only=True, eq=False, repr=False)
class StartEvent(_PartialEvent):
    """The response has started.

    Attributes:
        partial: The response so far (a snapshot, materialised on first read).

    """

    _partial: AssistantMessage | PartialSource = field(alias="partial")
    type: ClassVar[Literal["start"]] = "start"


@final
@frozen(kw_only=True, eq=False, repr=False)
class TextStartEvent(_PartialEvent):
    """A text block opened at `content_index`.

    Attributes:
        content_index: The index of the block in the response's `content`.
        partial: The response so far (a snapshot, materialised on first read).

    """

    content_index: int
    _partial: AssistantMessage | PartialSource = field(alias="partial")
    type: ClassVar[Literal["text_start"]] = "text_start"


@final
# Made per streamed delta: a frozen dict class sets its fields with fewer calls than a slotted
# one, and positional arguments are allowed (`TextDeltaEvent(i, delta, snapshot)`), since a class
# called with keywords costs CPython 3.11 a dict per call. The constructor is `_DeltaEvent`'s.
@frozen(eq=False, repr=False, slots=False, init=False)
class TextDeltaEvent(_DeltaEvent):
    """Text was appended to the block at `content_index`.

    Attributes:
        content_index: The index of the block in the response's `content`.
        delta: The text appended.
        partial: The response so far (a snapshot, materialised on first read).

    """

    content_index: int
    delta: str
    _partial: AssistantMessage | PartialSource = field(alias="partial")
    type: ClassVar[Literal["text_delta"]] = "text_delta"


@final
@frozen(kw_only=True, eq=False, repr=False)
class TextEndEvent(_PartialEvent):
    """The text block at `content_index` is complete; `content` is its full text.

    Attributes:
        content_index: The index of the block in the response's `content`.
        content: The block's whole text.
        partial: The response so far (a snapshot, materialised on first read).

    """

    content_index: int
    content: str
    _partial: AssistantMessage | PartialSource = field(alias="partial")
    type: ClassVar[Literal["text_end"]] = "text_end"


@final
@frozen(kw_only=True, eq=False, repr=False)
class ThinkingStartEvent(_PartialEvent):
    """A thinking block opened at `content_index`.

    Attributes:
        content_index: The index of the block in the response's `content`.
        partial: The response so far (a snapshot, materialised on first read).

    """

    content_index: int
    _partial: AssistantMessage | PartialSource = field(alias="partial")
    type: ClassVar[Literal["thinking_start"]] = "thinking_start"


@final
@frozen(eq=False, repr=False, slots=False, init=False)  # per delta: see TextDeltaEvent
class ThinkingDeltaEvent(_DeltaEvent):
    """Reasoning text was appended to the block at `content_index`.

    Attributes:
        content_index: The index of the block in the response's `content`.
        delta: The reasoning text appended.
        partial: The response so far (a snapshot, materialised on first read).

    """

    content_index: int
    delta: str
    _partial: AssistantMessage | PartialSource = field(alias="partial")
    type: ClassVar[Literal["thinking_delta"]] = "thinking_delta"


@final
@frozen(kw_only=True, eq=False, repr=False)
class ThinkingEndEvent(_PartialEvent):
    """The thinking block at `content_index` is complete; `content` is its full text.

    Attributes:
        content_index: The index of the block in the response's `content`.
        content: The block's whole reasoning text.
        partial: The response so far (a snapshot, materialised on first read).

    """

    content_index: int
    content: str
    _partial: AssistantMessage | PartialSource = field(alias="partial")
    type: ClassVar[Literal["thinking_end"]] = "thinking_end"


@final
@frozen(kw_only=True, eq=False, repr=False)
class ToolCallStartEvent(_PartialEvent):
    """A tool-call block opened at `content_index`.

    Attributes:
        content_index: The index of the block in the response's `content`.
        partial: The response so far (a snapshot, materialised on first read).

    """

    content_index: int
    _partial: AssistantMessage | PartialSource = field(alias="partial")
    type: ClassVar[Literal["toolcall_start"]] = "toolcall_start"


@final
@frozen(eq=False, repr=False, slots=False, init=False)  # per delta: see TextDeltaEvent
class ToolCallDeltaEvent(_DeltaEvent):
    """A raw JSON fragment of the arguments of the tool call at `content_index`.

    Attributes:
        content_index: The index of the block in the response's `content`.
        delta: A fragment of the call's JSON arguments.
        partial: The response so far (a snapshot, materialised on first read).

    """

    content_index: int
    delta: str
    _partial: AssistantMessage | PartialSource = field(alias="partial")
    type: ClassVar[Literal["toolcall_delta"]] = "toolcall_delta"


@final
@frozen(kw_only=True, eq=False, repr=False)
class ToolCallEndEvent(_PartialEvent):
    """The tool call at `content_index` is complete.

    Attributes:
        content_index: The index of the block in the response's `content`.
        tool_call: The complete call, its arguments parsed.
        partial: The response so far (a snapshot, materialised on first read).

    """

    content_index: int
    tool_call: ToolCall
    _partial: AssistantMessage | PartialSource = field(alias="partial")
    type: ClassVar[Literal["toolcall_end"]] = "toolcall_end"


@final
@frozen(kw_only=True)
class DoneEvent:
    """The response succeeded; `message` is authoritative.

    Attributes:
        reason: The stop reason: `"stop"`, `"length"` or `"toolUse"`.
        message: The final message (authoritative).

    """

    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage
    type: ClassVar[Literal["done"]] = "done"

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class ErrorEvent:
    """The response failed; `error` carries the stop reason and `error_message`.

    Attributes:
        reason: `"error"` or `"aborted"`.
        error: The final message, with its `error_message`.

    """

    reason: Literal["error", "aborted"]
    error: AssistantMessage
    type: ClassVar[Literal["error"]] = "error"

    __repr__ = fields_repr


BlockEvent: TypeAlias = (
    TextStartEvent
    | TextDeltaEvent
    | TextEndEvent
    | ThinkingStartEvent
    | ThinkingDeltaEvent
    | ThinkingEndEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
)
AssistantMessageEvent: TypeAlias = StartEvent | BlockEvent | DoneEvent | ErrorEvent
TerminalEvent: TypeAlias = DoneEvent | ErrorEvent

BLOCK_EVENT_TYPES: frozenset[type[BlockEvent]] = frozenset(
    {
        TextStartEvent,
        TextDeltaEvent,
        TextEndEvent,
        ThinkingStartEvent,
        ThinkingDeltaEvent,
        ThinkingEndEvent,
        ToolCallStartEvent,
        ToolCallDeltaEvent,
        ToolCallEndEvent,
    }
)
# Every event class, in Pi's protocol order.
EVENT_CLASSES: tuple[type[AssistantMessageEvent], ...] = (
    StartEvent,
    TextStartEvent,
    TextDeltaEvent,
    TextEndEvent,
    ThinkingStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ToolCallStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    DoneEvent,
    ErrorEvent,
)

__all__ = [
    "BLOCK_EVENT_TYPES",
    "EVENT_CLASSES",
    "AssistantMessageEvent",
    "BlockEvent",
    "DoneEvent",
    "ErrorEvent",
    "PartialSource",
    "StartEvent",
    "TerminalEvent",
    "TextDeltaEvent",
    "TextEndEvent",
    "TextStartEvent",
    "ThinkingDeltaEvent",
    "ThinkingEndEvent",
    "ThinkingStartEvent",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
]
