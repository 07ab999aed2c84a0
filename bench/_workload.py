"""The true-floor workload: scripted turns, what each side must observe, backend primitives.

Nothing here imports mule, so the floor's child processes measure an interpreter without it.
"""

from __future__ import annotations

import asyncio  # noqa: TID251 (the floor is a plain asyncio/trio loop, not anyio)
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

TOOL_NAME = "echo"
# 4-character deltas, distinct along a message (so a lost or repeated delta is seen).
_POOL = tuple(f"{i:04d}" for i in range(10_000))


@dataclass(frozen=True)
class Turn:
    """One scripted model response: text deltas, then tool calls `(id, name, arguments)`."""

    deltas: tuple[str, ...]
    calls: tuple[tuple[str, str, dict[str, int]], ...]


@dataclass(frozen=True)
class Workload:
    """`turns` turns of `deltas` text deltas; `calls` echo calls in every turn but the last."""

    turns: int
    deltas: int
    calls: int = 2

    def script(self) -> tuple[Turn, ...]:
        """Return the turns the model streams (shared, read-only, by every run)."""
        out = []
        n = 0
        for t in range(self.turns):
            deltas = tuple(_POOL[(t * self.deltas + i) % len(_POOL)] for i in range(self.deltas))
            calls = []
            if t < self.turns - 1:
                for k in range(self.calls):
                    calls.append((f"call_{t}_{k}", TOOL_NAME, {"x": n}))
                    n += 1
            out.append(Turn(deltas, tuple(calls)))
        return tuple(out)

    @property
    def events(self) -> int:
        """Listener calls of the floor per run: every delta, tool call and tool result."""
        return self.turns * self.deltas + 2 * self.calls * (self.turns - 1)

    def label(self) -> str:
        return f"{self.turns} turns x {self.deltas} deltas"


def echo_text(arguments: Mapping[str, Any]) -> str:
    """Return the echo tool's result text: `echo:n` for `{"x": n}`."""
    return f"echo:{arguments['x']}"


@dataclass
class Record:
    """What one run's listener observed, in order; and the final assistant text."""

    deltas: list[str] = field(default_factory=list)
    calls: list[tuple[str, str, object]] = field(default_factory=list)
    results: list[tuple[str, str]] = field(default_factory=list)
    final_text: str | None = None


class Mismatch(AssertionError):
    """A side did not observe exactly the workload's deltas, calls and results."""


def expected(script: tuple[Turn, ...]) -> Record:
    """Return the record every run of `script` must produce."""
    rec = Record()
    for turn in script:
        rec.deltas.extend(turn.deltas)
        rec.calls.extend(turn.calls)
        rec.results.extend((cid, echo_text(args)) for cid, _, args in turn.calls)
    rec.final_text = "".join(script[-1].deltas)
    return rec


def check(side: str, got: Record, want: Record) -> None:
    """Raise `Mismatch` naming the first difference between `got` and `want`."""
    for what in ("deltas", "calls", "final_text"):
        a, b = getattr(got, what), getattr(want, what)
        if a != b:
            raise Mismatch(f"{side}: {what} differ: {_diff(a, b)}")
    # Parallel tools may finish in any order; each call's result must be there exactly once.
    if sorted(got.results) != sorted(want.results):
        raise Mismatch(f"{side}: results differ: {_diff(got.results, want.results)}")


def _diff(a: object, b: object) -> str:
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return f"at {i}: got {x!r}, want {y!r}"
        return f"got {len(a)} items, want {len(b)}"
    return f"got {a!r:.80}, want {b!r:.80}"


# -- the backends: one yield primitive (the "network"), spawning, and running ------------------


@dataclass(frozen=True)
class Backend:
    """An event loop as both sides see it: the model stream's yield and a way to run N at once."""

    name: str
    yield_now: Callable[[], Awaitable[None]]

    def run(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run `fn()` to completion on a fresh event loop of this backend."""
        if self.name == "asyncio":
            return asyncio.run(fn())
        import trio

        return trio.run(fn)

    async def gather(self, fns: list[Callable[[], Coroutine[Any, Any, T]]]) -> list[T]:
        """Run every `fn()` concurrently and return their results in order."""
        if self.name == "asyncio":
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(f()) for f in fns]
            return [t.result() for t in tasks]
        import trio

        out: list[Any] = [None] * len(fns)

        async def one(i: int, f: Callable[[], Coroutine[Any, Any, T]]) -> None:
            out[i] = await f()

        async with trio.open_nursery() as nursery:
            for i, f in enumerate(fns):
                nursery.start_soon(one, i, f)
        return out


@types.coroutine
def _sleep0() -> Generator[None, None, None]:
    """Yield to the event loop once, as `asyncio.sleep(0)` does (without its call)."""
    yield


def backend(name: str) -> Backend:
    """Return the named backend ("asyncio" or "trio")."""
    if name == "asyncio":
        return Backend("asyncio", _sleep0)
    if name == "trio":
        import trio

        return Backend("trio", trio.lowlevel.checkpoint)
    raise ValueError(f"unknown backend {name!r}")


__all__ = [
    "TOOL_NAME",
    "Backend",
    "Mismatch",
    "Record",
    "Turn",
    "Workload",
    "backend",
    "check",
    "echo_text",
    "expected",
]
