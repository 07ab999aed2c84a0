"""Differential runner: one scenario through Pi (Node harness) and through mule on both roots.

Both sides are projected onto the same Pi-level JSON events (see `harness.mjs`): Pi's event
types and order, messages without clocks/usage/model ids, tool-call ids, isError, texts, plus
`model_call` (each stream-function call with its context) and `hook` (each steering /
follow-up / stop-hook call). Where mule deliberately differs from Pi 1.6.0, `DIVERGENCES`
(the one normalisation table) rewrites Pi's observation into what mule must emit instead.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

import anyio
from attrs import define, field, frozen
from returns.result import Failure, Result, Success

from mule.effects import (
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
    MuleToolDeclaration,
    MuleToolExecutionPart,
    MuleToolPrepared,
    MuleToolRejection,
    MuleToolResult,
    Ports,
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
    AbortController,
    AbortError,
    AbortSignal,
    AssistantMessage,
    Message,
    Model,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    Tool,
    ToolCall,
    from_wire,
    get_current_system_prompt,
    get_current_tools,
    to_wire,
)
from mule.pi.scripted import Block, Call, Reply, ScriptedModel, Text, Thinking
from mule.promise import MuleRunFailed
from mule.promise import MuleRunInput as PromiseInput
from mule.promise import MuleTool as PromiseTool
from mule.promise import MuleToolPrepared as PromisePrepared
from mule.promise import run as promise_run

Scenario: TypeAlias = dict[str, Any]
Obs: TypeAlias = dict[str, Any]
Root: TypeAlias = Literal["effects", "promise"]
ROOTS: tuple[Root, ...] = ("effects", "promise")

REPO = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).with_name("harness.mjs")
HAVE_PI = (REPO / "node" / "node_modules" / "@earendil-works" / "pi-agent-core").is_dir()
MODEL = Model(
    id="scripted-1", name="Scripted", api="scripted-api", provider="scripted", base_url=""
)
SYSTEM = "You are a test."
# Same fields as harness.mjs's DROPPED: no loop semantics (clocks, model ids, usage).
DROPPED = frozenset({"timestamp", "usage", "api", "provider", "model", "partial", "durationMs"})


def strip(value: Any) -> Any:
    """Return the JSON projection of a wire value, with the volatile fields removed.

    The codec already omits absent optional fields; a JSON null is a value and stays.
    """
    if isinstance(value, list | tuple):
        return [strip(v) for v in value]
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in DROPPED}
    return value


def wire(value: object) -> Any:
    """Return the stripped wire JSON of a mule.pi value."""
    return strip(to_wire(value))


# -- Pi ---------------------------------------------------------------------------------------


class PiHarness:
    """One long-lived `node harness.mjs` process: a scenario line in, its event lines out."""

    def __init__(self) -> None:
        node = shutil.which("node")
        assert node is not None, "node is required for the conformance tests"
        self._proc = subprocess.Popen(
            [node, str(HARNESS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._lock = threading.Lock()
        self._next = 0

    def submit(self, scenario: Scenario) -> Callable[[], tuple[list[Obs], Obs]]:
        """Send a scenario now (Pi runs while mule does); return a function that collects it."""
        with self._lock:
            self._next += 1
            sid = self._next
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps({**scenario, "id": sid}) + "\n")
            self._proc.stdin.flush()

        def collect() -> tuple[list[Obs], Obs]:
            events: list[Obs] = []
            assert self._proc.stdout is not None
            while True:
                line = self._proc.stdout.readline()
                assert line, "the Pi harness exited"
                obs = json.loads(line)
                if obs["t"] == "scenario_end":
                    assert obs["id"] == sid
                    return events, obs["end"]
                events.append(obs)

        return collect

    def run(self, scenario: Scenario) -> tuple[list[Obs], Obs]:
        """Run one scenario through Pi; return its projected events and how the loop ended."""
        return self.submit(scenario)()

    def close(self) -> None:
        """Close stdin and wait for the process."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(timeout=10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()


