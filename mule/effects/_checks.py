"""Input checks made before `run_start`: a bad input is a control error and emits nothing."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from returns.result import Failure, Result, Success

from mule.effects._errors import MuleError
from mule.effects._identity import MuleIdentity
from mule.effects._inputs import MulePortsInput
from mule.effects._state import RunConfig
from mule.effects._tools import ToolCompleted, ToolPending, ToolStarted
from mule.pi import (
    SUCCESS_STOP_REASONS,
    AssistantMessage,
    StreamOptions,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSchemaError,
    UserMessage,
)

if TYPE_CHECKING:
    from mule.pi import ToolValidator


def _control(message: str, cause: object | None = None) -> Failure[MuleError]:
    return Failure(MuleError("control", message, cause))


RUN_IDENTITY = MuleIdentity("run", "run:0")


def check_input(inp: MulePortsInput) -> Result[RunConfig, MuleError]:
    """Return the run's config, or a control error for input that violates Pi's or mule's rules."""
    checked = _check(inp)
    if isinstance(checked, Failure):
        return checked
    validators: dict[str, ToolValidator] = {}
    if inp.tools:
        from mule.pi import ToolValidator  # the gate loads with the first run that has tools

        for tool in inp.tools:
            try:
                validators[tool.descriptor.name] = ToolValidator.for_tool(tool.descriptor)
            except ToolSchemaError as exc:
                return _control(str(exc), exc)
    ports = inp.ports
    if inp.tools and ports.prepare_tool is None:
        return _control("tools are declared but the ports have no prepare_tool")
    return Success(
        RunConfig(
            run=RUN_IDENTITY,
            model=inp.model,
            system_prompt=inp.system_prompt,
            stream_options=inp.stream_options or StreamOptions(),
            tools={t.descriptor.name: t for t in inp.tools},
            validators=validators,
            descriptors=tuple(t.descriptor for t in inp.tools) or None,
            sequential=inp.tool_execution == "sequential",
            retry=inp.retry,
            resume=inp.resume,
            has_key_hook=ports.resolve_key is not None,
            has_steering=ports.steering is not None,
            has_follow_up=ports.follow_up is not None,
            has_stop=ports.should_stop is not None,
            has_retry_after=inp.retry_after_ms is not None,
            idle_timeout_ms=inp.model_stream_idle_timeout_ms,
            limits=inp.limits,
        )
    )


def _check(inp: MulePortsInput) -> Result[None, MuleError]:
    for i, m in enumerate(inp.messages):
        if type(m) not in (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage):
            return _control(f"messages[{i}] is not a Pi message: {type(m).__name__}")
    timeout = inp.model_stream_idle_timeout_ms
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        return _control(f"model_stream_idle_timeout_ms must be finite and > 0, got {timeout}")
    names: set[str] = set()
    for tool in inp.tools:
        name = tool.descriptor.name
        if name in names:
            return _control(f"duplicate tool name: {name}")
        names.add(name)
    if inp.tool_execution not in ("parallel", "sequential"):
        return _control(f"tool_execution must be parallel or sequential: {inp.tool_execution!r}")
    resume = inp.resume
    if resume is None:
        if all(type(m) is SystemMessage for m in inp.messages):
            # Pi's Agent: system messages alone leave nothing to answer.
            return _control("Cannot continue: no messages in context")
        if type(inp.messages[-1]) is AssistantMessage:
            return _control("Cannot continue from message role: assistant")
        return Success(None)
    message = resume.message
    given: object = message  # typed callers cannot get this wrong; untyped ones can
    if type(given) is not AssistantMessage:
        return _control("resume.message must be an assistant message")
    if message.stop_reason not in SUCCESS_STOP_REASONS:
        return _control(f"resume.message has stopReason {message.stop_reason}: nothing to resume")
    if inp.messages and type(inp.messages[-1]) is AssistantMessage:
        return _control("messages before resume.message must not end with an assistant message")
    call_ids = [b.id for b in message.content if type(b) is ToolCall]
    if len(set(call_ids)) != len(call_ids):
        return _control("resume.message has duplicate tool-call ids")
    for m in inp.messages:
        if type(m) is ToolResultMessage and m.tool_call_id in call_ids:
            return _control(f"messages already hold a result for resumed call {m.tool_call_id}")
    seen: set[str] = set()
    for cp in resume.tools:
        if type(cp) not in (ToolPending, ToolStarted, ToolCompleted):
            return _control(f"not a tool checkpoint: {type(cp).__name__}")
        cid = cp.call.id
        if cid not in call_ids:
            return _control(f"checkpoint for unknown tool call {cid}")
        if cid in seen:
            return _control(f"two checkpoints for tool call {cid}")
        seen.add(cid)
        if type(cp) is ToolCompleted and cp.message is not None and cp.message.tool_call_id != cid:
            return _control(f"checkpoint message for {cid} answers {cp.message.tool_call_id}")
    return Success(None)


__all__ = ["RUN_IDENTITY", "check_input"]
