"""Run settings: the plain values a run is configured with, shared by every root."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeAlias

from attrs import frozen

from mule._fields_repr import fields_repr
from mule.effects._limits import RunLimits
from mule.effects._outcome import OutputT
from mule.effects._resume import MuleResume
from mule.effects._tools import ExecutionMode
from mule.pi import (
    AssistantMessage,
    AssistantMessageEventStream,
    Message,
    Model,
    RetryPolicy,
    StreamOptions,
    TranscriptContext,
)

MuleStreamFunction: TypeAlias = Callable[
    [Model, TranscriptContext, StreamOptions],
    AssistantMessageEventStream | Awaitable[AssistantMessageEventStream],
]


@frozen(kw_only=True)
class MuleRunSettings(Generic[OutputT]):
    """Run inputs shared by the Result (effects) and the promise roots.

    Attributes:
        model: The model to call (`mule.pi.models.get_model(...)`, or your own `Model`).
        system_prompt: The system prompt. Unless `messages` opens with a system message, the
            run's transcript opens with one holding it and the tools' declarations, as Pi's
            Agent makes it (`create_initial_system_message`).
        messages: The conversation so far (system messages included); the run continues
            from it.
        stream: The model stream function; None: the real providers
            (`mule.pi.stream_simple`).
        resume: A recovered turn to continue from (durable runs).
        stream_options: Options for every model call (API key, temperature, max tokens...).
        model_stream_idle_timeout_ms: Fail an attempt whose stream is silent this long
            (retryable).
        tool_execution: Run a batch's tool calls `"parallel"` (default) or `"sequential"`.
        retry: Retries of failed model attempts (None: no retries).
        retry_after_ms: The server's retry-after for a failed attempt, in ms, if it gave
            one.
        limits: Bounds on turns, output tokens and cost (`RunLimits`), checked after each
            turn.
        output_type: Structured output: the type of the final answer (a dataclass, attrs
            class, `TypedDict`, primitive, or pydantic model). The model returns it by calling
            a terminating `final_result` tool whose schema is the type's; the decoded value is
            `MuleRunOutcome.output`. `str` is the answer as text: no output tool, the output
            is the final assistant message's text.
        output_retries: How many invalid outputs (or text answers without the tool) go back
            to the model before the run fails with `MuleError(tool)`.

    """

    model: Model
    system_prompt: str
    messages: tuple[Message, ...]
    stream: MuleStreamFunction | None = None
    resume: MuleResume | None = None
    stream_options: StreamOptions | None = None
    model_stream_idle_timeout_ms: float | None = None
    tool_execution: ExecutionMode = "parallel"
    retry: RetryPolicy | None = None
    retry_after_ms: Callable[[AssistantMessage], float | None] | None = None
    limits: RunLimits | None = None
    output_type: type[OutputT] | None = None
    output_retries: int = 1

    __repr__ = fields_repr


__all__ = ["MuleRunSettings", "MuleStreamFunction"]
