"""`tool(fn)`: a `MuleTool` from a typed Python function (schema from its signature)."""

from __future__ import annotations

import functools
import inspect
import json
import types
import typing
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar, overload

import anyio
import anyio.to_thread
import attrs
import cattrs

from mule.effects._tools import (
    ExecutionMode,
    MuleToolExecutionPart,
    MuleToolRejection,
    MuleToolResult,
    Replay,
)
from mule.pi import AbortSignal, ToolArgumentsError, ToolValidator
from mule.pi._content import ImageContent, TextContent, ToolCall
from mule.pi._context import Tool
from mule.pi._json import JsonObject, JsonValue
from mule.promise._types import MuleTool, MuleToolPreparation, MuleToolPrepared

F = TypeVar("F", bound=Callable[..., Any])
_DECODER = cattrs.Converter()
_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


class ToolSignatureError(TypeError):
    """A function's signature cannot be described as a JSON schema."""


def schema_for(annotation: Any) -> dict[str, Any]:
    """Return the JSON schema of a Python type annotation (the subset tools need)."""
    if annotation is Any or annotation is inspect.Parameter.empty or annotation is object:
        return {}
    if annotation is type(None) or annotation is None:
        return {"type": "null"}
    if annotation in _PRIMITIVES:
        return {"type": _PRIMITIVES[annotation]}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = schema_for(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**inner, "description": " ".join(notes)} if notes else inner
    if origin is Literal:
        values = list(args)
        kinds = {_PRIMITIVES.get(type(v)) for v in values}
        out: dict[str, Any] = {"enum": values}
        if len(kinds) == 1 and None not in kinds:
            out["type"] = kinds.pop()
        return out
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [schema_for(a) for a in args]}
    if origin in (list, Sequence, set, frozenset) or (origin is tuple and args[-1:] == (...,)):
        return {"type": "array", "items": schema_for(args[0]) if args else {}}
    if origin is tuple:
        return {
            "type": "array",
            "prefixItems": [schema_for(a) for a in args],
            "minItems": len(args),
        }
    if origin in (dict, Mapping):
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": schema_for(value)}
    if annotation in (list, tuple):
        return {"type": "array"}
    if annotation is dict:
        return {"type": "object"}
    if typing.is_typeddict(annotation):
        hints = typing.get_type_hints(annotation, include_extras=True)
        required = sorted(annotation.__required_keys__)
        return _object({k: schema_for(v) for k, v in hints.items()}, required)
    if attrs.has(annotation):
        hints = typing.get_type_hints(annotation, include_extras=True)
        props = {a.name: schema_for(hints[a.name]) for a in attrs.fields(annotation)}
        required = [a.name for a in attrs.fields(annotation) if a.default is attrs.NOTHING]
        return _object(props, required)
    raise ToolSignatureError(f"no JSON schema for {annotation!r}")


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def _is_signal(param: inspect.Parameter, hint: Any) -> bool:
    return hint is AbortSignal or (hint is inspect.Parameter.empty and param.name == "signal")


def as_result(value: object) -> MuleToolResult:
    """Return a function's return value as a tool result (str, blocks, or any JSON value)."""
    if isinstance(value, MuleToolResult):
        return value
    if isinstance(value, str):
        return MuleToolResult(content=(TextContent(value),))
    if isinstance(value, TextContent | ImageContent):
        return MuleToolResult(content=(value,))
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(b, TextContent | ImageContent) for b in value)
    ):
        return MuleToolResult(content=tuple(value))
    if value is None:
        return MuleToolResult(content=(TextContent(""),))
    text = json.dumps(value, ensure_ascii=False, default=str)
    details: JsonValue = json.loads(text)
    return MuleToolResult(content=(TextContent(text),), details=details)


@overload
def tool(fn: F) -> MuleTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: JsonObject | None = None,
    replay: Replay = "unsafe",
    execution_mode: ExecutionMode | None = None,
    errors_as_results: bool = False,
) -> Callable[[F], MuleTool]: ...


def tool(
    fn: F | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: JsonObject | None = None,
    replay: Replay = "unsafe",
    execution_mode: ExecutionMode | None = None,
    errors_as_results: bool = False,
) -> MuleTool | Callable[[F], MuleTool]:
    """Make a `MuleTool` from a typed function, sync or async.

    The JSON schema comes from the signature (or `parameters`), the description from the
    docstring. Arguments are decoded from the validated call into the annotated types; a
    parameter annotated `AbortSignal` receives the run's signal. Sync functions run in a worker
    thread. An exception fails the run (`MuleError(tool)`) unless `errors_as_results`, which
    turns it into an `is_error` result the model sees.

    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> add.descriptor.parameters["required"]
    ['a', 'b']
    """

    def build(f: F) -> MuleTool:
        return _build(
            f,
            name or f.__name__,
            description if description is not None else _doc(f),
            parameters,
            replay,
            execution_mode,
            errors_as_results,
        )

    return build(fn) if fn is not None else build


def _doc(f: Callable[..., Any]) -> str:
    doc = inspect.getdoc(f) or ""
    return doc.split("\n\n")[0].replace("\n", " ").strip()


def _build(
    f: Callable[..., Any],
    name: str,
    description: str,
    parameters: JsonObject | None,
    replay: Replay,
    execution_mode: ExecutionMode | None,
    errors_as_results: bool,
) -> MuleTool:
    sig = inspect.signature(f)
    hints = typing.get_type_hints(f, include_extras=True)
    params: dict[str, Any] = {}
    required: list[str] = []
    signal_param: str | None = None
    for p in sig.parameters.values():
        hint = hints.get(p.name, inspect.Parameter.empty)
        if _is_signal(p, hint):
            signal_param = p.name
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolSignatureError(f"{name}: *args / **kwargs cannot be tool parameters")
        params[p.name] = hint
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
    schema: JsonObject = (
        parameters
        if parameters is not None
        else _object({k: schema_for(v) for k, v in params.items()}, required)
    )
    descriptor = Tool(name, description, schema)
    is_async = inspect.iscoroutinefunction(f)

    async def prepare(call: ToolCall, signal: AbortSignal) -> MuleToolPreparation:
        try:
            args = ToolValidator.for_tool(descriptor).validate(call)
        except ToolArgumentsError as exc:
            return MuleToolRejection(exc.text)
        kwargs: dict[str, Any] = {}
        try:
            for key, value in args.items():
                if key in params:
                    hint = params[key]
                    kwargs[key] = (
                        value
                        if hint is inspect.Parameter.empty
                        else _DECODER.structure(value, hint)
                    )
        except Exception as exc:
            return MuleToolRejection(f"Invalid arguments for tool {name}: {exc}")

        async def execute(run_signal: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            if signal_param is not None:
                kwargs[signal_param] = run_signal
            try:
                if is_async:
                    value = await f(**kwargs)
                else:
                    value = await anyio.to_thread.run_sync(functools.partial(f, **kwargs))
            except Exception as exc:
                if not errors_as_results:
                    raise
                text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                value = MuleToolResult(content=(TextContent(text),), is_error=True)
            yield MuleToolExecutionPart("result", as_result(value))

        return MuleToolPrepared(execute)

    return MuleTool(
        descriptor=descriptor, prepare=prepare, replay=replay, execution_mode=execution_mode
    )


__all__ = ["ToolSignatureError", "as_result", "schema_for", "tool"]
