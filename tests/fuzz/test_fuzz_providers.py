"""Fuzz every provider's stream decoder end to end through `mule.run` (issue 17.2, defect 6).

Each example serves one vendor's recorded reply from a real local HTTP server
(`mule.testing.fake_anthropic`'s scripted server, chunked transfer, pieces of any size), damaged
one way: a value in a chunk replaced (numbers for ids, lone surrogates, objects...), a chunk
replaced by deep, oversized or truncated JSON or garbage, the body cut short, or the stream
stalled. The run goes through `mule.run` with a tool that gates its arguments.

Invariants: the run ends (a deadline per example) with exactly one `run_end`, as an outcome or
a `MuleRunFailed`, nothing else raised; every message committed (`message_end`) is UTF-8
encodable and reads back through the codec.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import anyio
import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

import mule.promise as promise
from mule.effects import MULE_CODEC, MessageEnd, MuleEvent
from mule.pi import AbortSignal, Message, StreamOptions, UserMessage
from mule.testing.fake_anthropic import Reply, Stall, serve_script
from mule.testing.vendor_streams import VENDORS, standard
from tests.fuzz.budget import fuzz_settings, tally
from tests.fuzz.hostile import json_values

DEADLINE_S = 8.0

pytestmark = pytest.mark.slow  # a few seconds of examples each


@promise.tool
def read(path: str, lines: list[int], all: bool = False) -> str:
    """Read a file (the tool the recorded replies call)."""
    return f"{path}: {len(lines)} lines"


def leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in leaves(v, (*path, k))] or [path]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in leaves(v, (*path, i))] or [path]
    return [path]


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = replaced(value[path[0]], path[1:], new)
    return copy


@st.composite
def damaged_body(draw: st.DrawFn, body: bytes) -> list[bytes | Stall]:
    """Return the body damaged one way, in pieces of any size."""
    lines = body.split(b"\n")
    data_at = [i for i, line in enumerate(lines) if line.startswith(b"data: {")]
    how = draw(st.sampled_from(["value", "value", "value", "chunk", "cut", "stall", "keep"]))
    if how in ("value", "chunk") and data_at:
        i = draw(st.sampled_from(data_at))
        head, _, rest = lines[i].partition(b"data: ")
        tail = b"\r" if rest.endswith(b"\r") else b""
        chunk = json.loads(rest)
        if how == "value":
            new = json.dumps(
                replaced(chunk, draw(st.sampled_from(leaves(chunk))), draw(json_values))
            )
        else:
            n = draw(st.integers(50, 5000))
            new = draw(
                st.sampled_from(
                    [
                        "[" * n + "]" * n,
                        '{"a":' * n + "1" + "}" * n,
                        json.dumps(chunk)[: n % max(1, len(json.dumps(chunk)))],
                        '{"x": ' + "9" * n + "}",
                        json.dumps({**chunk, "pad": "x" * (n * 200)}),
                        "not json at all",
                    ]
                )
            )
        lines[i] = head + b"data: " + new.encode("utf-8", "surrogatepass") + tail
    damaged = b"\n".join(lines)
    if how == "cut":
        damaged = damaged[: draw(st.integers(0, len(damaged)))]
    cuts = sorted(draw(st.lists(st.integers(0, len(damaged)), max_size=6)))
    pieces: list[bytes | Stall] = [
        damaged[a:b] for a, b in zip([0, *cuts], [*cuts, len(damaged)], strict=True) if b > a
    ]
    if how == "stall":
        pieces.insert(draw(st.integers(0, len(pieces))), Stall())
    return pieces


async def one_run(vendor: str, steps: list[bytes | Stall]) -> list[MuleEvent]:
    seen: list[MuleEvent] = []

    def listener(event: MuleEvent, signal: AbortSignal) -> None:
        seen.append(event)

    async with serve_script(Reply(steps=tuple(steps))) as server:
        inp = promise.MuleRunInput(
            model=evolve(standard(vendor, 4).model, base_url=server.url),
            system_prompt="",
            messages=(UserMessage("read it", 1),),
            tools=(read,),
            stream_options=StreamOptions(api_key="k", max_retries=0),
            model_stream_idle_timeout_ms=300,
        )
        with anyio.fail_after(DEADLINE_S):
            with contextlib.suppress(promise.MuleRunFailed):
                await promise.run(inp, listener)
    return seen


BODIES = {vendor: standard(vendor, 4).body for vendor in VENDORS}


@fuzz_settings(120, deadline_ms=int(DEADLINE_S * 1000) + 2000)
@given(st.sampled_from(VENDORS), st.data())
def test_a_damaged_stream_ends_the_run_once_and_commits_readable_messages(
    vendor: str, data: st.DataObject
) -> None:
    tally(f"providers: {vendor} through mule.run")
    steps = data.draw(damaged_body(BODIES[vendor]))
    seen = anyio.run(one_run, vendor, steps)
    assert [e.type for e in seen].count("run_end") == 1
    assert seen[-1].type == "run_end"
    for event in seen:
        if isinstance(event, MessageEnd):
            text = MULE_CODEC.to_json(event.value)
            text.encode("utf-8")
            assert MULE_CODEC.from_json(Message, text) == event.value
