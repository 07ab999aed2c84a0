"""Pi values in the GenAI conventions' shapes: finish reasons, provider names, message parts.

Only `capture_content=True` calls the message functions: content never reaches a span otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from mule.effects import MuleToolResult
from mule.pi import (
    AssistantMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

# Pi's stop reasons as the conventions' finish reasons.
FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "toolUse": "tool_call",
    "error": "error",
    "aborted": "cancelled",
}

# Pi's provider ids where the conventions' well-known `gen_ai.provider.name` differs.
PROVIDER_NAMES = {
    "google": "gcp.gemini",
    "google-vertex": "gcp.vertex_ai",
    "google-gemini-cli": "gcp.gemini",
    "amazon-bedrock": "aws.bedrock",
    "azure-openai-responses": "azure.ai.openai",
    "mistral": "mistral_ai",
    "xai": "x_ai",
}

_STATUS = re.compile(r"\b([45]\d\d)\b")


def error_type(message: AssistantMessage) -> str:
    """Return a low-cardinality `error.type` for a failed attempt: its HTTP status when stated."""
    if message.stop_reason == "aborted":
        return "cancelled"
    found = _STATUS.search(message.error_message or "")
    return found.group(1) if found else "_OTHER"


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _part(block: object) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "content": block.text}
    if isinstance(block, ThinkingContent):
        return {"type": "reasoning", "content": block.thinking}
    if isinstance(block, ToolCall):
        return {
            "type": "tool_call",
            "id": block.id,
            "name": block.name,
            "arguments": block.arguments,
        }
    if isinstance(block, ImageContent):
        return {"type": "blob", "modality": "image", "mime_type": block.mime_type}
    return {"type": type(block).__name__}


def _text(blocks: Iterable[object]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, TextContent))


def message_json(message: Message) -> dict[str, Any]:
    """Return one Pi message in the conventions' `{role, parts}` shape (images by type only)."""
    if isinstance(message, UserMessage):
        content = message.content
        parts = (
            [{"type": "text", "content": content}]
            if isinstance(content, str)
            else [_part(b) for b in content]
        )
        return {"role": "user", "parts": parts}
    if isinstance(message, ToolResultMessage):
        response = {"type": "tool_call_response", "id": message.tool_call_id}
        return {"role": "tool", "parts": [{**response, "response": _text(message.content)}]}
    if isinstance(message, SystemMessage):
        content = message.content
        text = content if isinstance(content, str) else _text(content)
        return {"role": "system", "parts": [{"type": "text", "content": text}]}
    out: dict[str, Any] = {"role": "assistant", "parts": [_part(b) for b in message.content]}
    out["finish_reason"] = FINISH_REASONS.get(message.stop_reason, message.stop_reason)
    return out


def messages_attribute(messages: Iterable[Message]) -> str:
    """Return `gen_ai.input.messages` / `gen_ai.output.messages` as a JSON string."""
    return _dump([message_json(m) for m in messages])


def system_attribute(system_prompt: str) -> str:
    """Return `gen_ai.system_instructions` as a JSON string."""
    return _dump([{"type": "text", "content": system_prompt}])


def arguments_attribute(call: ToolCall) -> str:
    """Return `gen_ai.tool.call.arguments` as a JSON string."""
    return _dump(call.arguments)


def result_attribute(result: MuleToolResult) -> str:
    """Return `gen_ai.tool.call.result`: the result's text (and details, when it has them)."""
    text = _text(result.content)
    return text if result.details is None else _dump({"text": text, "details": result.details})


__all__ = [
    "FINISH_REASONS",
    "PROVIDER_NAMES",
    "arguments_attribute",
    "error_type",
    "message_json",
    "messages_attribute",
    "result_attribute",
    "system_attribute",
]
