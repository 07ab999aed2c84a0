"""Shared builders for the core conformance tests: models, tools, recorders, event projections.

Scenarios are written against `run_root(root, inp, ...)`, so the same test drives the Result
root (`mule.effects.run`, through `Ports` built from the kit's Result callbacks) and the
promise facade. `KitInput` and `KitTool` hold Result-returning callbacks, the core's form of
each port, keyed as the facade's input is.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import Any, Literal, TypeAlias, TypeVar

import anyio
from attrs import define, field, fields, frozen
from returns.result import Failure, Result, Success

from mule.effects import (
    ExecutionMode,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelPrompt,
    MuleCallPreparation,
    MuleCompletedTurn,
    MuleError,
    MuleEvent,
    MuleIdentity,
    MulePortsInput,
    MuleRunOutcome,
    MuleRunSettings,
    MuleToolDeclaration,
    MuleToolExecutionPart,
    MuleToolPrepared,
    MuleToolRejection,
    MuleToolResult,
    Ports,
    Replay,
    RunEnd,
    RunStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from mule.effects import run as effects_run
from mule.pi import (
    ZERO_USAGE,
    AbortSignal,
    AssistantMessage,
    JsonObject,
    JsonValue,
    Message,
    Model,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from mule.pi.scripted import Reply, ScriptedModel
from mule.promise import MuleRunFailed
from mule.promise import MuleRunInput as PromiseInput
from mule.promise import MuleTool as PromiseTool
from mule.promise import MuleToolPreparation as PromisePreparation
from mule.promise import MuleToolPrepared as PromisePrepared
from mule.promise import run as promise_run

E = TypeVar("E")
Root: TypeAlias = Literal["effects", "promise"]
ROOTS: tuple[Root, ...] = ("effects", "promise")

MODEL = Model(
    id="scripted-1", name="Scripted", api="scripted-api", provider="scripted", base_url=""
)
SYSTEM = "You are a test."
ANY_OBJECT: JsonObject = {"type": "object"}


def user(text: str, at: int | None = None) -> UserMessage:
    """Return a user message with a plain-string content."""
    return UserMessage(text, int(time.time() * 1000) if at is None else at)


def assistant(*blocks: TextContent | ToolCall, stop: str | None = None) -> AssistantMessage:
    """Return a committed assistant message (toolUse when it holds calls, else stop)."""
    has_calls = any(type(b) is ToolCall for b in blocks)
    reason = stop or ("toolUse" if has_calls else "stop")
    return AssistantMessage(
        content=tuple(blocks),
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        usage=ZERO_USAGE,
        stop_reason=reason,  # type: ignore[arg-type]
        timestamp=1,
    )


def text_of(message: Message | MuleToolResult) -> str:
    """Return the concatenated text content of a message or tool result."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if type(b) is TextContent)


def model_of(*replies: Reply) -> ScriptedModel:
    """Return a scripted stream function that plays `replies` in order."""
    return ScriptedModel(list(replies))


@frozen(kw_only=True)
class KitTool:
    """A tool declaration with a Result-returning prepare (the core's port, per tool)."""

    descriptor: Tool
    prepare: Callable[[ToolCall, AbortSignal], Awaitable[Result[MuleCallPreparation, MuleError]]]
    replay: Replay = "unsafe"
    execution_mode: ExecutionMode | None = None


@frozen(kw_only=True)
class KitInput(MuleRunSettings):
    """Settings plus Result-returning callbacks, named as the facade's input names them."""

    tools: tuple[KitTool, ...] = ()
    resolve_api_key: Callable[..., Awaitable[Result[str | None, MuleError]]] | None = None
    get_steering_messages: (
        Callable[..., Awaitable[Result[tuple[Message, ...], MuleError]]] | None
    ) = None
    get_follow_up_messages: (
        Callable[..., Awaitable[Result[tuple[Message, ...], MuleError]]] | None
    ) = None
    should_stop_after_turn: Callable[..., Awaitable[Result[bool, MuleError]]] | None = None


def to_core(inp: KitInput, listener: Recorder | None = None) -> MulePortsInput:
    """Return the core's input: the kit's callbacks are already ports; tools by name."""
    settings = {a.name: getattr(inp, a.name) for a in fields(MuleRunSettings)}
    by_name = {t.descriptor.name: t for t in inp.tools}

    async def prepare(
        call: ToolCall, signal: AbortSignal
    ) -> Result[MuleCallPreparation, MuleError]:
        return await by_name[call.name].prepare(call, signal)

    return MulePortsInput(
        **settings,
        tools=tuple(
            MuleToolDeclaration(
                descriptor=t.descriptor, replay=t.replay, execution_mode=t.execution_mode
            )
            for t in inp.tools
        ),
        ports=Ports(
            emit=listener,
            resolve_key=inp.resolve_api_key,
            steering=inp.get_steering_messages,
            follow_up=inp.get_follow_up_messages,
            should_stop=inp.should_stop_after_turn,
            prepare_tool=prepare if inp.tools else None,
        ),
    )


