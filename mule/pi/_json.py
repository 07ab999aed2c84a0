"""JSON value types shared by Pi's data model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

# A JSON value as Python holds it after `json.loads`. Sequences and mappings are accepted so that
# immutable containers (tuples, MappingProxyType) are JSON values too.
JsonValue: TypeAlias = (
    bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
)
JsonObject: TypeAlias = Mapping[str, JsonValue]

__all__ = ["JsonObject", "JsonValue"]
