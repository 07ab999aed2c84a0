"""The parent side of the crash matrix: the zygote, one child per segment, kills at points."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from attrs import define, field

from mule.pi import SUCCESS_STOP_REASONS, AssistantMessage, Message, UserMessage, from_wire
from mule.testing._crash_scenario import PROMPT, close_owner, load_factory


@define
class Segment:
    """One child run: the points it announced and whether it was killed at the last one.

    Attributes:
        points: The crash points the child announced, in order.
        killed: Whether the child was SIGKILLed at its last point (else it finished).

    """

    points: list[str] = field(factory=list)
    killed: bool = False


@define
class CrashCase:
    """Everything one case did, for `check_case`.

    Attributes:
        run_id: The case's run id in the owner's store.
        store: Where the owner keeps the run (what the owner factory is given).
        effects: The file each tool execution appends a line to (its side effect).
        segments: The child runs, in order: one per kill, then the one that finished.
        committed: The messages children announced after committing them (failed attempts
            left out).
        results: Each tool call's committed result text, by call id.
        transcript: The run's transcript as the owner reads it back at the end.

    """

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
    """Runs crash cases against one owner factory; use as a context manager (starts a zygote).

    Attributes:
        factory_spec: The owner factory as given (`"module:function"`), for the child processes.
        factory: The loaded factory: store path -> transcript owner.
        workdir: Where each case gets its own directory (store and side-effect file).
        timeout_s: Seconds to wait for a child to connect or to announce its next point
            before the case fails.

    """

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
            close_owner(owner)
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
            close_owner(owner)
        return case


__all__ = ["CrashCase", "CrashChildError", "CrashLab", "Segment"]