def make_input(
    model: ScriptedModel | None = None,
    *,
    messages: Sequence[Message] | None = None,
    **kwargs: Any,
) -> KitInput:
    """Return a run input with the test model, system prompt and one user message unless given."""
    given: dict[str, object] = {
        "model": MODEL,
        "system_prompt": SYSTEM,
        "messages": tuple(messages) if messages is not None else (user("go"),),
        "stream": model,
    }
    given.update(kwargs)
    return KitInput(**given)  # type: ignore[arg-type]


# -- recording ----------------------------------------------------------------------------------

FailMode: TypeAlias = Literal["failure", "raise"]


@define
class Recorder:
    """A listener that records every event (and whether the signal was aborted at that moment).

    `fail_on` names an event type at which the listener fails (returning a Failure or raising).
    """

    events: list[MuleEvent] = field(factory=list)
    aborted_at: list[bool] = field(factory=list)
    times: list[float] = field(factory=list)
    on_event: Callable[[MuleEvent], None] | None = None
    fail_on: str | None = None
    fail_mode: FailMode = "failure"
    delay_s: float = 0.0
    error: RuntimeError = field(factory=lambda: RuntimeError("listener broke"))

    async def __call__(self, event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
        """Record `event`; fail when it is the `fail_on` type."""
        self.events.append(event)
        self.aborted_at.append(signal.aborted)
        self.times.append(at_ms())
        if self.on_event is not None:
            self.on_event(event)
        if self.delay_s:
            await anyio.sleep(self.delay_s)
        if event.type == self.fail_on:
            if self.fail_mode == "raise":
                raise self.error
            return Failure(MuleError("listener", "listener refused", self.error))
        return Success(None)


@define
class Ran:
    """What a run did: its events and its result, normalised across roots."""

    events: list[MuleEvent]
    outcome: MuleRunOutcome | None
    error: MuleError | None

    @property
    def ok(self) -> MuleRunOutcome:
        """The outcome; fails the test when the run failed."""
        assert self.error is None, f"run failed: {self.error!r}"
        assert self.outcome is not None
        return self.outcome

    @property
    def failed(self) -> MuleError:
        """The error; fails the test when the run did not fail."""
        assert self.error is not None, f"run did not fail: {self.outcome!r}"
        return self.error

    @property
    def proj(self) -> list[str]:
        """The compact projection of the events."""
        return project(self.events)


async def run_root(
    root: Root,
    inp: KitInput,
    listener: Recorder | None = None,
    signal: AbortSignal | None = None,
) -> Ran:
    """Run `inp` on `root` and return its events and result."""
    rec = listener if listener is not None else Recorder()
    if root == "effects":
        res = await effects_run(to_core(inp, rec), signal)
        if isinstance(res, Success):
            return Ran(rec.events, res.unwrap(), None)
        assert isinstance(res, Failure)
        return Ran(rec.events, None, res.failure())
    if root == "promise":
        try:
            out = await promise_run(to_promise(inp), _promise_listener(rec), signal)
        except MuleRunFailed as exc:
            return Ran(rec.events, None, exc.error)
        return Ran(rec.events, out, None)
    raise AssertionError(f"unknown root {root!r}")


# -- the promise root: the same input, as a promise-style caller would write it -----------------


def _unwrap(result: Result[E, MuleError]) -> E:
    """Return a Result's value, or raise the facade's way of failing with that exact error."""
    if isinstance(result, Failure):
        raise MuleRunFailed(result.failure())
    return result.unwrap()


def _promise_tool(core: KitTool) -> PromiseTool:
    async def prepare(call: ToolCall, signal: AbortSignal) -> PromisePreparation:
        prep = _unwrap(await core.prepare(call, signal))
        if isinstance(prep, MuleToolRejection):
            return prep
        execute = prep.execute

        async def parts(signal: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            async with aclosing(execute(signal)) as results:  # type: ignore[type-var]
                async for result in results:
                    yield _unwrap(result)

        return PromisePrepared(parts)

    return PromiseTool(
        descriptor=core.descriptor,
        prepare=prepare,
        replay=core.replay,
        execution_mode=core.execution_mode,
    )


def _plain(fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
    if fn is None:
        return None
    hook = fn

    async def plain(*args: Any) -> Any:
        return _unwrap(await hook(*args))

    return plain


def to_promise(inp: KitInput) -> PromiseInput:
    """Return the promise-facade input equivalent to a core input."""
    settings = {a.name: getattr(inp, a.name) for a in fields(MuleRunSettings)}
    return PromiseInput(
        **settings,
        tools=[_promise_tool(t) for t in inp.tools],
        resolve_api_key=_plain(inp.resolve_api_key),
        get_steering_messages=_plain(inp.get_steering_messages),
        get_follow_up_messages=_plain(inp.get_follow_up_messages),
        should_stop_after_turn=_plain(inp.should_stop_after_turn),
    )


def _promise_listener(rec: Recorder) -> Callable[[MuleEvent, AbortSignal], Awaitable[None]]:
    async def listener(event: MuleEvent, signal: AbortSignal) -> None:
        _unwrap(await rec(event, signal))

    return listener


# -- projections --------------------------------------------------------------------------------


def _message_label(value: Message) -> str:
    if type(value) is UserMessage:
        return f"u:{text_of(value)}"
    if type(value) is ToolResultMessage:
        return f"r:{value.tool_call_id}" + ("!" if value.is_error else "")
    return ""


def _result_label(call: ToolCall, result: MuleToolResult) -> str:
    return call.id + ("!" if result.is_error else "")


def project(events: Sequence[MuleEvent]) -> list[str]:
    """Project events onto a compact sequence.

    RS, TS, MP(n), MS/ME (assistant; ME carries the stop reason), MS(u:text)/ME(u:text)
    (injected), MS(r:id)/ME(r:id) (tool results, `!` = isError), MU, XS(id), XU(id), XE(id)
    (`!` = isError), TE(id,...) (the result ids), RE(status).
    """
    out: list[str] = []
    for e in events:
        if type(e) is RunStart:
            out.append("RS")
        elif type(e) is TurnStart:
            out.append("TS")
        elif type(e) is ModelPrompt:
            out.append(f"MP({e.attempt})")
        elif type(e) is MessageStart:
            label = _message_label(e.value)
            out.append(f"MS({label})" if label else "MS")
        elif type(e) is MessageUpdate:
            out.append("MU")
        elif type(e) is MessageEnd:
            v = e.value
            label = _message_label(v)
            if type(v) is AssistantMessage:
                label = v.stop_reason
            out.append(f"ME({label})")
        elif type(e) is ToolExecutionStart:
            out.append(f"XS({e.call.id})")
        elif type(e) is ToolExecutionUpdate:
            out.append(f"XU({e.call.id})")
        elif type(e) is ToolExecutionEnd:
            out.append(f"XE({_result_label(e.call, e.result)})")
        elif type(e) is TurnEnd:
            out.append("TE(" + ",".join(r.tool_call_id for r in e.tool_results) + ")")
        elif type(e) is RunEnd:
            out.append(f"RE({e.outcome})")
        else:  # pragma: no cover - a new event type
            raise AssertionError(f"unknown event {e!r}")
    return out


def of_type(events: Sequence[object], kind: type[E]) -> list[E]:
    """Return the events of one class, in order."""
    return [e for e in events if isinstance(e, kind)]


def identities(events: Sequence[MuleEvent]) -> list[MuleIdentity]:
    """Every identity named by an event (with repeats)."""
    found: list[MuleIdentity] = []
    for e in events:
        for name in ("run", "turn", "message", "tool_call", "terminal"):
            ident = getattr(e, name, None)
            if isinstance(ident, MuleIdentity):
                found.append(ident)
    return found


# -- tools --------------------------------------------------------------------------------------


@define
class Journal:
    """What tools did, in order: ("prepare", id), ("execute", id), ("done", id), ..."""

    entries: list[tuple[str, str]] = field(factory=list)
    signals: dict[str, AbortSignal] = field(factory=dict)
    calls: dict[str, ToolCall] = field(factory=dict)
    changed: anyio.Event = field(factory=anyio.Event)

    def add(self, what: str, who: str) -> None:
        """Append one entry."""
        self.entries.append((what, who))
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_for(self, what: str, who: str) -> None:
        """Return once the entry (what, who) has been added."""
        while (what, who) not in self.entries:
            await self.changed.wait()

    def of(self, what: str) -> list[str]:
        """Return the call ids of one kind of entry, in order."""
        return [who for w, who in self.entries if w == what]


class ToolBoom(Exception):
    """Raised by test tools on purpose."""


def tool(
    name: str,
    journal: Journal | None = None,
    *,
    params: JsonObject | None = None,
    delay_ms: float = 0.0,
    updates: Sequence[str] = (),
    text: str | None = None,
    is_error: bool = False,
    details: JsonValue = None,
    usage: Usage | None = None,
    terminate: bool | None = None,
    reject: str | None = None,
    reject_terminate: bool | None = None,
    prepare_raises: Exception | None = None,
    prepare_fails: MuleError | None = None,
    execute_raises: Exception | None = None,
    no_result: bool = False,
    wait_for_abort: bool = False,
    replay: Replay = "unsafe",
    execution_mode: ExecutionMode | None = None,
) -> KitTool:
    """Return a test tool; its default result text is `<name>:<call id>`."""
    log = journal if journal is not None else Journal()

    async def prepare(
        call: ToolCall, signal: AbortSignal
    ) -> Result[MuleCallPreparation, MuleError]:
        log.add("prepare", call.id)
        log.calls[call.id] = call
        if prepare_raises is not None:
            raise prepare_raises
        if prepare_fails is not None:
            return Failure(prepare_fails)
        if reject is not None:
            return Success(MuleToolRejection(reject, reject_terminate))

        async def execute(
            run_signal: AbortSignal,
        ) -> AsyncIterator[Result[MuleToolExecutionPart, MuleError]]:
            log.add("execute", call.id)
            log.signals[call.id] = run_signal
            run_signal.add_listener(lambda _s: log.add("saw-abort", call.id))
            try:
                if wait_for_abort:
                    await run_signal.wait()
                    await anyio.sleep_forever()
                for u in updates:
                    yield Success(
                        MuleToolExecutionPart("update", MuleToolResult(content=(TextContent(u),)))
                    )
                if delay_ms:
                    await anyio.sleep(delay_ms / 1000)
                if execute_raises is not None:
                    raise execute_raises
                if no_result:
                    return
                result = MuleToolResult(
                    content=(TextContent(text if text is not None else f"{name}:{call.id}"),),
                    is_error=is_error,
                    details=details,
                    usage=usage,
                    terminate=terminate,
                )
                log.add("done", call.id)
                yield Success(MuleToolExecutionPart("result", result))
                log.add("pulled-after-result", call.id)  # must never happen
            finally:
                log.add("closed", call.id)

        return Success(MuleToolPrepared(execute))

    return KitTool(
        descriptor=Tool(name, f"the {name} tool", params if params is not None else ANY_OBJECT),
        prepare=prepare,
        replay=replay,
        execution_mode=execution_mode,
    )


# -- hooks --------------------------------------------------------------------------------------


@define
class Queue:
    """A steering / follow-up hook answering from a list of batches (then nothing)."""

    batches: list[tuple[Message, ...]] = field(factory=list)
    calls: int = 0
    raises: Exception | None = None

    async def __call__(self, signal: AbortSignal) -> Result[tuple[Message, ...], MuleError]:
        """Return the next batch."""
        self.calls += 1
        if self.raises is not None:
            raise self.raises
        return Success(self.batches.pop(0) if self.batches else ())


@define
class StopHook:
    """A should-stop-after-turn hook that records what it was shown."""

    answers: list[bool] = field(factory=list)
    seen: list[MuleCompletedTurn] = field(factory=list)

    async def __call__(
        self, turn: MuleCompletedTurn, signal: AbortSignal
    ) -> Result[bool, MuleError]:
        """Record `turn`; answer the next planned value (default: continue)."""
        self.seen.append(turn)
        return Success(self.answers.pop(0) if self.answers else False)


@define
class KeyHook:
    """A resolve-api-key hook that records each call."""

    answer: str | None = None
    seen: list[str] = field(factory=list)
    raises: Exception | None = None

    async def __call__(self, provider: str, signal: AbortSignal) -> Result[str | None, MuleError]:
        """Record the provider; answer the planned key."""
        self.seen.append(provider)
        if self.raises is not None:
            raise self.raises
        return Success(self.answer)


def at_ms() -> float:
    """Return a monotonic clock reading in milliseconds, for lower-bound timing checks."""
    return time.monotonic() * 1000


__all__ = [
    "ANY_OBJECT",
    "MODEL",
    "ROOTS",
    "SYSTEM",
    "Journal",
    "KeyHook",
    "Queue",
    "Ran",
    "Recorder",
    "Root",
    "StopHook",
    "ToolBoom",
    "assistant",
    "at_ms",
    "identities",
    "make_input",
    "model_of",
    "of_type",
    "project",
    "run_root",
    "text_of",
    "tool",
    "user",
]
