"""Builders of scripted OpenAI Responses API streams: reasoning summary, message, function calls."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mule.testing._openai_chat import split_text


def responses_usage(
    input_tokens: int = 10, output_tokens: int = 5, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    """Return a Responses API usage object."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def function_call_item(
    call_id: str, item_id: str, name: str, arguments: Any, pieces: int = 1
) -> dict[str, Any]:
    """Describe one streamed Responses function call."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"call_id": call_id, "id": item_id, "name": name, "fragments": split_text(raw, pieces)}


def responses_stream(
    *,
    text: str | None = None,
    pieces: int = 1,
    summary: Sequence[str] = (),
    encrypted: str | None = None,
    calls: Sequence[Mapping[str, Any]] = (),
    status: str = "completed",
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-fake",
    rid: str = "resp_fake",
    message_id: str = "msg_fake",
    phase: str | None = None,
    terminal: bool = True,
    incomplete_reason: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Build a scripted Responses API stream: reasoning summary, message, function calls.

    `terminal=False` leaves out `response.completed` (a stream cut short).
    """
    seq = iter(range(1_000_000))
    events: list[dict[str, Any]] = []
    output: list[dict[str, Any]] = []

    def ev(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": next(seq), **fields})

    base = {"id": rid, "object": "response", "created_at": 1_700_000_000, "model": model}
    ev("response.created", response={**base, "status": "in_progress", "output": [], "usage": None})
    ev(
        "response.in_progress",
        response={**base, "status": "in_progress", "output": [], "usage": None},
    )
    index = 0
    if summary or encrypted is not None:
        rs_id = "rs_fake"
        ev(
            "response.output_item.added",
            output_index=index,
            item={"id": rs_id, "type": "reasoning", "summary": []},
        )
        done_parts = []
        for k, part in enumerate(summary):
            ev(
                "response.reasoning_summary_part.added",
                item_id=rs_id,
                output_index=index,
                summary_index=k,
                part={"type": "summary_text", "text": ""},
            )
            for d in split_text(part, pieces):
                ev(
                    "response.reasoning_summary_text.delta",
                    item_id=rs_id,
                    output_index=index,
                    summary_index=k,
                    delta=d,
                )
            ev(
                "response.reasoning_summary_text.done",
                item_id=rs_id,
                output_index=index,
                summary_index=k,
                text=part,
            )
            ev(
                "response.reasoning_summary_part.done",
                item_id=rs_id,
                output_index=index,
                summary_index=k,
                part={"type": "summary_text", "text": part},
            )
            done_parts.append({"type": "summary_text", "text": part})
        item: dict[str, Any] = {"id": rs_id, "type": "reasoning", "summary": done_parts}
        if encrypted is not None:
            item["encrypted_content"] = encrypted
        ev("response.output_item.done", output_index=index, item=item)
        output.append(item)
        index += 1
    if text is not None:
        msg: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }
        if phase is not None:
            msg["phase"] = phase
        ev("response.output_item.added", output_index=index, item=msg)
        empty = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        ev(
            "response.content_part.added",
            item_id=message_id,
            output_index=index,
            content_index=0,
            part=empty,
        )
        for d in split_text(text, pieces):
            ev(
                "response.output_text.delta",
                item_id=message_id,
                output_index=index,
                content_index=0,
                delta=d,
                logprobs=[],
            )
        full = {**empty, "text": text}
        ev(
            "response.output_text.done",
            item_id=message_id,
            output_index=index,
            content_index=0,
            text=text,
            logprobs=[],
        )
        ev(
            "response.content_part.done",
            item_id=message_id,
            output_index=index,
            content_index=0,
            part=full,
        )
        done_msg = {**msg, "status": "completed", "content": [full]}
        ev("response.output_item.done", output_index=index, item=done_msg)
        output.append(done_msg)
        index += 1
    for call in calls:
        added = {
            "id": call["id"],
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call["call_id"],
            "name": call["name"],
        }
        ev("response.output_item.added", output_index=index, item=added)
        for d in call["fragments"]:
            ev(
                "response.function_call_arguments.delta",
                item_id=call["id"],
                output_index=index,
                delta=d,
            )
        args = "".join(call["fragments"])
        ev(
            "response.function_call_arguments.done",
            item_id=call["id"],
            output_index=index,
            arguments=args,
        )
        done_call = {**added, "status": "completed", "arguments": args}
        ev("response.output_item.done", output_index=index, item=done_call)
        output.append(done_call)
        index += 1
    if terminal:
        final = {
            **base,
            "status": status,
            "output": output,
            "usage": dict(usage) if usage else None,
        }
        if incomplete_reason is not None:
            final["incomplete_details"] = {"reason": incomplete_reason}
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        if status == "failed":
            kind = "response.failed"
        ev(kind, response=final)
    return {"events": events, "named": True, "then": "end", **options}


def responses_text(text: str, pieces: int = 1, **kwargs: Any) -> dict[str, Any]:
    """Build a plain text Responses API stream."""
    return responses_stream(text=text, pieces=pieces, **kwargs)


__all__ = ["function_call_item", "responses_stream", "responses_text", "responses_usage"]