# -- mule -------------------------------------------------------------------------------------


def _block(b: dict[str, Any]) -> Block:
    if b["type"] == "text":
        return Text(tuple(b["deltas"]))
    if b["type"] == "thinking":
        return Thinking(tuple(b["deltas"]))
    return Call(b["id"], b["name"], b.get("arguments", {}), b.get("pieces", 1))


def _reply(r: dict[str, Any]) -> Reply:
    raises = r.get("raises")
    return Reply(
        blocks=tuple(_block(b) for b in r.get("blocks", ())),
        stop_reason=r.get("stopReason"),
        error_message=r.get("errorMessage"),
        start=r.get("start", True),
        raises=RuntimeError(raises) if raises is not None else None,
        no_terminal=r.get("noTerminal", False),
        before_start=("text_delta",) * r.get("beforeStart", 0),
        trailing=(_LATE,) * r.get("trailing", 0),
    )


_LATE = TextDeltaEvent(
    content_index=0,
    delta="late",
    partial=AssistantMessage(
        content=(),
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        usage=ZERO_USAGE,
        stop_reason="pending",
        timestamp=0,
    ),
)


def _messages(items: Sequence[Any]) -> tuple[Message, ...]:
    return tuple(from_wire(Message, m) for m in items)


def _tool_result(call: ToolCall, plan: dict[str, Any]) -> MuleToolResult:
    r = plan.get("result") or {}
    return MuleToolResult(
        content=(TextContent(r.get("text", f"{call.name}:{call.id}")),),
        is_error=bool(r.get("isError", False)),
        details=r.get("details"),
        terminate=r.get("terminate"),
    )


class ToolRaised(Exception):
    """A scripted tool or hook raising on purpose."""


@define
class MuleRun:
    """What mule did for one scenario on one root, projected like Pi's events."""

    events: list[Obs] = field(factory=list)
    end: Obs = field(factory=dict)


class _Slots:
    """The harness's slots (see `makeSlots` in harness.mjs), released by the listener."""

    def __init__(self, plans: dict[str, dict[str, Any]]) -> None:
        self.of = {
            cid: [s["wait"] for s in plan.get("steps", ()) if "wait" in s]
            for cid, plan in plans.items()
        }
        self.all = {k for slots in self.of.values() for k in slots}
        self.done: set[int] = set()
        self.updates: dict[str, int] = {}
        self.changed = anyio.Event()

    def on_event(self, event: MuleEvent) -> None:
        """Free the slot of a tool update or end."""
        if type(event) is ToolExecutionUpdate:
            cid = event.call.id
            n = self.updates[cid] = self.updates.get(cid, 0) + 1
            slots = self.of.get(cid, [])
            if n <= len(slots):
                self.done.add(slots[n - 1])
        elif type(event) is ToolExecutionEnd:
            self.done.update(self.of.get(event.call.id, ()))
        else:
            return
        self.changed.set()
        self.changed = anyio.Event()

    async def wait(self, k: int) -> None:
        """Wait until every lower slot's event was emitted (2 s fallback, as in Node)."""
        with anyio.move_on_after(2):
            while any(s < k and s not in self.done for s in self.all):
                await self.changed.wait()


