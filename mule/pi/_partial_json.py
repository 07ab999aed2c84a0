"""Lenient parsing of streamed tool-call arguments (Pi's parseStreamingJson)."""

from __future__ import annotations

import json
from typing import Any

import jiter

from mule.pi._json import JsonObject


def parse_streaming_json(text: str) -> JsonObject:
    """Parse possibly incomplete JSON arguments; always return an object (`{}` as fallback)."""
    if not text or text.isspace():
        return {}
    value: Any
    try:
        value = json.loads(text)
    except ValueError:
        try:
            # jiter (pydantic's parser) completes a truncated document, trailing strings included.
            value = jiter.from_json(text.encode(), partial_mode="trailing-strings")
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


__all__ = ["parse_streaming_json"]
