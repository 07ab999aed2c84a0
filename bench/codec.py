"""Encode and decode throughput of mule's codec on a real run's events, against a true floor.

Workload: one scripted run of T turns, each streaming D text deltas and two tool calls (each
with argument deltas) with a priced usage, then a final text turn; its events are collected
once. Each path is then timed over all of them, per event:

- `journal`: the stored record of every event, as the SQLite journal and the DBOS log write it;
- `server`: the WebSocket frame of every event, as `mule serve` sends it;
- `full`: the full JSON form of every lifecycle event (everything but `message_update`);
- `decode`: every committed record back to its event, as recovery reads it.

The floor is the JSON library alone: the same JSON, held as plain dicts and lists built in
advance, written by `json.dumps` (for decoding, `json.loads` alone). The ratio mule/floor is
what the codec adds on top of writing (or parsing) the JSON.

    .venv/bin/python bench/codec.py [--turns 20] [--deltas 200] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence

import anyio

import mule
from mule.effects import MessageUpdate, MuleEvent, event_from_record, event_to_record, to_json
from mule.journal import STREAM_ONLY
from mule.pi import Model, Usage, UsageCost, UserMessage
from mule.pi._scripted import Call, Reply, ScriptedModel, Text
from mule.serve._wire import encode_event

MODEL = Model(id="bench", name="bench", api="scripted", provider="bench", base_url="")
USAGE = Usage(120, 35, 0, 0, 155, UsageCost(0.00036, 0.000525, 0.0, 0.0, 0.000885))


def script(turns: int, deltas: int) -> list[Reply]:
    """Return the workload's replies."""
    out = []
    for t in range(turns):
        text = Text(tuple("tok " for _ in range(deltas)))
        calls = (
            Call(f"a{t}", "work", {"path": f"src/file_{t}.py", "n": t}, pieces=4),
            Call(f"b{t}", "work", {"path": "README.md", "n": t + 1}, pieces=4),
        )
        out.append(Reply(blocks=(text, *calls), usage=USAGE))
    out.append(Reply(blocks=(Text(tuple("end " for _ in range(deltas))),), usage=USAGE))
    return out


def collect(turns: int, deltas: int) -> list[MuleEvent]:
    """Run the workload once through `mule.run` and return every event it emitted."""
    events: list[MuleEvent] = []

    @mule.tool(name="work", replay="safe")
    async def work(path: str, n: int) -> str:
        """Pretend to work on a file."""
        return f"worked on {path} ({n})"

    inp = mule.MuleRunInput(
        model=MODEL,
        system_prompt="bench",
        messages=(UserMessage("go", 1),),
        stream=ScriptedModel(script(turns, deltas)),
        tools=(work,),
    )
    anyio.run(mule.run, inp, lambda event, signal: events.append(event))
    return events


# -- the floor: the same JSON, already built ----------------------------------------------


def floor_encode(texts: Sequence[str]) -> Callable[[], None]:
    """Return a loop writing each event's JSON from plain dicts and lists built in advance."""
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    plain = [json.loads(s) for s in texts]

    def go() -> None:
        for d in plain:
            encode(d)

    return go


def floor_decode(texts: Sequence[str]) -> Callable[[], None]:
    """Return a loop parsing each record into plain dicts and lists."""
    loads = json.loads

    def go() -> None:
        for s in texts:
            loads(s)

    return go


# -- mule's paths --------------------------------------------------------------------------


def journal_encode(events: Sequence[MuleEvent]) -> Callable[[], None]:
    def go() -> None:
        for e in events:
            event_to_record(e)

    return go


def server_encode(events: Sequence[MuleEvent]) -> Callable[[], None]:
    def go() -> None:
        for i, e in enumerate(events):
            _ = encode_event("job-1", i, e).text

    return go


def full_encode(events: Sequence[MuleEvent]) -> Callable[[], None]:
    def go() -> None:
        for e in events:
            to_json(e)

    return go


def decode(texts: Sequence[str]) -> Callable[[], None]:
    def go() -> None:
        for s in texts:
            event_from_record(s)

    return go


def best_us(fn: Callable[[], None], n: int, repeat: int) -> float:
    """Best CPU microseconds per item over `repeat` timed passes (after one warm-up).

    CPU time of this process, not wall time: other work on a shared machine does not count.
    """
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    events = collect(args.turns, args.deltas)
    lifecycle = [e for e in events if type(e) is not MessageUpdate]
    journal = [event_to_record(e) for e in events]
    server = [encode_event("job-1", i, e).text for i, e in enumerate(events)]
    full = [to_json(e) for e in lifecycle]
    committed = [r for r, e in zip(journal, events, strict=True) if e.type not in STREAM_ONLY]
    print(
        f"{len(events)} events ({len(events) - len(lifecycle)} message_update), "
        f"{len(committed)} committed records; best of {args.repeat}"
    )
    print(f"{'path':8} {'mule us/event':>14} {'floor us/event':>15} {'ratio':>7} {'events/s':>10}")
    cases = [
        ("journal", journal_encode(events), floor_encode(journal)),
        ("server", server_encode(events), floor_encode(server)),
        ("full", full_encode(lifecycle), floor_encode(full)),
        ("decode", decode(committed), floor_decode(committed)),
    ]
    counts = {"full": len(lifecycle), "decode": len(committed)}
    for name, mine, floor in cases:
        n = counts.get(name, len(events))
        a = best_us(mine, n, args.repeat)
        b = best_us(floor, n, args.repeat)
        print(f"{name:8} {a:14.2f} {b:15.2f} {a / b:7.2f} {1e6 / a:10.0f}")


if __name__ == "__main__":
    main()
