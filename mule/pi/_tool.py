"""Pi's tool declaration and a reference to one by name."""

from __future__ import annotations

from typing import final

from attrs import frozen

from mule._fields_repr import fields_repr
from mule.pi._json import JsonObject, JsonValue


@final
@frozen
class Tool:
    """A tool the model may call; `parameters` is a JSON-Schema object.

    Attributes:
        name: The name the model calls it by.
        description: What it does, for the model.
        parameters: The JSON Schema of its arguments (an object schema).
        constrained_sampling: Pi 1.6.0's `constrainedSampling` (`false`, or how a provider
            may constrain the call's arguments: `{type: "json_schema", strict}` or a
            grammar), kept as JSON; None when absent.

    """

    name: str
    description: str
    parameters: JsonObject
    constrained_sampling: JsonValue = None

    __repr__ = fields_repr


@final
@frozen
class ToolReference:
    """A tool named by a system message's `toolsRemoved`.

    Attributes:
        name: The tool's name.

    """

    name: str

    __repr__ = fields_repr


__all__ = ["Tool", "ToolReference"]