class _Side:
    """The scenario's callbacks for mule; every callback records its Pi-level observation."""

    def __init__(self, sc: Scenario, out: MuleRun) -> None:
        self.sc = sc
        self.out = out
        self.plans: dict[str, dict[str, Any]] = sc.get("calls", {})
        self.slots = _Slots(self.plans)
        self.model = ScriptedModel([_reply(r) for r in sc.get("replies", ())])
        self.queues: dict[str, list[Any]] = {
            k: list(sc[k])
            for k in ("steering", "followUp", "stop", "keys")
            if sc.get(k) is not None
        }
        self.fail_on: dict[str, Any] | None = sc.get("listenerRaises")
        self.seen_of_type = 0
        self.abort_on: dict[str, Any] | None = sc.get("abortOn")
        self.abort_seen = 0
        self.controller = AbortController()

    def maybe_abort(self, event: MuleEvent) -> None:
        """Abort the run's signal at the planned event (as the harness does)."""
        plan = self.abort_on
        if plan is None or _project(event)["t"] != plan["t"]:
            return
        self.abort_seen += 1
        nth: int = plan.get("nth", 1)
        if self.abort_seen == nth:
            self.out.events.append({"t": "aborted_here"})
            self.controller.abort("scripted abort")

    def listener_fails(self, event: MuleEvent) -> bool:
        """Whether the scripted listener breaks at this event (after recording it)."""
        fail = self.fail_on
        if fail is None or _project(event)["t"] != fail["t"]:
            return False
        self.seen_of_type += 1
        nth: int = fail.get("nth", 1)
        return self.seen_of_type == nth

    def key(self, provider: str) -> str | None:
        """Record a resolve-api-key call and return its planned answer."""
        self.out.events.append({"t": "hook", "name": "key", "provider": provider})
        queue = self.queues["keys"]
        nxt = queue.pop(0) if queue else None
        if isinstance(nxt, dict) and "raises" in nxt:
            raise ToolRaised(nxt["raises"])
        return None if nxt is None else str(nxt)

    def answer(self, name: str, fallback: Any) -> Any:
        """Record a hook call and return its next planned answer."""
        self.out.events.append({"t": "hook", "name": name})
        queue = self.queues[name]
        nxt = queue.pop(0) if queue else fallback
        if isinstance(nxt, dict) and "raises" in nxt:
            raise ToolRaised(nxt["raises"])
        return nxt

    def stop_answer(self, turn: MuleCompletedTurn) -> bool:
        """Record a stop-hook call with what it was shown, and answer."""
        self.out.events.append(
            {
                "t": "hook",
                "name": "stop",
                "newMessages": wire(turn.new_messages),
                "context": wire(turn.context),
                "results": wire(turn.tool_results),
                "m": wire(turn.message),
            }
        )
        queue = self.queues["stop"]
        nxt = queue.pop(0) if queue else False
        if isinstance(nxt, dict) and "raises" in nxt:
            raise ToolRaised(nxt["raises"])
        return nxt is True

    def plan(self, call: ToolCall) -> dict[str, Any]:
        """Return the scripted behaviour of one call."""
        return self.plans.get(call.id, {})

    async def parts(self, call: ToolCall) -> AsyncGenerator[MuleToolExecutionPart, None]:
        """Play a call's steps (sleeps and updates), then its result or raise."""
        plan = self.plan(call)
        for s in plan.get("steps", ()):
            if "sleep" in s:
                await anyio.sleep(s["sleep"] / 1000)
            elif "wait" in s:
                await self.slots.wait(s["wait"])
            else:
                part = MuleToolResult(content=(TextContent(s["update"]),))
                yield MuleToolExecutionPart("update", part)
        if "raises" in plan:
            raise ToolRaised(plan["raises"])
        yield MuleToolExecutionPart("result", _tool_result(call, plan))

    def descriptor(self, spec: dict[str, Any]) -> Tool:
        """Return the Pi tool descriptor of a scenario tool."""
        name = spec["name"]
        return Tool(name, f"the {name} tool", spec.get("parameters", {"type": "object"}))


def _record(side: _Side, event: MuleEvent) -> None:
    side.out.events.append(_project(event))
    side.slots.on_event(event)
    side.maybe_abort(event)


def _settings(side: _Side) -> dict[str, Any]:
    sc = side.sc
    return {
        "model": MODEL,
        "stream_options": StreamOptions(api_key=sc.get("apiKey")),
        "system_prompt": sc.get("systemPrompt", SYSTEM),
        "messages": _messages(sc["messages"]),
        "stream": side.model,
        "tool_execution": sc.get("toolExecution", "parallel"),
    }


