"""Pi's content blocks: text, thinking, images and tool calls."""

from __future__ import annotations

from typing import ClassVar, Literal, TypeAlias, final

from attrs import field, frozen

from mule._fields_repr import fields_repr
from mule.pi._json import JsonObject, JsonValue  # noqa: F401 (resolves the recursive alias)


@final
@frozen
class TextContent:
    """A text block; `text_signature` is opaque provider replay data.

    Attributes:
        text: The text.
        text_signature: A provider's opaque signature of the block, echoed back on the next
            call.

    """

    text: str
    text_signature: str | None = None
    type: ClassVar[Literal["text"]] = "text"

    __repr__ = fields_repr


@final
@frozen
class ThinkingContent:
    """A reasoning block; when `redacted`, the payload sits in `thinking_signature`.

    Attributes:
        thinking: The model's reasoning text (empty when redacted).
        thinking_signature: The provider's opaque signature, echoed back on the next call.
        redacted: Whether the provider withheld the reasoning (the signature carries it).

    """

    thinking: str
    thinking_signature: str | None = None
    redacted: bool | None = None
    type: ClassVar[Literal["thinking"]] = "thinking"

    __repr__ = fields_repr


@final
@frozen
class ImageContent:
    """A base64-encoded image.

    Attributes:
        data: The image bytes, base64-encoded.
        mime_type: Its MIME type (`image/png`, ...).

    """

    data: str
    mime_type: str
    type: ClassVar[Literal["image"]] = "image"

    __repr__ = fields_repr


@final
@frozen
class ToolCall:
    """A tool call requested by the model; `arguments` is always a JSON object.

    Attributes:
        id: The call's id, echoed by its tool result.
        name: The tool's name.
        arguments: The JSON arguments as the model sent them (validated later, by the tool's
            gate).
        thought_signature: A provider's opaque signature (Google), echoed back on the next
            call.
        namespace: The OpenAI Responses namespace of a namespaced or dynamically loaded
            tool, if any.
        arguments_error: Set when the model's whole arguments text was not a JSON object
            (`arguments` is then empty): the problem and the text received. The tool's
            validation fails with it.
        extras: The keys Pi's object carried that mule has no field for, in their order: the
            scratch state of a call still streaming (`partialArgs`, `streamIndex`,
            `partialJson`, `index`), so a partial message writes back as Pi wrote it. None for
            finished calls.

    """

    id: str
    name: str
    arguments: JsonObject = field(factory=dict)
    thought_signature: str | None = None
    namespace: str | None = None
    arguments_error: str | None = None
    extras: JsonObject | None = field(default=None, kw_only=True)
    type: ClassVar[Literal["toolCall"]] = "toolCall"

    __repr__ = fields_repr


UserContent: TypeAlias = TextContent | ImageContent
AssistantContent: TypeAlias = TextContent | ThinkingContent | ToolCall

__all__ = [
    "AssistantContent",
    "ImageContent",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "UserContent",
]
