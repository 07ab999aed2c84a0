"""A scriptable fake of Gemini's `streamGenerateContent?alt=sse` on 127.0.0.1.

Uses the server core of `mule.testing.fake_anthropic` (real HTTP, chunked bodies that can pause,
stall or drop). The builders write `GenerateContentResponse` chunks as the Gemini API documents
them: `data: {...}` lines holding candidates[0].content.parts, finishReason and usageMetadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from mule.testing.fake_anthropic import Drop, Pause, Reply, Stall, Step, serve_script

Chunk: TypeAlias = dict[str, Any]


def text(value: str, *, thought: bool = False, signature: str | None = None) -> dict[str, Any]:
    """Build a text part (a thought summary when `thought`), optionally signed."""
    part: dict[str, Any] = {"text": value}
    if thought:
        part["thought"] = True
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def call(
    name: str, args: dict[str, Any], *, call_id: str | None = None, signature: str | None = None
) -> dict[str, Any]:
    """Build a functionCall part carrying the whole arguments object."""
    function: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        function["id"] = call_id
    part: dict[str, Any] = {"functionCall": function}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def usage(
    prompt: int, candidates: int, *, thoughts: int = 0, cached: int = 0, total: int | None = None
) -> dict[str, Any]:
    """Build usageMetadata; the total defaults to prompt + candidates + thoughts."""
    meta: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thoughts if total is None else total,
    }
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    if cached:
        meta["cachedContentTokenCount"] = cached
    return meta


def chunk(
    *parts: dict[str, Any],
    finish: str | None = None,
    usage_metadata: dict[str, Any] | None = None,
    response_id: str = "a1b2c3",
    model_version: str = "gemini-2.5-flash",
) -> Chunk:
    """Build one streamed GenerateContentResponse."""
    candidate: dict[str, Any] = {"index": 0}
    if parts:
        candidate["content"] = {"role": "model", "parts": list(parts)}
    if finish is not None:
        candidate["finishReason"] = finish
    out: Chunk = {
        "candidates": [candidate],
        "modelVersion": model_version,
        "responseId": response_id,
    }
    if usage_metadata is not None:
        out["usageMetadata"] = usage_metadata
    return out


def frame(data: Chunk | str) -> bytes:
    """Encode one SSE event as Gemini sends it (a `data:` line, CRLF-terminated)."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {payload}\r\n\r\n".encode()


def sse_reply(chunks: Iterable[Chunk | str | Step]) -> Reply:
    """Build a 200 event-stream reply; dicts and strings are framed, control steps kept."""
    steps: list[Step] = [frame(item) if isinstance(item, dict | str) else item for item in chunks]
    return Reply(200, (("content-type", "text/event-stream"),), tuple(steps))


_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def error_reply(status: int, message: str, *, headers: Sequence[tuple[str, str]] = ()) -> Reply:
    """Build a JSON error response shaped like Google's (`{"error": {code, message, status}}`)."""
    body = {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}
    return Reply(
        status,
        (("content-type", "application/json; charset=UTF-8"), *headers),
        (json.dumps(body).encode(),),
    )


__all__ = [
    "Chunk",
    "Drop",
    "Pause",
    "Reply",
    "Stall",
    "Step",
    "call",
    "chunk",
    "error_reply",
    "frame",
    "serve_script",
    "sse_reply",
    "text",
    "usage",
]