async def _run_effects(sc: Scenario, out: MuleRun) -> Result[MuleRunOutcome, MuleError]:
    side = _Side(sc, out)

    async def prepare(
        call: ToolCall, signal: AbortSignal
    ) -> Result[MuleCallPreparation, MuleError]:
        plan = side.plan(call)
        if "prepareRaises" in plan:
            raise ToolRaised(plan["prepareRaises"])
        if "reject" in plan:
            return Success(MuleToolRejection(plan["reject"], plan.get("rejectTerminate")))

        async def execute(
            _signal: AbortSignal,
        ) -> AsyncIterator[Result[MuleToolExecutionPart, MuleError]]:
            async with contextlib.aclosing(side.parts(call)) as parts:
                async for part in parts:
                    yield Success(part)

        return Success(MuleToolPrepared(execute))

    def declare(spec: dict[str, Any]) -> MuleToolDeclaration:
        return MuleToolDeclaration(
            descriptor=side.descriptor(spec), execution_mode=spec.get("executionMode")
        )

    def messages_hook(name: str) -> Any:
        if name not in side.queues:
            return None

        async def hook(signal: AbortSignal) -> Result[tuple[Message, ...], MuleError]:
            return Success(_messages(side.answer(name, [])))

        return hook

    async def stop(turn: MuleCompletedTurn, signal: AbortSignal) -> Result[bool, MuleError]:
        return Success(side.stop_answer(turn))

    async def listener(event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
        _record(side, event)
        if side.listener_fails(event):
            return Failure(MuleError("listener", "listener broke"))
        return Success(None)

    async def key(provider: str, signal: AbortSignal) -> Result[str | None, MuleError]:
        return Success(side.key(provider))

    tools = tuple(declare(t) for t in sc.get("tools", ()))
    inp = MulePortsInput(
        **_settings(side),
        tools=tools,
        ports=Ports(
            emit=listener,
            steering=messages_hook("steering"),
            follow_up=messages_hook("followUp"),
            should_stop=stop if "stop" in side.queues else None,
            resolve_key=key if "keys" in side.queues else None,
            prepare_tool=prepare if tools else None,
        ),
    )
    res = await effects_run(inp, side.controller.signal)
    _attach_prompts(out, side.model)
    return res


async def _run_promise(sc: Scenario, out: MuleRun) -> Result[MuleRunOutcome, MuleError]:
    side = _Side(sc, out)

    def make_tool(spec: dict[str, Any]) -> PromiseTool:
        async def prepare(
            call: ToolCall, signal: AbortSignal
        ) -> PromisePrepared[AsyncIterator[MuleToolExecutionPart]] | MuleToolRejection:
            plan = side.plan(call)
            if "prepareRaises" in plan:
                raise ToolRaised(plan["prepareRaises"])
            if "reject" in plan:
                return MuleToolRejection(plan["reject"], plan.get("rejectTerminate"))
            return PromisePrepared(lambda _signal: side.parts(call))

        return PromiseTool(
            descriptor=side.descriptor(spec),
            prepare=prepare,
            execution_mode=spec.get("executionMode"),
        )

    def messages_hook(name: str) -> Any:
        if name not in side.queues:
            return None

        async def hook(signal: AbortSignal) -> tuple[Message, ...]:
            return _messages(side.answer(name, []))

        return hook

    async def stop(turn: MuleCompletedTurn, signal: AbortSignal) -> bool:
        return side.stop_answer(turn)

    async def listener(event: MuleEvent, signal: AbortSignal) -> None:
        _record(side, event)
        if side.listener_fails(event):
            raise ToolRaised("listener broke")

    async def key(provider: str, signal: AbortSignal) -> str | None:
        return side.key(provider)

    inp = PromiseInput(
        **_settings(side),
        tools=[make_tool(t) for t in sc.get("tools", ())],
        get_steering_messages=messages_hook("steering"),
        get_follow_up_messages=messages_hook("followUp"),
        should_stop_after_turn=stop if "stop" in side.queues else None,
        resolve_api_key=key if "keys" in side.queues else None,
    )
    try:
        outcome = await promise_run(inp, listener, side.controller.signal)
    except MuleRunFailed as exc:
        res: Result[MuleRunOutcome, MuleError] = Failure(exc.error)
    except AbortError:
        # The facade raises the abort reason; the core's cancelled outcome is what it means.
        res = Success(_cancelled(side))
    else:
        res = Success(outcome)
    _attach_prompts(out, side.model)
    return res


def _cancelled(side: _Side) -> MuleRunOutcome:
    """Return a stand-in for the cancelled outcome the facade turned into an AbortError."""
    assert side.controller.signal.aborted
    ident = MuleIdentity("run", "run:0")
    message = AssistantMessage(
        content=(),
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        usage=ZERO_USAGE,
        stop_reason="aborted",
        timestamp=0,
    )
    return MuleRunOutcome(
        status="cancelled", run=ident, terminal=ident, message=message, messages=()
    )


def _attach_prompts(out: MuleRun, model: ScriptedModel) -> None:
    """Give each `model_call` marker the context of its stream-function call, in order."""
    calls = iter(model.calls)
    for obs in out.events:
        if obs["t"] == "model_call":
            _, context, options = next(calls)
            obs["apiKey"] = options.api_key
            obs["messages"] = wire(context.messages)
            obs["tools"] = [t.name for t in get_current_tools(context.messages)]
            obs["systemPrompt"] = get_current_system_prompt(context.messages)


def _result(r: MuleToolResult) -> Obs:
    out: Obs = {"content": wire(r.content)}
    if r.details is not None:
        out["details"] = r.details
    if r.terminate is not None:
        out["terminate"] = r.terminate
    return out


def _project(e: MuleEvent) -> Obs:
    """Project one mule event onto Pi's event (base mapping, digest §5.3)."""
    if type(e) is RunStart:
        return {"t": "agent_start"}
    if type(e) is TurnStart:
        return {"t": "turn_start"}
    if type(e) is ModelPrompt:
        # mule-only (§5.3): emitted just before each stream-function call, where the harness
        # records Pi's call; the context is attached from the scripted model afterwards.
        return {"t": "model_call", "systemPrompt": e.system_prompt}
    if type(e) is MessageStart or type(e) is MessageEnd:
        return {"t": e.type, "m": wire(e.value)}
    if type(e) is MessageUpdate:
        return {"t": e.type, "m": wire(e.value), "e": wire(e.event)}
    if type(e) is ToolExecutionStart:
        return {"t": e.type, "id": e.call.id, "name": e.call.name, "args": e.call.arguments}
    if type(e) is ToolExecutionUpdate:
        c = e.call
        return {
            "t": e.type,
            "id": c.id,
            "name": c.name,
            "args": c.arguments,
            "partial": _result(e.result),
        }
    if type(e) is ToolExecutionEnd:
        c, r = e.call, e.result
        return {
            "t": e.type,
            "id": c.id,
            "name": c.name,
            "isError": r.is_error,
            "result": _result(r),
        }
    if type(e) is TurnEnd:
        return {"t": e.type, "m": wire(e.message), "results": wire(e.tool_results)}
    if type(e) is RunEnd:
        # run_end(completed) is Pi's agent_end; its messages are filled in from the outcome.
        if e.outcome == "completed":
            return {"t": "agent_end"}
        return {"t": "run_end", "outcome": e.outcome}
    raise AssertionError(f"unknown event {e!r}")


async def run_mule(sc: Scenario, root: Root) -> MuleRun:
    """Run a scenario through mule on one root; project events and the ending."""
    out = MuleRun()
    res = await (_run_effects if root == "effects" else _run_promise)(sc, out)
    if isinstance(res, Success):
        outcome = res.unwrap()
        for obs in out.events:
            if obs["t"] == "agent_end":
                obs["messages"] = wire(outcome.messages)
        out.end = {"kind": outcome.status, "messages": wire(outcome.messages)}
        if outcome.status == "cancelled":
            # Pi has no cancelled outcome to compare its messages with (A9).
            del out.end["messages"]
    else:
        err = res.failure()
        cause = err.cause
        out.end = {"kind": "failed", "phase": err.phase, "message": err.message}
        if cause is not None and not isinstance(cause, BaseException):
            out.end["cause"] = wire(cause)
        for obs in out.events:
            if obs["t"] == "run_end":
                obs["phase"] = err.phase
    return out


# -- the normalisation table ----------------------------------------------------------------


Rewrite: TypeAlias = Callable[[Scenario, list[Obs], Obs], tuple[list[Obs], Obs] | None]


@frozen
class Divergence:
    """A deliberate difference from Pi 1.6.0.

    `rewrite` turns Pi's observation into what mule must emit instead (None: does not apply);
    `adjust` rewrites a value inside Pi's events (a difference that does not end the run).
    """

    code: str
    why: str
    rewrite: Rewrite | None = None
    adjust: Callable[[Scenario, Any], Any] | None = None


def _raised_text(sc: Scenario, call_id: str) -> str | None:
    plan = sc.get("calls", {}).get(call_id, {})
    text: str | None = plan.get("raises", plan.get("prepareRaises"))
    return text


def _a3_index(sc: Scenario, events: list[Obs]) -> int | None:
    for i, obs in enumerate(events):
        if obs["t"] != "tool_execution_end" or not obs["isError"]:
            continue
        # Pi's error result carries the raised message; an unknown tool, a schema failure or
        # a block (which never reach the raise) carry other texts.
        raised = _raised_text(sc, obs["id"])
        if raised is not None and obs["result"]["content"] == [{"type": "text", "text": raised}]:
            return i
    return None


def _abort_index(events: list[Obs]) -> int | None:
    return next((i for i, obs in enumerate(events) if obs["t"] == "aborted_here"), None)


def _a3(sc: Scenario, events: list[Obs], end: Obs) -> tuple[list[Obs], Obs] | None:
    i = _a3_index(sc, events)
    if i is None:
        return None
    return [*events[:i], _failed("tool")], {"kind": "failed", "phase": "tool"}


def _a4_a19(sc: Scenario, events: list[Obs], end: Obs) -> tuple[list[Obs], Obs] | None:
    if end["kind"] != "returned" or not end["messages"]:
        return None
    last = end["messages"][-1]
    if last.get("role") != "assistant" or last.get("stopReason") not in ("error", "aborted"):
        return None
    assert events[-1]["t"] == "agent_end"
    return [*events[:-1], _failed("model")], {"kind": "failed", "phase": "model", "cause": last}


def _a20(sc: Scenario, events: list[Obs], end: Obs) -> tuple[list[Obs], Obs] | None:
    if end["kind"] != "raised" or events:
        return None
    assert end["message"].startswith("Cannot continue"), end
    return [], {"kind": "failed", "phase": "control"}


def _listener(sc: Scenario, events: list[Obs], end: Obs) -> tuple[list[Obs], Obs] | None:
    if end["kind"] != "raised" or end["origin"] != "listener":
        return None
    if events and events[-1]["t"] == "agent_end":
        # Broken at run_end itself: mule has no outcome, so the event carries no messages.
        events = [*events[:-1], {"t": "agent_end"}]
    return events, {"kind": "failed", "phase": "listener"}


def _duplicate_tools(sc: Scenario, events: list[Obs], end: Obs) -> tuple[list[Obs], Obs] | None:
    names = [t["name"] for t in sc.get("tools", ())]
    if len(set(names)) == len(names):
        return None
    return [], {"kind": "failed", "phase": "control"}


def _a16(sc: Scenario, events: list[Obs], end: Obs) -> tuple[list[Obs], Obs] | None:
    if end["kind"] != "raised":
        return None
    phase = "model" if end["origin"] == "model" else "control"
    return [*events, _failed(phase)], {"kind": "failed", "phase": phase}


def _a9(sc: Scenario, events: list[Obs], end: Obs) -> tuple[list[Obs], Obs] | None:
    i = _abort_index(events)
    if i is None:
        return None
    failed_first = _a3_index(sc, events[:i])
    if failed_first is not None:  # the run had already failed (A3) when the signal fired
        return None
    cancelled = {"t": "run_end", "outcome": "cancelled"}
    return [*events[: i + 1], cancelled], {"kind": "cancelled"}


def _a15(sc: Scenario, events: list[Obs], end: Obs) -> tuple[list[Obs], Obs] | None:
    if end["kind"] != "hang":
        return None
    return [*events, _failed("model")], {"kind": "failed", "phase": "model"}


PI_BLOCKED = "Tool execution was blocked"


def _empty_rejection(sc: Scenario, value: Any) -> Any:
    if not any(p.get("reject") == "" for p in sc.get("calls", {}).values()):
        return value
    if isinstance(value, list):
        return [_empty_rejection(sc, v) for v in value]
    if isinstance(value, dict):
        if value == {"type": "text", "text": PI_BLOCKED}:
            return {"type": "text", "text": ""}
        return {k: _empty_rejection(sc, v) for k, v in value.items()}
    return value


def _failed_turn_hook(obs: Obs) -> bool:
    return (
        obs.get("t") == "hook"
        and obs.get("name") == "stop"
        and obs["m"].get("stopReason") in ("error", "aborted")
    )


def _stop_hook_on_failed_turn(sc: Scenario, value: Any) -> Any:
    """Drop the stop-hook calls Pi 1.6.0 makes for error/aborted turns (mule does not ask).

    A trailing one is kept: the hook raised there, which `_stop_hook_raised` rewrites.
    """
    if not isinstance(value, list):
        return value
    return [obs for i, obs in enumerate(value) if i == len(value) - 1 or not _failed_turn_hook(obs)]


def _stop_hook_raised(sc: Scenario, events: list[Obs], end: Obs) -> tuple[list[Obs], Obs] | None:
    """Pi's finishTurn raised on a failed turn; mule never asked it, so the turn fails (A4)."""
    if end["kind"] != "raised" or not events or not _failed_turn_hook(events[-1]):
        return None
    message = events[-1]["m"]
    turn_end = {"t": "turn_end", "m": message, "results": []}
    return (
        [*events[:-1], turn_end, _failed("model")],
        {"kind": "failed", "phase": "model", "cause": message},
    )


def _failed(phase: str) -> Obs:
    return {"t": "run_end", "outcome": "failed", "phase": phase}


# Applied in order; the first that applies rewrites Pi's observation. The order is the order in
# which they cut a run: a control error before run_start, then a cancellation or a tool raise
# (whichever came first), then the ways a run ends.
DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "§5.1 duplicate tools",
        "duplicate tool names are a MuleError(control) before run_start; Pi 1.6.0 runs the first"
        " tool of that name while the model sees the last one's declaration (dedupe by name)",
        _duplicate_tools,
    ),
    Divergence(
        "A9",
        "cancellation: 1.6.0's loop checks the signal only before a tool (calls not yet run get"
        " 'Operation aborted' results) and runs on; once the run's signal aborts, mule emits"
        " nothing but run_end(cancelled), and calls not yet run never run",
        _a9,
    ),
    Divergence(
        "A3",
        "a raising prepare/execute fails the run with MuleError(tool) where Pi's error result"
        " would be; mule emits run_end(failed) instead of that tool_execution_end",
        _a3,
    ),
    Divergence(
        "A4/A19",
        "a final error/aborted assistant message fails the run with MuleError(model) (cause ="
        " that message); turn_end still comes first, run_end(failed) replaces agent_end",
        _a4_a19,
    ),
    Divergence(
        "A20",
        "input breaking the continue rules (no messages, trailing assistant): Pi throws before"
        " agent_start; mule returns MuleError(control) before run_start (no events either way)",
        _a20,
    ),
    Divergence(
        "§5.7 listener",
        "a raising listener: Pi's emit throws out of the loop (no agent_end); mule likewise"
        " emits nothing more (no run_end) and fails with MuleError(listener)",
        _listener,
    ),
    Divergence(
        "stop hook raised on a failed turn",
        "Pi 1.6.0's finishTurn raised on an error/aborted turn (its throw escapes the loop);"
        " mule does not ask the stop hook there: turn_end, then run_end(failed) with"
        " MuleError(model) as for any failed turn (A4/A19)",
        _stop_hook_raised,
    ),
    Divergence(
        "A16 (+§5.7 control)",
        "a raise escaping Pi's loop (stream function, or a steering/follow-up/stop hook) ends"
        " mule's run with run_end(failed) and MuleError(model) or MuleError(control)",
        _a16,
    ),
    Divergence(
        "A15",
        "a stream that ends without done/error hangs Pi; mule fails with MuleError(model)",
        _a15,
    ),
    Divergence(
        "stop hook on failed turns",
        "the retained stop hook is asked for completed turns only; Pi 1.6.0 also calls"
        " finishTurn for an error/aborted turn and ignores its answer, where mule's run fails"
        " (A4/A19), so there is nothing to decide",
        adjust=_stop_hook_on_failed_turn,
    ),
    Divergence(
        "§5.4 rejection text",
        "a rejection's message is the error text as given; Pi 1.6.0 replaces an empty block"
        " reason with 'Tool execution was blocked' (mule's rejection is not Pi's block: the"
        " seed makes its message the result text)",
        adjust=_empty_rejection,
    ),
)


