"""The promise facade's own input types: plain async callbacks instead of Result-returning ones."""

from __future__ import annotations

import inspect
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeAlias, cast, final

from attrs import field, frozen

from mule._fields_repr import fields_repr
from mule.effects import (
    ExecutionMode,
    MuleCompletedTurn,
    MuleEvent,
    MuleRunSettings,
    MuleToolExecutionPart,
    MuleToolPrepared,
    MuleToolRejection,
    OutputT,
    Replay,
)
from mule.pi import (
    AbortSignal,
    AssistantMessage,
    Message,
    SystemMessage,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

MuleToolPreparation: TypeAlias = (
    MuleToolPrepared[AsyncIterator[MuleToolExecutionPart]] | MuleToolRejection
)


@final
@frozen(kw_only=True)
class MuleTool:
    """A Pi tool declaration paired with its async preparation door.

    Attributes:
        descriptor: Pi's tool descriptor: name, description, JSON schema of the arguments.
        prepare: Decodes and authorises one call: `MuleToolPrepared` or `MuleToolRejection`.
        replay: Whether a durable run may run it again after a crash.
        execution_mode: Force `"sequential"` or `"parallel"` for this tool (None: the run's
            mode).

    """

    descriptor: Tool
    prepare: Callable[[ToolCall, AbortSignal], Awaitable[MuleToolPreparation]]
    replay: Replay = "unsafe"
    execution_mode: ExecutionMode | None = None

    __repr__ = fields_repr


MulePromiseListener: TypeAlias = Callable[[MuleEvent, AbortSignal], Awaitable[None] | None]


def check_listener(listener: object) -> None:
    """Refuse at once a listener that cannot be called as `listener(event, signal)`.

    A `TypeError` says what a listener takes (a one-argument function is refused here, not
    inside the run). None (no listener) and callables whose signature cannot be read pass.
    """
    if listener is None or _plain_two_positional(listener):
        return
    if not callable(listener):
        raise TypeError(f"a listener must be callable, got {type(listener).__name__}")
    try:
        sig = inspect.signature(listener)
    except (TypeError, ValueError):  # a builtin or C callable: no signature to check
        return
    try:
        sig.bind(None, None)
    except TypeError:
        name = getattr(listener, "__qualname__", type(listener).__name__)
        raise TypeError(
            f"listener {name}{sig} cannot be called as listener(event, signal): a listener"
            " takes two positional arguments, the event and the run's AbortSignal"
            " (def show(event, signal): ...)"
        ) from None


def _plain_two_positional(fn: object) -> bool:
    """Whether `fn` is a plain function that takes `(event, signal)`, read from its code.

    The common listener, checked once per run: `inspect.signature` costs tens of
    microseconds. False means "not known here", and `inspect` decides (a function that
    declares another signature through `__wrapped__` or `__signature__` goes there too).
    """
    if type(fn) is not types.FunctionType or hasattr(fn, "__wrapped__"):
        return False
    if hasattr(fn, "__signature__"):
        return False
    code = fn.__code__
    positional = code.co_argcount
    required = positional - len(fn.__defaults__ or ())
    kw_defaults = fn.__kwdefaults__ or {}
    return (
        (positional >= 2 or bool(code.co_flags & inspect.CO_VARARGS))
        and required <= 2
        and code.co_kwonlyargcount == len(kw_defaults)
    )


_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage, SystemMessage)


def _messages(given: str | Message | Iterable[Message]) -> tuple[Message, ...]:
    """`MuleRunInput.messages`: a str is one user message; otherwise mule.pi messages."""
    value: object = given  # checked at run time: callers may not be type-checked
    if isinstance(value, str):
        return (UserMessage(value),)
    if isinstance(value, _MESSAGE_TYPES):
        return (value,)
    if isinstance(value, Iterable) and not isinstance(value, dict | bytes):
        items: tuple[object, ...] = tuple(value)
        for i, m in enumerate(items):
            if not isinstance(m, _MESSAGE_TYPES):
                hint = (
                    " (a dict is not a message: use mule.pi.UserMessage(text))"
                    if isinstance(m, dict)
                    else ""
                )
                raise TypeError(
                    f"messages[{i}] has type {type(m).__name__}, not a message: messages takes a"
                    " str (one user message) or a sequence of mule.pi.UserMessage,"
                    f" AssistantMessage, ToolResultMessage and SystemMessage{hint}"
                )
        return cast(tuple[Message, ...], items)
    raise TypeError(
        f"messages has type {type(value).__name__}: it takes a str (one user message) or a"
        " sequence of mule.pi.UserMessage, AssistantMessage, ToolResultMessage and SystemMessage"
    )


def _tools(given: Iterable[MuleTool | Callable[..., Any]]) -> tuple[MuleTool, ...]:
    """`MuleRunInput.tools`: `MuleTool`s; a plain function is made one as `@mule.tool` does."""
    value: object = given  # checked at run time: callers may not be type-checked
    if isinstance(value, MuleTool) or not isinstance(value, Iterable) or isinstance(value, str):
        raise TypeError(
            f"tools has type {type(value).__name__}: it takes a sequence of tools"
            " (tools=[f], with functions decorated with @mule.tool, mule.tools, MCP tools)"
        )
    from mule.promise._function_tool import tool  # it imports this module

    out: list[MuleTool] = []
    for i, t in enumerate(value):
        if isinstance(t, MuleTool):
            out.append(t)
        elif inspect.isfunction(t) or inspect.ismethod(t):
            out.append(tool(t))
        else:
            raise TypeError(
                f"tools[{i}] has type {type(t).__name__}, not a tool: pass functions decorated"
                " with @mule.tool (plain functions are wrapped as @mule.tool does),"
                " mule.tools or MCP tools"
            )
    return tuple(out)


@final
@frozen(kw_only=True)
class MuleRunInput(MuleRunSettings[OutputT]):
    """Everything one run needs, with plain async callbacks.

    Checked when built: `messages` may be a str (one user message), one `mule.pi` message
    or a sequence of them, and a plain function in `tools` is made a tool as `@mule.tool` makes
    it; anything else is a `TypeError` at once.

    Attributes:
        messages: The conversation so far (a str is one `UserMessage`); the run continues
            from it.
        tools: The tools the model may call (`@mule.tool`, `mule.tools`, MCP...; a plain
            function is wrapped as `@mule.tool` would).
        resolve_api_key: Returns the API key for a provider before each model call.
        get_steering_messages: Pi's steering poll (messages injected before the next model
            call).
        get_follow_up_messages: Pi's follow-up poll (messages that start another turn).
        should_stop_after_turn: The retained stop hook: asked after each completed turn's tool
            results, before its `turn_end` (where Pi 1.6.0 calls finishTurn); True ends the
            run. Not asked for an error or aborted turn (the run fails there).

    """

    messages: tuple[Message, ...] = field(converter=_messages)
    tools: Sequence[MuleTool] = field(default=(), converter=_tools)
    resolve_api_key: Callable[[str, AbortSignal], Awaitable[str | None]] | None = None
    get_steering_messages: Callable[[AbortSignal], Awaitable[Sequence[Message]]] | None = None
    get_follow_up_messages: Callable[[AbortSignal], Awaitable[Sequence[Message]]] | None = None
    should_stop_after_turn: Callable[[MuleCompletedTurn, AbortSignal], Awaitable[bool]] | None = (
        None
    )

    __repr__ = fields_repr


__all__ = [
    "MulePromiseListener",
    "MuleRunInput",
    "MuleTool",
    "MuleToolPreparation",
    "MuleToolPrepared",
    "check_listener",
]
