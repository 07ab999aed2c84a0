"""Pi's transcript rewriting at the provider boundary (`transformMessages`), for every provider.

Before a provider serialises a context it drops failed assistant turns, answers orphan tool calls,
strips another model's replay data (signatures, redacted thinking) and replaces images that a
text-only model cannot read. Also the small string helpers the wire formats need.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

from attrs import evolve

from mule.pi._content import AssistantContent, ImageContent, TextContent, ThinkingContent, ToolCall
from mule.pi._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from mule.pi._model import Model

NormalizeToolCallId = Callable[[str, Model, AssistantMessage], str]
"""Maps a foreign tool-call id to one the target API accepts: (id, target model, source message)."""

USER_IMAGE_PLACEHOLDER = "(image omitted: model does not support images)"
TOOL_IMAGE_PLACEHOLDER = "(tool image omitted: model does not support images)"
NO_RESULT_TEXT = "No result provided"


def _now_ms() -> int:
    return int(time.time() * 1000)


def is_same_model(message: AssistantMessage, model: Model) -> bool:
    """Return whether `message` came from `model` (same provider, api and id)."""
    return (
        message.provider == model.provider
        and message.api == model.api
        and message.model == model.id
    )


def _placeholders(
    content: Sequence[TextContent | ImageContent], placeholder: str
) -> tuple[TextContent | ImageContent, ...]:
    out: list[TextContent | ImageContent] = []
    previous_was_placeholder = False
    for block in content:
        if isinstance(block, ImageContent):
            if not previous_was_placeholder:
                out.append(TextContent(placeholder))
            previous_was_placeholder = True
            continue
        out.append(block)
        previous_was_placeholder = block.text == placeholder
    return tuple(out)


def _downgrade_images(message: Message) -> Message:
    if isinstance(message, UserMessage) and not isinstance(message.content, str):
        return evolve(message, content=_placeholders(message.content, USER_IMAGE_PLACEHOLDER))
    if isinstance(message, ToolResultMessage):
        return evolve(message, content=_placeholders(message.content, TOOL_IMAGE_PLACEHOLDER))
    return message


def _rewrite_assistant(
    message: AssistantMessage,
    model: Model,
    normalize: NormalizeToolCallId | None,
    id_map: dict[str, str],
) -> AssistantMessage:
    same = is_same_model(message, model)
    content: list[AssistantContent] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.redacted:
                # Opaque encrypted reasoning is only valid for the model that made it.
                if same:
                    content.append(block)
            elif same and block.thinking_signature:
                content.append(block)  # kept even when empty: OpenAI's encrypted reasoning
            elif not block.thinking.strip():
                continue
            elif same:
                content.append(block)
            else:
                content.append(TextContent(block.thinking))
        elif isinstance(block, TextContent):
            content.append(block if same else TextContent(block.text))
        else:
            call = block
            if not same and call.thought_signature is not None:
                call = evolve(call, thought_signature=None)
            if not same and normalize is not None:
                new_id = normalize(call.id, model, message)
                if new_id != call.id:
                    id_map[call.id] = new_id
                    call = evolve(call, id=new_id)
            content.append(call)
    return evolve(message, content=tuple(content))


def transform_messages(
    messages: Sequence[Message],
    model: Model,
    normalize_tool_call_id: NormalizeToolCallId | None = None,
    *,
    clock: Callable[[], int] = _now_ms,
) -> list[Message]:
    """Rewrite a transcript for `model` the way Pi does before every provider call.

    >>> from mule.pi._messages import ZERO_USAGE
    >>> m = Model("m", "m", "openai-completions", "openai", "https://x")
    >>> bad = AssistantMessage((), "a", "p", "x", ZERO_USAGE, "error", 0, error_message="boom")
    >>> transform_messages([UserMessage("hi", 0), bad], m)
    [UserMessage(content='hi', timestamp=0)]
    """
    id_map: dict[str, str] = {}
    text_only = "image" not in model.input
    rewritten: list[Message] = []
    for msg in messages:
        if type(msg) is SystemMessage:
            continue  # replayed into the request's prompt and tools (`collapse_context`)
        if text_only:
            msg = _downgrade_images(msg)
        if isinstance(msg, AssistantMessage):
            msg = _rewrite_assistant(msg, model, normalize_tool_call_id, id_map)
        elif isinstance(msg, ToolResultMessage):
            new_id = id_map.get(msg.tool_call_id)
            if new_id and new_id != msg.tool_call_id:
                msg = evolve(msg, tool_call_id=new_id)
        rewritten.append(msg)

    out: list[Message] = []
    pending: list[ToolCall] = []
    answered: set[str] = set()

    def answer_orphans() -> None:
        nonlocal pending, answered
        for call in pending:
            if call.id not in answered:
                out.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        content=(TextContent(NO_RESULT_TEXT),),
                        is_error=True,
                        timestamp=clock(),
                    )
                )
        pending, answered = [], set()

    for msg in rewritten:
        if isinstance(msg, AssistantMessage):
            answer_orphans()
            # A failed turn may hold half a reply (reasoning without its message, cut-off calls);
            # replaying it upsets providers, so the model resumes from the last good state.
            if msg.stop_reason in ("error", "aborted"):
                continue
            calls = [b for b in msg.content if isinstance(b, ToolCall)]
            if calls:
                pending, answered = calls, set()
            out.append(msg)
        elif isinstance(msg, ToolResultMessage):
            answered.add(msg.tool_call_id)
            out.append(msg)
        else:
            answer_orphans()
            out.append(msg)
    answer_orphans()
    return out


_LONE_SURROGATE = re.compile(
    r"[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]"
)


def sanitize_surrogates(text: str) -> str:
    r"""Remove unpaired UTF-16 surrogates, which providers reject in JSON.

    >>> sanitize_surrogates("a\ud83db")
    'ab'
    """
    return _LONE_SURROGATE.sub("", text)


def _imul(a: int, b: int) -> int:
    return (a * b) & 0xFFFFFFFF


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def short_hash(text: str) -> str:
    """Return Pi's short deterministic hash of a string (used to shorten long ids).

    >>> short_hash("abc") == short_hash("abc") != short_hash("abd")
    True
    """
    h1, h2 = 0xDEADBEEF, 0x41C6CE57
    units = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(units), 2):
        ch = units[i] | (units[i + 1] << 8)
        h1 = _imul(h1 ^ ch, 2654435761)
        h2 = _imul(h2 ^ ch, 1597334677)
    h1 = _imul(h1 ^ (h1 >> 16), 2246822507) ^ _imul(h2 ^ (h2 >> 13), 3266489909)
    h2 = _imul(h2 ^ (h2 >> 16), 2246822507) ^ _imul(h1 ^ (h1 >> 13), 3266489909)
    return _base36(h2) + _base36(h1)


__all__ = [
    "NO_RESULT_TEXT",
    "TOOL_IMAGE_PLACEHOLDER",
    "USER_IMAGE_PLACEHOLDER",
    "NormalizeToolCallId",
    "is_same_model",
    "sanitize_surrogates",
    "short_hash",
    "transform_messages",
]
