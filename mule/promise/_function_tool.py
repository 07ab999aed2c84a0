"""`tool(fn)`: a `MuleTool` from a typed Python function (schema from its signature)."""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar, final, overload

import anyio
import anyio.to_thread

from mule.effects import (
    ExecutionMode,
    MuleToolExecutionPart,
    MuleToolRejection,
    MuleToolResult,
    Replay,
    ToolSignatureError,
    decode_as,
    schema_for,
    schema_with_default,
)
from mule.pi import AbortSignal, ImageContent, JsonObject, TextContent, Tool, ToolCall
from mule.promise._encode import ToolResultError, check_return, encode_result
from mule.promise._tool_context import ToolContext
from mule.promise._types import MuleTool, MuleToolPreparation, MuleToolPrepared

if TYPE_CHECKING:
    import docstring_parser

F = TypeVar("F", bound=Callable[..., Any])


def _is_signal(param: inspect.Parameter, hint: Any) -> bool:
    return hint is AbortSignal or (hint is inspect.Parameter.empty and param.name == "signal")


def as_result(value: object, tool: str = "tool") -> MuleToolResult:
    """Return a function's return value as a tool result.

    A `MuleToolResult` is kept as it is; a str is the text; text and image blocks (or a
    list of them) are the content; None is empty text. Anything else is encoded as JSON as
    arguments are decoded (`details` holds the JSON value, the text its JSON form):
    dataclasses, attrs classes, pydantic models, TypedDicts, enums and datetimes, and lists
    and dicts of them. A value of any other type raises `ToolResultError` naming `tool` and
    the type.
    """
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
    details = encode_result(value, tool)
    text = json.dumps(details, ensure_ascii=False)
    return MuleToolResult(content=(TextContent(text),), details=details)


def _captured(f: Callable[..., object], kwargs: dict[str, Any], raised: list[Exception]) -> object:
    """Call `f(**kwargs)` (in a worker thread); what it raises goes into `raised`.

    An exception raised through the worker thread's machinery, or returned through it, would
    be held by the worker's frames, which its own traceback holds (`f_back`): a cycle left for
    the garbage collector. The caller empties `raised`.
    """
    try:
        return f(**kwargs)
    except Exception as exc:
        raised.append(exc)
        return None


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

    The JSON schema comes from the signature (or `parameters`): primitives, `Literal`, enums,
    optional and union types, lists, tuples, dicts, `TypedDict`, dataclasses, attrs classes and
    pydantic models; defaults become JSON defaults. The description is the docstring's text,
    and each parameter's description comes from its Google, NumPy or Sphinx docstring entry
    (or `Annotated[T, "text"]`). Arguments are decoded from the gate-validated call into the
    annotated types. A first parameter annotated `ToolContext` receives the call, the run's
    signal and `progress`; one annotated `AbortSignal` receives the signal. Sync functions run
    in a worker thread. The return value becomes the result as `as_result` encodes it (JSON
    for dataclasses, attrs classes, pydantic models, enums, datetimes...); a return
    annotation no value of which could be encoded is refused here (`ToolSignatureError`), and
    a returned value that cannot be is a `ToolResultError`. An exception fails the run
    (`MuleError(tool)`) unless `errors_as_results`, which turns it into an `is_error` result
    the model sees.

    Examples:
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> add.descriptor.parameters["required"] == ["a", "b"]
    True

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


def _parsed(f: Callable[..., Any]) -> docstring_parser.Docstring:
    import docstring_parser  # with the first tool decorated, not with `import mule`

    return docstring_parser.parse(inspect.getdoc(f) or "")


def _doc(f: Callable[..., Any]) -> str:
    """Return the docstring's text without its parameter, return and raises sections."""
    parsed = _parsed(f)
    parts = [p for p in (parsed.short_description, parsed.long_description) if p]
    return "\n\n".join(parts).strip()


def _is_context(hint: Any) -> bool:
    return hint is ToolContext


@final
class _Update:
    """A progress report handed from the running function to the executor."""

    __slots__ = ("done", "value")

    def __init__(self, value: object) -> None:
        self.value = value
        self.done = anyio.Event()


@final
class _Outcome:
    """The function's return value, or the exception it raised."""

    __slots__ = ("error", "value")

    def __init__(self, value: object, error: Exception | None) -> None:
        self.value = value
        self.error = error


