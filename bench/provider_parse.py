"""Pi events per second of each vendor's I/O-free stream parser, fed a recorded reply.

Workload per vendor: the standard recorded reply of `mule.testing.vendor_streams` (a thinking
block of D/4 deltas, a text block of D deltas, a tool call whose arguments stream in D/4
fragments, usage and the finish), as the fake vendor server frames it. Two measurements:

- parser: the decoded `(event, data)` pairs fed to a fresh parser, as the transport feeds it;
- decode+parse: the body's bytes in 4 KiB pieces through the SSE decoder, then the parser.

The floor is a hand-written loop over the same decoded pairs with no mule types: `json.loads`
each data, pick the delta string out with plain indexing, append a plain tuple. Prints Pi
events per second, microseconds per SSE event, and the ratio to the floor (same process).

`--loop`: the same reply through `mule.effects.run` (asyncio, a listener that counts), the
parser's events handed on as the transport does, one 4 KiB network read at a time: batched
(`from_batches`, one fact and one await per read) against one event per pull (`from_source`,
as the transport did before issue 31); microseconds per Pi event, best of `--repeat`.

    .venv/bin/python bench/provider_parse.py [--deltas 2000] [--repeat 7] [--loop]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from mule.pi import AssistantMessageEvent
from mule.pi.providers import SseDecoder
from mule.testing.vendor_streams import VENDORS, Recording, frames, replay, standard

Frames = list[tuple[str, str]]


def parse(recording: Recording, pairs: Frames) -> list[AssistantMessageEvent]:
    """Run decoded pairs through a fresh parser, as the transport does."""
    parser = recording.parser()
    out: list[AssistantMessageEvent] = [parser.start()]
    for event, data in pairs:
        out += parser.feed(event, data)
        if parser.ended:
            break
    out += parser.finish()
    return out


# -- the floor: plain json.loads and tuples -------------------------------------------------


def _floor_anthropic(pairs: Frames) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for name, data in pairs:
        obj = json.loads(data)
        if name == "content_block_delta":
            delta = obj["delta"]
            out.append((obj["index"], delta.get("text") or delta.get("partial_json")))
    return out


def _floor_google(pairs: Frames) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for _, data in pairs:
        obj = json.loads(data)
        for part in obj["candidates"][0].get("content", {}).get("parts", ()):
            out.append((part.get("thought"), part.get("text")))
    return out


def _floor_completions(pairs: Frames) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for _, data in pairs:
        if data == "[DONE]":
            break
        obj = json.loads(data)
        if obj["choices"]:
            delta = obj["choices"][0]["delta"]
            out.append((delta.get("content"), delta.get("reasoning_content")))
    return out


def _floor_responses(pairs: Frames) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for name, data in pairs:
        obj = json.loads(data)
        if name.endswith(".delta"):
            out.append((name, obj["delta"]))
    return out


FLOORS: dict[str, Callable[[Frames], Sequence[object]]] = {
    "anthropic": _floor_anthropic,
    "google": _floor_google,
    "openai-completions": _floor_completions,
    "openai-responses": _floor_responses,
}


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


# -- through the loop: one fact per read, or one per event -----------------------------------


def reads(recording: Recording, pieces: Sequence[bytes]) -> list[list[AssistantMessageEvent]]:
    """Return the Pi events of each read, as the transport hands them on (start alone first)."""
    parser = recording.parser()
    decoder = SseDecoder()
    out: list[list[AssistantMessageEvent]] = [[parser.start()]]
    for piece in pieces:
        batch: list[AssistantMessageEvent] = []
        for event, data in decoder.feed(piece):
            batch += parser.feed(event, data)
            if parser.ended:
                break
        out.append(batch)
        if parser.ended:
            break
    for event, data in decoder.close():
        out[-1] += parser.feed(event, data)
    out[-1] += parser.finish()
    return [b for b in out if b]


def loop_seconds(
    recording: Recording, batches: list[list[AssistantMessageEvent]], batched: bool
) -> float:
    """Return the seconds of one `mule.effects.run` of the reply (one turn, then stop)."""
    import anyio
    import anyio.lowlevel
    from returns.result import Success

    import mule.effects as fx
    from mule.pi import AssistantMessageEventStream, UserMessage

    async def by_read() -> Any:
        for batch in batches:
            await anyio.lowlevel.checkpoint()  # one network read
            yield batch

    async def by_event() -> Any:
        for batch in batches:
            await anyio.lowlevel.checkpoint()
            for event in batch:
                yield event

    def stream(model: Any, context: Any, options: Any) -> AssistantMessageEventStream:
        if batched:
            return AssistantMessageEventStream.from_batches(by_read())
        return AssistantMessageEventStream.from_source(by_event())

    seen = 0

    async def emit(event: Any, signal: Any) -> Any:
        nonlocal seen
        seen += 1
        return Success(None)

    async def stop(turn: Any, signal: Any) -> Any:
        return Success(True)

    inp = fx.MulePortsInput(
        model=recording.model,
        system_prompt="",
        messages=(UserMessage("go", 1),),
        stream=stream,
        ports=fx.Ports(emit=emit, should_stop=stop),
    )

    async def go() -> float:
        started = time.perf_counter()
        result = await fx.run(inp)
        took = time.perf_counter() - started
        assert isinstance(result, Success), result
        return took

    return anyio.run(go)


def main() -> None:
    """Print events per second per vendor parser and the ratio to the floor."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--deltas", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--loop", action="store_true", help="also through mule.effects.run")
    args = ap.parse_args()
    print(
        f"{'vendor':<20}{'sse':>6}{'pi':>6}"
        f"{'parser ev/s':>13}{'us/sse':>8}{'x floor':>8}"
        f"{'decode+parse ev/s':>19}{'us/sse':>8}{'x floor':>8}"
    )
    for vendor in VENDORS:
        rec = standard(vendor, args.deltas)
        pairs = frames(rec.body)
        pieces = [rec.body[i : i + 4096] for i in range(0, len(rec.body), 4096)]
        events = parse(rec, pairs)
        assert events[-1].type == "done", events[-1]
        assert len(replay(rec, pieces)) == len(events)
        parser_s = _best(lambda: parse(rec, pairs), args.repeat)  # noqa: B023
        full_s = _best(lambda: replay(rec, pieces), args.repeat)  # noqa: B023
        floor_s = _best(lambda: FLOORS[vendor](pairs), args.repeat)  # noqa: B023
        n, sse = len(events), len(pairs)
        print(
            f"{vendor:<20}{sse:>6}{n:>6}"
            f"{n / parser_s:>13,.0f}{parser_s / sse * 1e6:>8.2f}{parser_s / floor_s:>8.2f}"
            f"{n / full_s:>19,.0f}{full_s / sse * 1e6:>8.2f}{full_s / floor_s:>8.2f}"
        )
    if args.loop:
        print(
            f"\n{'through the loop':<20}{'reads':>6}{'pi':>6}"
            f"{'batched us/ev':>15}{'1 a pull us/ev':>16}{'batched/1':>11}"
        )
        for vendor in VENDORS:
            rec = standard(vendor, args.deltas)
            pieces = [rec.body[i : i + 4096] for i in range(0, len(rec.body), 4096)]
            batches = reads(rec, pieces)
            n = sum(map(len, batches))
            best = {True: float("inf"), False: float("inf")}
            for i in range(args.repeat + 1):  # the first round warms up
                for batched in (True, False) if i % 2 else (False, True):
                    took = loop_seconds(rec, batches, batched)
                    if i:
                        best[batched] = min(best[batched], took)
            print(
                f"{vendor:<20}{len(batches):>6}{n:>6}"
                f"{best[True] / n * 1e6:>15.2f}{best[False] / n * 1e6:>16.2f}"
                f"{best[True] / best[False]:>11.3f}"
            )


if __name__ == "__main__":
    main()