def expected_for_mule(sc: Scenario, events: list[Obs], end: Obs) -> tuple[list[Obs], Obs, str]:
    """Pi's observation rewritten by the first divergence that applies (code "" if none)."""
    for d in DIVERGENCES:
        if d.adjust is not None:
            events, end = d.adjust(sc, events), d.adjust(sc, end)
    for d in DIVERGENCES:
        got = d.rewrite(sc, events, end) if d.rewrite is not None else None
        if got is not None:
            return got[0], got[1], d.code
    assert end["kind"] == "returned", end
    return events, {"kind": "completed", "messages": end["messages"]}, ""


def _end_view(end: Obs) -> Obs:
    """Return the comparable part of an ending (error texts differ by language; phases do not)."""
    return {k: v for k, v in end.items() if k not in ("message", "origin")}


@define
class Comparison:
    """The outcome of comparing mule with Pi on one scenario."""

    code: str
    diffs: list[str]

    @property
    def ok(self) -> bool:
        """True when mule matched (normalised) Pi."""
        return not self.diffs


def compare(sc: Scenario, pi: tuple[list[Obs], Obs], mule: MuleRun) -> Comparison:
    """Compare mule's projected run with Pi's, after the divergence table."""
    want_events, want_end, code = expected_for_mule(sc, *pi)
    got_events = mule.events
    diffs: list[str] = []
    for i in range(max(len(want_events), len(got_events))):
        w = want_events[i] if i < len(want_events) else None
        g = got_events[i] if i < len(got_events) else None
        if w != g:
            diffs.append(f"event {i}: pi {json.dumps(w)}\n          mule {json.dumps(g)}")
            break
    if _end_view(want_end) != _end_view(mule.end):
        diffs.append(f"end: pi {json.dumps(want_end)}\n     mule {json.dumps(mule.end)}")
    return Comparison(code, diffs)


__all__ = [
    "DIVERGENCES",
    "HAVE_PI",
    "PI_BLOCKED",
    "ROOTS",
    "Comparison",
    "Divergence",
    "MuleRun",
    "PiHarness",
    "Root",
    "Scenario",
    "compare",
    "expected_for_mule",
    "run_mule",
    "strip",
]
