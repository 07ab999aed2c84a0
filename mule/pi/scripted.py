"""Scripted models (like pi-ai's faux provider) for tests, demos and examples.

>>> from mule.pi.scripted import ScriptedModel, reply
>>> model = ScriptedModel([reply("Hello!")])
"""

from mule.pi._scripted import (
    Block,
    Call,
    Reply,
    ScriptedModel,
    Text,
    Thinking,
    error_reply,
    replies,
    reply,
    scripted_stream,
)

__all__ = [
    "Block",
    "Call",
    "Reply",
    "ScriptedModel",
    "Text",
    "Thinking",
    "error_reply",
    "replies",
    "reply",
    "scripted_stream",
]
