"""A crash matrix for transcript owners: SIGKILL a real run at chosen points, recover, finish.

A `CrashLab` starts one pre-imported "zygote" process that forks a fresh child per run (so a
child costs a fork, not an interpreter start). Each child recovers the run from the owner,
runs the scripted scenario below with the owner's listener, and announces named points on a
Unix socket, waiting for "go" after each: the parent SIGKILLs it exactly at a chosen point.
After the last kill, a child finishes the run; `check_case` then asserts the durability
contract. Bring your own owner: any `TranscriptOwner` made by an importable factory
`"package.module:callable"` taking a path (the SQLite `mule.journal:Journal` is the first).

The scenario: turn 1 streams text and three parallel calls (one safe `read`, two unsafe
`write`); turn 2's first attempt fails with a retryable error after streaming, the retry
streams text and a sequential batch (`log`, unsafe and sequential, and `read`); turn 3
answers "All done.". Tools append `<call id> <pid>` to a side-effect file with fsync.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from attrs import define, field

import mule.promise as promise
from mule._abort import AbortSignal
from mule.effects._events import MessageUpdate, MuleEvent
from mule.effects._tools import MuleToolExecutionPart, MuleToolResult
from mule.effects._transition import INTERRUPTED_UNSAFE
from mule.journal._owner import TranscriptOwner
from mule.pi._codec import from_wire, to_wire
from mule.pi._content import TextContent, ToolCall
from mule.pi._context import Context, StreamOptions, Tool
from mule.pi._messages import (
    SUCCESS_STOP_REASONS,
    AssistantMessage,
    Message,
    ToolResultMessage,
    UserMessage,
)
from mule.pi._model import Model
from mule.pi._retry import RetryPolicy
from mule.pi._scripted import Call, Reply, Text, error_reply, reply, scripted_stream
from mule.pi._stream import AssistantMessageEventStream

MODEL = Model(id="crash-1", name="Crash", api="scripted-api", provider="scripted", base_url="")
SYSTEM = "You are being crashed on purpose."
PROMPT = "Do the chores."
TURNS: tuple[Reply, ...] = (
    reply(
        Text.of("Let me look around first.", 3),
        Call("r1", "read", {"path": "a.txt"}),
        Call("w1", "write", {"text": "one"}),
        Call("w2", "write", {"text": "two"}),
    ),
    reply(
        Text.of("Now the log.", 2),
        Call("l1", "log", {"line": "hello"}),
        Call("r2", "read", {"path": "b.txt"}),
    ),
    reply(Text.of("All done.", 3)),
)
RETRIED_TURN = 1  # the first attempt of this turn fails (once per process) and is retried
RETRY = RetryPolicy(enabled=True, max_retries=3, base_delay_ms=1.0)
UNSAFE = frozenset({"write", "log"})
FINAL_TEXT = "All done."

Point = Callable[[str, object], None]


def _no_point(name: str, data: object) -> None:
    return None


@define
class ScenarioModel:
    """The scenario's stream function: the reply is chosen by the transcript, not by a counter."""

    failed: set[int] = field(factory=set)

    def __call__(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AssistantMessageEventStream:
        """Stream the reply for the turn the context is at."""
        turn = sum(1 for m in context.messages if type(m) is AssistantMessage)
        script = TURNS[min(turn, len(TURNS) - 1)]
        if turn == RETRIED_TURN and turn not in self.failed:
            self.failed.add(turn)
            script = error_reply(
                "503 Service Unavailable", start=True, blocks=(Text.of("I will wr", 2),)
            )
        signal = options.signal if options is not None else None
        return scripted_stream(script, model, signal, int(time.time() * 1000))


def _append_effect(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def scenario_tools(effects: Path, point: Point = _no_point) -> list[promise.MuleTool]:
    """Return the scenario's tools; each execution appends `<call id> <pid>` to `effects`."""

    def make(name: str, replay: str, mode: str | None) -> promise.MuleTool:
        async def prepare(call: ToolCall, signal: AbortSignal) -> promise.MuleToolPreparation:
            async def execute(s: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
                point(f"exec-before:{call.id}", None)
                _append_effect(effects, f"{call.id} {os.getpid()}\n")
                point(f"exec-after:{call.id}", None)
                text = f"{name}:{call.id}:{os.getpid()}"
                yield MuleToolExecutionPart("result", MuleToolResult(content=(TextContent(text),)))

            return promise.MuleToolPrepared(execute)

        return promise.MuleTool(
            descriptor=Tool(name, f"the {name} tool", {"type": "object"}),
            prepare=prepare,
            replay=replay,  # type: ignore[arg-type]
            execution_mode=mode,  # type: ignore[arg-type]
        )

    return [
        make("read", "safe", None),
        make("write", "unsafe", None),
        make("log", "unsafe", "sequential"),
    ]


def announcing(
    listener: Callable[[MuleEvent, AbortSignal], object], point: Point
) -> Callable[[MuleEvent, AbortSignal], None]:
    """Wrap an owner's listener: announce `before:X` and `after:X` around each checkpoint event.

    X is `RS`, `XS:<id>`, `XE:<id>`, `ME:<id>` (a tool result), `ME:a<k>` (the k-th assistant
    attempt of this run), `TE:<k>`, `RE`; `stream:<k>` follows the first delta of attempt k.
    The `after:` points of message_end and tool_execution_end carry what was committed.
    """
    attempts = 0
    turns = 0
    streaming: set[str] = set()

    def listen(event: MuleEvent, sig: AbortSignal) -> None:
        nonlocal attempts, turns
        kind = event.type
        name: str | None = None
        data: object = None
        if kind == "run_start":
            name = "RS"
        elif kind == "tool_execution_start":
            name = f"XS:{event.call.id}"  # type: ignore[union-attr]
        elif kind == "tool_execution_end":
            name = f"XE:{event.call.id}"  # type: ignore[union-attr]
            data = _text(event.result)  # type: ignore[union-attr]
        elif kind == "message_end":
            value: Message = event.value  # type: ignore[union-attr]
            if type(value) is ToolResultMessage:
                name = f"ME:{value.tool_call_id}"
            elif type(value) is AssistantMessage:
                attempts += 1
                name = f"ME:a{attempts}"
            data = to_wire(value)
        elif kind == "turn_end":
            turns += 1
            name = f"TE:{turns}"
        elif kind == "run_end":
            name = "RE"
        if name is not None:
            point(f"before:{name}", None)
        listener(event, sig)
        if name is not None:
            point(f"after:{name}", data)
        elif type(event) is MessageUpdate and event.message.value not in streaming:
            streaming.add(event.message.value)
            point(f"stream:{attempts + 1}", None)

    return listen


def _text(m: Message | MuleToolResult) -> str:
    content = m.content
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if type(b) is TextContent)


def load_factory(spec: str) -> Callable[[str], TranscriptOwner]:
    """Import `"package.module:callable"`: the owner factory, called with a store path."""
    module, _, attr = spec.partition(":")
    factory: Callable[[str], TranscriptOwner] = getattr(importlib.import_module(module), attr)
    return factory


async def run_scenario(
    owner: TranscriptOwner, run_id: str, effects: Path, point: Point = _no_point
) -> promise.MuleRunInput:
    """Recover `run_id` from `owner` and run the scenario to its end (used by the child)."""
    messages, resume = owner.recover(run_id)
    tools = scenario_tools(effects, point)
    backoffs = 0

    def retry_after(message: AssistantMessage) -> None:
        nonlocal backoffs
        backoffs += 1
        point(f"backoff:{backoffs}", None)

    inp = promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=messages,
        resume=resume,
        stream=ScenarioModel(),
        tools=tools,
        retry=RETRY,
        retry_after_ms=retry_after,
    )
    await promise.run(inp, announcing(owner.listener(run_id), point))
    return inp


# -- the parent side ------------------------------------------------------------------------


@define
class Segment:
    """One child run: the points it announced and whether it was killed at the last one."""

    points: list[str] = field(factory=list)
    killed: bool = False


@define
class CrashCase:
    """Everything one case did, for `check_case`."""

    run_id: str
    store: str
    effects: Path
    segments: list[Segment] = field(factory=list)
    committed: list[Message] = field(factory=list)  # announced after their commit
    results: dict[str, str] = field(factory=dict)  # call id -> committed tool_execution_end text
    transcript: tuple[Message, ...] = ()

    def effect_counts(self) -> Counter[str]:
        """How many times each call's side effect happened."""
        if not self.effects.exists():
            return Counter()
        return Counter(line.split()[0] for line in self.effects.read_text().splitlines())


class CrashChildError(RuntimeError):
    """A crash-matrix child failed on its own (not killed): a bug in the owner or the run."""


class CrashLab:
    """Runs crash cases against one owner factory; use as a context manager (starts a zygote)."""

    def __init__(self, factory: str, workdir: Path, *, timeout_s: float = 30.0) -> None:
        self.factory_spec = factory
        self.factory = load_factory(factory)
        self.workdir = Path(workdir)
        self.timeout_s = timeout_s
        self._zygote: subprocess.Popen[bytes] | None = None
        self._server: socket.socket | None = None
        self._sock_path = ""

    def __enter__(self) -> CrashLab:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._sock_path = str(self.workdir / f"lab-{uuid.uuid4().hex[:8]}.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(self._sock_path)
        server.listen(8)
        server.settimeout(self.timeout_s)
        self._server = server
        self._zygote = subprocess.Popen(
            [sys.executable, "-m", "mule.testing._crash_child", self.factory_spec],
            stdin=subprocess.PIPE,
        )
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._zygote is not None:
            assert self._zygote.stdin is not None
            self._zygote.stdin.close()  # the zygote exits at EOF
            try:
                self._zygote.wait(self.timeout_s)
            except subprocess.TimeoutExpired:
                self._zygote.kill()
                self._zygote.wait()
        if self._server is not None:
            self._server.close()
            os.unlink(self._sock_path)

    def _child(self, case: CrashCase, backend: str, kill: str | int | None) -> Segment:
        """Fork a child that continues the case's run; kill it at `kill` (a name or index)."""
        assert self._zygote is not None
        assert self._zygote.stdin is not None
        assert self._server is not None
        request = {
            "socket": self._sock_path,
            "store": case.store,
            "run_id": case.run_id,
            "effects": str(case.effects),
            "backend": backend,
        }
        self._zygote.stdin.write(json.dumps(request).encode() + b"\n")
        self._zygote.stdin.flush()
        conn, _ = self._server.accept()
        conn.settimeout(self.timeout_s)
        seg = Segment()
        with conn, conn.makefile("rb") as lines:
            hello = json.loads(lines.readline())
            pid = int(hello["pid"])
            for raw in lines:
                msg = json.loads(raw)
                if "done" in msg:
                    return seg
                if "error" in msg:
                    raise CrashChildError(msg["error"])
                name: str = msg["point"]
                seg.points.append(name)
                self._note(case, name, msg.get("data"))
                if kill == name or kill == len(seg.points) - 1:
                    os.kill(pid, signal.SIGKILL)
                    # EOF: the kernel closed the child's sockets, so it is gone (and so are
                    # its file locks); nothing it buffered in memory was written.
                    while lines.readline():
                        pass
                    seg.killed = True
                    return seg
                conn.sendall(b"go\n")
        raise CrashChildError(f"child {pid} hung up without finishing (points: {seg.points})")

    @staticmethod
    def _note(case: CrashCase, name: str, data: object) -> None:
        if name.startswith("after:ME:") and data is not None:
            message: Message = from_wire(Message, data)
            failed = type(message) is AssistantMessage and (
                message.stop_reason not in SUCCESS_STOP_REASONS
            )
            if not failed:  # a failed attempt may be superseded: not a committed message
                case.committed.append(message)
        elif name.startswith("after:XE:") and isinstance(data, str):
            case.results[name.removeprefix("after:XE:")] = data

    def new_case(self) -> CrashCase:
        """Return a fresh case: its own store, side-effect file and run, begun by the parent."""
        run_id = f"run-{uuid.uuid4().hex[:12]}"
        here = self.workdir / run_id
        here.mkdir()
        case = CrashCase(run_id, str(here / "store"), here / "effects.log")
        owner = self.factory(case.store)
        try:
            owner.begin(run_id, [UserMessage(PROMPT, int(time.time() * 1000))])
        finally:
            _close(owner)
        return case

    def points(self, backend: str = "asyncio") -> list[str]:
        """Return the points an uninterrupted scenario run announces, in order."""
        case = self.new_case()
        return self._child(case, backend, None).points

    def run_case(self, kills: Sequence[str | int], backend: str = "asyncio") -> CrashCase:
        """Run a case: one child per kill (each killed at its point), then one that finishes."""
        case = self.new_case()
        for kill in kills:
            case.segments.append(self._child(case, backend, kill))
        case.segments.append(self._child(case, backend, None))
        owner = self.factory(case.store)
        try:
            case.transcript = owner.transcript(case.run_id)
        finally:
            _close(owner)
        return case


def _close(owner: object) -> None:
    close = getattr(owner, "close", None)
    if close is not None:
        close()


def transcript_problems(messages: Sequence[Message]) -> list[str]:
    """Return why Pi would not accept `messages` as a transcript (empty when it would).

    The shape: user first; every assistant message succeeded; each assistant's tool calls are
    answered right after it, one result per call, and results appear nowhere else.
    """
    problems: list[str] = []
    if not messages or type(messages[0]) is not UserMessage:
        problems.append("the transcript does not start with a user message")
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        if type(m) is ToolResultMessage:
            problems.append(f"result for {m.tool_call_id} does not follow its assistant message")
        elif type(m) is AssistantMessage:
            if m.stop_reason not in SUCCESS_STOP_REASONS:
                problems.append(f"assistant message {i - 1} has stopReason {m.stop_reason}")
            want = [b.id for b in m.content if type(b) is ToolCall]
            got: list[str] = []
            while i < len(messages) and type(messages[i]) is ToolResultMessage:
                got.append(messages[i].tool_call_id)  # type: ignore[union-attr]
                i += 1
            if sorted(got) != sorted(want):
                problems.append(f"assistant message calls {want} answered by {got}")
            if not got and i < len(messages) and type(messages[i]) is AssistantMessage:
                problems.append(f"two assistant messages in a row at {i}")
    return problems


def check_case(case: CrashCase) -> None:
    """Assert the durability contract on a finished case; raise AssertionError with the reasons.

    No unsafe side effect happened twice; every tool call has exactly one result; nothing
    committed before a kill is lost (messages, and tool results whose end was committed); the
    final transcript is one Pi accepts and the run reached its final answer.
    """
    problems = list(transcript_problems(case.transcript))
    t = case.transcript
    effects = case.effect_counts()
    by_call = {m.tool_call_id: m for m in t if type(m) is ToolResultMessage}
    calls = {
        b.id: b.name
        for m in t
        if type(m) is AssistantMessage
        for b in m.content
        if type(b) is ToolCall
    }
    for cid, name in calls.items():
        if name in UNSAFE and effects[cid] > 1:
            problems.append(f"unsafe call {cid} ran {effects[cid]} times")
        result = by_call.get(cid)
        if result is None:
            continue
        text = _text(result)
        if name in UNSAFE and text != INTERRUPTED_UNSAFE and effects[cid] != 1:
            problems.append(f"unsafe call {cid} answered {text!r} but ran {effects[cid]} times")
        if text != INTERRUPTED_UNSAFE and not result.is_error:
            pid = text.rsplit(":", 1)[-1]
            if name in UNSAFE and f"{cid} {pid}" not in case.effects.read_text():
                problems.append(f"result of {cid} names pid {pid}, which never ran it")
        committed = case.results.get(cid)
        if committed is not None and text != committed:
            problems.append(f"committed result of {cid} ({committed!r}) became {text!r}")
    results = [m.tool_call_id for m in t if type(m) is ToolResultMessage]
    if len(results) != len(set(results)):
        problems.append(f"duplicate results: {results}")
    for m in case.committed:
        if m not in t:
            problems.append(f"committed message lost: {_describe(m)}")
    if not t or type(t[-1]) is not AssistantMessage or _text(t[-1]) != FINAL_TEXT:
        problems.append("the run did not reach its final answer")
    if problems:
        kills = [s.points[-1] for s in case.segments if s.killed]
        raise AssertionError(
            f"crash case {case.run_id} (kills at {kills}):\n  " + "\n  ".join(problems)
        )


def _describe(m: Message) -> str:
    if type(m) is ToolResultMessage:
        return f"toolResult {m.tool_call_id}"
    return f"{m.role} {_text(m)[:40]!r}"


def child_main(factory: str, request: dict[str, Any]) -> None:
    """Run one crash child (after the zygote forked): connect, recover, run, report."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(request["socket"])
    out = conn.makefile("wb")
    answers = conn.makefile("rb")

    def send(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg).encode() + b"\n")
        out.flush()

    def point(name: str, data: object) -> None:
        send({"point": name, "data": data})
        if answers.readline().strip() != b"go":
            os._exit(3)  # the parent went away

    send({"pid": os.getpid()})
    try:
        owner = load_factory(factory)(request["store"])
        anyio.run(
            run_scenario,
            owner,
            request["run_id"],
            Path(request["effects"]),
            point,
            backend=request["backend"],
        )
        _close(owner)
        send({"done": True})
    except BaseException:  # report anything, then leave without running atexit hooks
        send({"error": traceback.format_exc()})
    out.close()
    conn.close()


__all__ = [
    "FINAL_TEXT",
    "MODEL",
    "PROMPT",
    "TURNS",
    "CrashCase",
    "CrashChildError",
    "CrashLab",
    "ScenarioModel",
    "Segment",
    "announcing",
    "check_case",
    "child_main",
    "load_factory",
    "run_scenario",
    "scenario_tools",
    "transcript_problems",
]
