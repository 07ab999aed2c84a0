"""The core's run input: settings plus Result-returning callbacks, and the listener type."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias, final

from attrs import frozen
from returns.result import Result

from mule.effects._errors import MuleError
from mule.effects._events import MuleEvent
from mule.effects._outcome import MuleCompletedTurn
from mule.effects._settings import MuleRunSettings
from mule.effects._tools import MuleTool
from mule.pi import AbortSignal
from mule.pi._messages import Message

Listener: TypeAlias = Callable[[MuleEvent, AbortSignal], Awaitable[Result[None, MuleError]]]


@final
@frozen(kw_only=True)
class MuleRunInput(MuleRunSettings):
    """Everything one run needs, with Result-returning callbacks (the core's form)."""

    tools: tuple[MuleTool, ...] = ()
    resolve_api_key: (
        Callable[[str, AbortSignal], Awaitable[Result[str | None, MuleError]]] | None
    ) = None
    get_steering_messages: (
        Callable[[AbortSignal], Awaitable[Result[tuple[Message, ...], MuleError]]] | None
    ) = None
    get_follow_up_messages: (
        Callable[[AbortSignal], Awaitable[Result[tuple[Message, ...], MuleError]]] | None
    ) = None
    should_stop_after_turn: (
        Callable[[MuleCompletedTurn, AbortSignal], Awaitable[Result[bool, MuleError]]] | None
    ) = None


__all__ = ["Listener", "MuleRunInput"]