def _parameters_schema(
    f: Callable[..., Any], params: dict[str, Any], defaults: dict[str, Any]
) -> JsonObject:
    """Return the JSON schema of a function's tool parameters, described by its docstring."""
    described = {p.arg_name: p.description for p in _parsed(f).params if p.description}
    properties: dict[str, Any] = {}
    for key, hint in params.items():
        prop = schema_for(hint)
        if key in defaults:
            prop = schema_with_default(prop, defaults[key])
        text = described.get(key)
        if text and "description" not in prop:
            prop = {**prop, "description": " ".join(text.split())}
        properties[key] = prop
    out: dict[str, Any] = {"type": "object", "properties": properties}
    required = [k for k in params if k not in defaults]
    if required:
        out["required"] = required
    return out


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
    try:
        hints = typing.get_type_hints(f, include_extras=True)
    except NameError as exc:  # a string annotation naming what the function cannot see
        raise ToolSignatureError(
            f"{name}: cannot resolve an annotation ({exc}); define its type at module level"
        ) from exc
    params: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    signal_param: str | None = None
    context_param: str | None = None
    for index, p in enumerate(sig.parameters.values()):
        hint = hints.get(p.name, inspect.Parameter.empty)
        if _is_context(hint):
            if index != 0:
                raise ToolSignatureError(f"{name}: a ToolContext must be the first parameter")
            context_param = p.name
            continue
        if _is_signal(p, hint):
            signal_param = p.name
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolSignatureError(f"{name}: *args / **kwargs cannot be tool parameters")
        params[p.name] = hint
        if p.default is not inspect.Parameter.empty:
            defaults[p.name] = p.default
    check_return(hints.get("return", inspect.Parameter.empty), name)
    schema: JsonObject = (
        parameters if parameters is not None else _parameters_schema(f, params, defaults)
    )
    descriptor = Tool(name, description, schema)
    is_async = inspect.iscoroutinefunction(f)

    async def prepare(call: ToolCall, signal: AbortSignal) -> MuleToolPreparation:
        # The run's gate validated and coerced the arguments before prepare (once, as Pi does).
        kwargs: dict[str, Any] = {}
        try:
            for key, value in call.arguments.items():
                if key in params:
                    kwargs[key] = decode_as(value, params[key])
        except Exception as exc:
            return MuleToolRejection(f"Invalid arguments for tool {name}: {exc}")

        async def invoke() -> object:
            if is_async:
                return await f(**kwargs)
            raised: list[Exception] = []
            value = await anyio.to_thread.run_sync(functools.partial(_captured, f, kwargs, raised))
            if raised:
                error = raised.pop()
                try:
                    raise error
                finally:  # its traceback holds this frame: not the exception too (a cycle)
                    del error
            return value

        def failed(exc: Exception) -> MuleToolResult:
            if not errors_as_results:
                try:
                    raise exc
                finally:  # its traceback holds this frame: not the exception too (a cycle)
                    del exc
            text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return MuleToolResult(content=(TextContent(text),), is_error=True)

        def result_of(value: object) -> MuleToolResult:
            try:
                return as_result(value, name)
            except ToolResultError as exc:  # a tool failure, as if the function had raised it
                return failed(exc)

        async def execute(run_signal: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            if signal_param is not None:
                kwargs[signal_param] = run_signal
            try:
                value = await invoke()
            except Exception as exc:
                value = failed(exc)
            yield MuleToolExecutionPart("result", result_of(value))

        async def execute_with_context(
            run_signal: AbortSignal,
        ) -> AsyncIterator[MuleToolExecutionPart]:
            if signal_param is not None:
                kwargs[signal_param] = run_signal
            send, receive = anyio.create_memory_object_stream[_Update | _Outcome](0)

            async def progress(update: object) -> None:
                item = _Update(update)
                await send.send(item)
                await item.done.wait()  # the run emitted it (the executor asked for more)

            assert context_param is not None
            kwargs[context_param] = ToolContext(call, run_signal, progress)

            async def work() -> None:
                # Never raises (a raising child would cancel the consumer's scope while this
                # generator is suspended): the outcome travels as a value.
                try:
                    outcome = _Outcome(await invoke(), None)
                except Exception as exc:
                    outcome = _Outcome(None, exc)
                try:
                    await send.send(outcome)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass  # the executor was closed (an aborted run)
                finally:
                    send.close()

            done: _Outcome | None = None
            async with anyio.create_task_group() as tg, receive:
                tg.start_soon(work)
                async for item in receive:
                    if type(item) is _Update:
                        yield MuleToolExecutionPart("update", result_of(item.value))
                        item.done.set()
                    else:
                        assert type(item) is _Outcome
                        done = item
                        break
            if done is None:
                raise RuntimeError(f"tool {name} ended without a result")
            value, error = done.value, done.error
            del done  # a raised error's traceback holds this frame: not the error too (a cycle)
            if error is not None:
                try:
                    value = failed(error)
                finally:
                    del error
            yield MuleToolExecutionPart("result", result_of(value))

        return MuleToolPrepared(execute if context_param is None else execute_with_context)

    return MuleTool(
        descriptor=descriptor, prepare=prepare, replay=replay, execution_mode=execution_mode
    )


__all__ = [
    "ToolContext",
    "ToolResultError",
    "ToolSignatureError",
    "as_result",
    "schema_for",
    "tool",
]
