"""Pi 1.6.0's context-size estimate, and the output cap it fits into the context window.

The estimate counts 3.5 characters (JavaScript's UTF-16 units) per token and 4800 characters
per image; from the last assistant message whose usage covers the transcript before it, that
usage counts instead of the messages it covers. `clamp_max_tokens_to_context` leaves room for
the input being counted higher than estimated (OpenRouter counts up to 12 % more).
"""

from __future__ import annotations

import math
from typing import Final

from mule.pi._content import TextContent, ThinkingContent, ToolCall, UserContent
from mule.pi._context import Context
from mule.pi._json import stringify
from mule.pi._messages import AssistantMessage, Message, SystemMessage, Usage
from mule.pi._model import Model
from mule.pi._transcript import TranscriptContext, normalize_context

CHARS_PER_TOKEN: Final = 3.5
ESTIMATED_IMAGE_CHARS: Final = 4800
CONTEXT_SAFETY_TOKENS: Final = 4096
CONTEXT_SAFETY_RATIO: Final = 0.15
MIN_OUTPUT_WITH_RATIO_MARGIN: Final = 32768


def _units(text: str) -> int:
    """Return JavaScript's `text.length` (UTF-16 code units)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def _content_tokens(content: str | tuple[UserContent, ...]) -> int:
    if isinstance(content, str):
        return _tokens(_units(content))
    chars = sum(
        _units(b.text) if isinstance(b, TextContent) else ESTIMATED_IMAGE_CHARS for b in content
    )
    return _tokens(chars)


def _system_text(message: SystemMessage) -> str:
    """pi-ai's `getSystemMessageText`: the content's text, then each kept section."""
    content = message.content
    text = content if isinstance(content, str) else "\n".join(b.text for b in content)
    sections = [v for v in (message.sections or {}).values() if v is not None]
    return "\n\n".join(p for p in (text, *sections) if p)


def _tools_tokens(tools: tuple[object, ...] | None) -> int:
    from mule.pi._codec import to_wire  # the codec imports this package's users

    return _tokens(_units(stringify(to_wire(list(tools))))) if tools else 0


def estimate_message_tokens(message: Message) -> int:
    """Return Pi's token estimate of one message (a system message: its text and tool changes)."""
    if isinstance(message, SystemMessage):
        return (
            _tokens(_units(_system_text(message)))
            + _tools_tokens(message.tools_added)
            + _tools_tokens(message.tools_removed)
        )
    if not isinstance(message, AssistantMessage):
        return _content_tokens(message.content)
    chars = 0
    for block in message.content:
        if isinstance(block, TextContent):
            chars += _units(block.text)
        elif isinstance(block, ThinkingContent):
            chars += _units(block.thinking)
        elif isinstance(block, ToolCall):
            chars += _units(block.name) + _units(stringify(block.arguments))
    return _tokens(chars)


def _context_tokens(usage: Usage) -> int:
    return usage.total_tokens or (usage.input + usage.output + usage.cache_read + usage.cache_write)


def estimate_context_tokens(context: Context | TranscriptContext) -> int:
    """Return Pi's estimate of the tokens `context` sends (its `estimateContextTokens`).

    A `Context`'s prompt and tools count as the leading system message pi-ai folds them into.
    """
    messages = normalize_context(context).messages
    tokens = [estimate_message_tokens(m) for m in messages]
    stamps = [m.timestamp for m in messages]
    usages: list[Usage | None] = [
        m.usage
        if isinstance(m, AssistantMessage)
        and m.stop_reason not in ("aborted", "error")
        and _context_tokens(m.usage) > 0
        else None
        for m in messages
    ]
    latest = -math.inf
    last: int | None = None
    for i, stamp in enumerate(stamps):
        if usages[i] is not None and stamp >= latest:
            last = i
        latest = max(latest, stamp)
    if last is None:
        return sum(tokens)
    usage = usages[last]
    assert usage is not None
    return _context_tokens(usage) + sum(tokens[last + 1 :])


def clamp_max_tokens_to_context(
    model: Model, context: Context | TranscriptContext, max_tokens: int
) -> int:
    """Fit `max_tokens` into the model's context window, as Pi 1.6.0 does (at least 1)."""
    if model.context_window <= 0:
        return max(1, max_tokens)
    used = estimate_context_tokens(context)
    margin = max(CONTEXT_SAFETY_TOKENS, math.ceil(used * CONTEXT_SAFETY_RATIO))
    room = model.context_window - used - margin
    if room < MIN_OUTPUT_WITH_RATIO_MARGIN:
        room = min(
            MIN_OUTPUT_WITH_RATIO_MARGIN, model.context_window - used - CONTEXT_SAFETY_TOKENS
        )
    return min(max_tokens, max(1, room))


__all__ = [
    "clamp_max_tokens_to_context",
    "estimate_context_tokens",
    "estimate_message_tokens",
]
