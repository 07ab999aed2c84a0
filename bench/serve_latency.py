"""The latency `mule serve` adds from a pi stdout line to a WebSocket client; the parse rate.

The parse rate is the bridge's, against pi's own emission rate.

Latency. A stand-in pi (`bench/_stamping_pi.py`) writes a run whose text deltas carry the
`CLOCK_MONOTONIC` time at which each line was written, paced `--interval-us` apart (so nothing
queues: this is latency, not throughput). A WebSocket client in its own process
(`bench/_latency_client.py`, so it shares no GIL with the server) takes the time as each frame
arrives and subtracts. Two paths, the same uvicorn, client and pacing:

- mule: `mule.serve` (the bridge parses the line, maps it to mule events, the job fans the
  compact frame out through the client's queue);
- floor: a bare Starlette endpoint that runs the same stand-in and forwards each stdout line to
  the socket as it is, with no parsing at all.

mule adds = mule - floor, at p50 and p99 (target: at most 1 ms at p50).

Parse rate. The real pi (`node/node_modules/.bin/pi`), pointed at the fake OpenAI server
streaming `--pieces` tokens with no delay, is recorded: its stdout lines and their arrival
times give pi's emission rate (lines per second, first to last). The same bytes then go through
the bridge's parsing (LineFramer, LineDecoder, EventMapper) as fast as it can, in the chunks
the bridge reads (64 KiB, anyio's default); the ratio is
the headroom (target: at least 10x).

    .venv/bin/python bench/serve_latency.py [--deltas 1000] [--interval-us 2000] [--runs 3]
        [--pieces 300,1000,3000] [--rounds 5] [--warm 1] [--repeat 5] [--parse-only]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from mule.pirc import (
    DEFAULT_MAX_LINE_BYTES,
    BridgeConfig,
    EventMapper,
    LineDecoder,
    LineFramer,
)
from mule.serve import ServerConfig, create_app
from mule.serve._app import bind_socket
from mule.serve._setup import make_agent_dir, model_setup
from mule.testing.fake_openai import FakeOpenAI, chat_text

HERE = Path(__file__).resolve().parent
STAMPING_PI = HERE / "_stamping_pi.py"
CLIENT = HERE / "_latency_client.py"
REAL_PI = HERE.parent / "node" / "node_modules" / ".bin" / "pi"
TOKEN = "bench-token-0123456789abcdef"
PROMPT = b'{"type":"prompt","id":"bench-1","message":"go"}\n'
READ_BYTES = 65536  # what the bridge's reader gets per receive (anyio's default max_bytes)


def percentile(values: Sequence[float], p: float) -> float:
    """Return the p-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


@contextmanager
def serving(app: Any) -> Iterator[int]:
    """Run `app` under uvicorn (asyncio) in a thread on 127.0.0.1; yield its port."""
    sock = bind_socket("127.0.0.1", 0)
    port: int = sock.getsockname()[1]
    config = uvicorn.Config(app, ws="websockets-sansio", lifespan="on", log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, args=([sock],), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


def stamping_pi(tmp: Path) -> str:
    """Return an executable that runs the stand-in pi with this interpreter."""
    exe = tmp / "pi"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STAMPING_PI}" "$@"\n')
    exe.chmod(0o755)
    return str(exe)


@contextmanager
def client(*args: str) -> Iterator[subprocess.Popen[str]]:
    """Start the measuring client in its own process; yield it once it is connected."""
    with subprocess.Popen(
        [sys.executable, str(CLIENT), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the latency client did not connect")
        yield proc


def _result(proc: subprocess.Popen[str]) -> list[float]:
    out, _ = proc.communicate(timeout=120)
    values: list[float] = json.loads(out.strip().splitlines()[-1])
    return values


def mule_latencies(exe: str, deltas: int, interval_us: int) -> list[float]:
    """Microseconds from each delta line's write to its frame's arrival, through mule.serve."""
    env = {"FAKE_PI_DELTAS": str(deltas), "FAKE_PI_INTERVAL_US": str(interval_us)}
    if "FAKE_PI_PROTOCOL" in os.environ:  # the stand-in's protocol: 1.6 (default) or 0.73
        env["FAKE_PI_PROTOCOL"] = os.environ["FAKE_PI_PROTOCOL"]
    bridge = BridgeConfig(provider="local", model="fake", executable=exe, env=env)
    app = create_app(ServerConfig(bridge=bridge, token=TOKEN, client_queue=1 << 16))
    with serving(app) as port, client("mule", f"ws://127.0.0.1:{port}/ws", TOKEN) as proc:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        job = httpx.post(f"http://127.0.0.1:{port}/jobs", json={"prompt": "go"}, headers=auth)
        assert proc.stdin is not None
        proc.stdin.write(job.json()["id"] + "\n")
        proc.stdin.flush()
        return _result(proc)


def floor_app(exe: str, deltas: int, interval_us: int) -> Starlette:
    """Return a bare endpoint: run the stand-in, forward each stdout line to the socket as is."""
    env = dict(os.environ, FAKE_PI_DELTAS=str(deltas), FAKE_PI_INTERVAL_US=str(interval_us))

    async def endpoint(ws: WebSocket) -> None:
        await ws.accept()
        async with await anyio.open_process([exe], env=env) as proc:
            assert proc.stdin is not None
            assert proc.stdout is not None
            await proc.stdin.send(PROMPT)
            pending = b""
            async for chunk in proc.stdout:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    await ws.send_text(line.decode())
                    if line.startswith(b'{"type":"agent_end"'):
                        await proc.stdin.aclose()
                        await ws.close()
                        return

    return Starlette(routes=[WebSocketRoute("/ws", endpoint)])


def floor_latencies(exe: str, deltas: int, interval_us: int) -> list[float]:
    """Return the same measurement through the bare endpoint."""
    app = floor_app(exe, deltas, interval_us)
    with serving(app) as port, client("floor", f"ws://127.0.0.1:{port}/ws") as proc:
        return _result(proc)


def latency_figures(exe: str, deltas: int, interval_us: int, runs: int) -> dict[str, Any]:
    """Measure both latency paths `runs` times, interleaved; return their figures."""
    report: dict[str, Any] = {}
    samples: dict[str, list[float]] = {"mule": [], "floor": []}
    cpu = {"mule": 0.0, "floor": 0.0}
    paths = {"floor": floor_latencies, "mule": mule_latencies}
    for _ in range(runs):  # interleaved, so machine load hits both alike
        for name, path in paths.items():
            start = time.process_time()  # the server's CPU: pi and the client run apart
            samples[name] += path(exe, deltas, interval_us)
            cpu[name] += time.process_time() - start
    for name, values in samples.items():
        report[name] = {
            "n": len(values),
            "p50_us": percentile(values, 50),
            "p99_us": percentile(values, 99),
            "mean_us": statistics.fmean(values),
            "cpu_us_per_line": cpu[name] / len(values) * 1e6,
        }
    report["added"] = {
        k: report["mule"][k] - report["floor"][k] for k in ("p50_us", "p99_us", "cpu_us_per_line")
    }
    return report


# -- parse rate ----------------------------------------------------------------------------------


class Recording(NamedTuple):
    """One measured run of the real pi."""

    data: bytes  # its stdout, from the prompt's response to agent_end, each line ending in \n
    lines: int  # how many lines that is
    rate: float  # message_update lines per second of wall time, first to last
    cpu_rate: float  # lines per second of pi's own CPU time (user + system) over the run


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` and its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def record_real_pi(pieces: int, tmp: Path, warm: int = 0) -> Recording:
    """Return the real pi's stdout lines for one run and its emission rates.

    pi streams a `pieces`-token answer from the fake OpenAI server, which sends it with no delay:
    how fast pi writes the lines is then up to pi alone. The rate is over its `message_update`
    lines, first to last (the start holds the model request). `warm` prompts go first in the
    same process and are not measured: a long-lived pi (`mule serve` keeps one per job) has its
    JIT warm, and a warm pi is the faster one, the harder target.

    The CPU rate is how fast pi would write with a core to itself; unlike the wall rate it
    hardly moves with machine load (on 2 shared cores the wall rate varied 5x between runs).
    """
    text = "".join(f"tok{i} " for i in range(pieces))
    with FakeOpenAI() as fake:
        fake.set_default(chat_text(text, pieces=pieces))
        setup = model_setup("local", "fake", base_url=fake.base_url, environ={})
        agent = make_agent_dir(setup)
        cfg = BridgeConfig(
            provider="local",
            model="fake",
            executable=str(REAL_PI),
            agent_dir=str(agent),
            home=str(tmp),
            tmpdir=str(tmp),
            cwd=str(tmp),
            no_tools=True,
            api_key_env=setup.key_env,
            api_key=setup.key,
        )
        try:
            with subprocess.Popen(
                cfg.argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=cfg.child_env(),
                cwd=tmp,
            ) as proc:
                assert proc.stdin is not None
                assert proc.stdout is not None
                lines: list[bytes] = []
                stamps: list[float] = []
                cpu = 0.0
                for n in range(warm + 1):  # the last run is the one kept
                    prompt = {"type": "prompt", "id": f"bench-{n + 1}", "message": "go"}
                    proc.stdin.write(json.dumps(prompt).encode() + b"\n")
                    proc.stdin.flush()
                    lines, stamps = [], []
                    cpu = _cpu_seconds(proc.pid)
                    end = b'{"type":"agent_end"'  # pi >= 1.1 writes agent_settled after it
                    for raw in proc.stdout:
                        stamps.append(time.perf_counter())
                        lines.append(raw)
                        if len(lines) == 1 and b'"disposition"' in raw:
                            end = b'{"type":"agent_settled"'
                        if raw.startswith(end):
                            break
                    cpu = _cpu_seconds(proc.pid) - cpu
                proc.stdin.close()
                proc.wait(30)
        finally:
            shutil.rmtree(agent, ignore_errors=True)
    updates = [t for t, line in zip(stamps, lines, strict=True) if b'"message_update"' in line]
    rate = (len(updates) - 1) / (updates[-1] - updates[0])
    # One buffer, as the bridge reads it: the lines as readline made them (tens of MB of
    # separate objects, kept alive) slowed any parsing in this process by a quarter.
    data = b"".join(lines)
    return Recording(data, len(lines), rate, len(lines) / cpu if cpu > 0 else float("inf"))


def json_floor(data: bytes, repeat: int) -> float:
    """Lines per second of `json.loads` alone on the same lines (median of `repeat`)."""
    lines = data.splitlines()
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        for line in lines:
            json.loads(line)
        rates.append(len(lines) / (time.perf_counter() - start))
    return statistics.median(rates)


class ParseRate(NamedTuple):
    """The bridge's parsing of one recording."""

    rate: float  # lines per second of wall time (median)
    cpu_rate: float  # lines per second of CPU time (median)
    events: int  # bridge events made


def parse_rate(data: bytes, count: int, repeat: int) -> ParseRate:
    """Lines per second through the bridge's parsing (framer, JSON, mapper); median of `repeat`.

    Every line counts, lifecycle ones too (`agent_end` holds the whole conversation): the
    bridge parses them all, so this is per line of pi's, as pi's rate is.
    """
    chunks = [data[i : i + READ_BYTES] for i in range(0, len(data), READ_BYTES)]
    rates, cpu_rates, events = [], [], 0
    for _ in range(repeat):
        framer, mapper = LineFramer(DEFAULT_MAX_LINE_BYTES), EventMapper()
        read = LineDecoder().read  # the bridge's: one per pi
        mapper.begin()
        cpu = time.process_time()
        start = time.perf_counter()
        n = 0
        for chunk in chunks:
            for line in framer.feed(chunk):
                record = read(line)
                if record is None:
                    continue
                if isinstance(record, tuple):  # a streamed delta, from its parts (the bridge's)
                    mapper.delta(record)  # one event per delta
                    n += 1
                elif record.get("type") != "response":
                    n += len(mapper.map(record))
        rates.append(count / (time.perf_counter() - start))
        cpu_rates.append(count / max(time.process_time() - cpu, 1e-9))
        events = n
    return ParseRate(statistics.median(rates), statistics.median(cpu_rates), events)


def parse_figures(pieces: int, tmp: Path, rounds: int, repeat: int, warm: int) -> dict[str, Any]:
    """Record the real pi `rounds` times; after each, parse its lines `repeat` times.

    Each round's ratio is the bridge's median rate over that round's pi rate, measured back to
    back, so a change of machine load hits both sides alike; the figures are medians over the
    rounds (and the lowest ratio, the round least kind to the bridge).
    """
    pi, bridge, floor, ratios, cpu_ratios = [], [], [], [], []
    pi_cpu, bridge_cpu = [], []
    rec = Recording(b"", 0, 0.0, 0.0)
    events = 0
    for _ in range(rounds):
        rec = record_real_pi(pieces, tmp, warm)
        parsed = parse_rate(rec.data, rec.lines, repeat)
        events = parsed.events
        pi.append(rec.rate)
        bridge.append(parsed.rate)
        pi_cpu.append(rec.cpu_rate)
        bridge_cpu.append(parsed.cpu_rate)
        floor.append(json_floor(rec.data, repeat))
        ratios.append(parsed.rate / rec.rate)
        cpu_ratios.append(parsed.cpu_rate / rec.cpu_rate)
    return {
        "pieces": pieces,
        "lines": rec.lines,
        "bytes_per_line": (len(rec.data) - rec.lines) / rec.lines,
        "events": events,
        "pi_lines_per_s": statistics.median(pi),
        "pi_lines_per_s_all": pi,
        "bridge_lines_per_s": statistics.median(bridge),
        "json_lines_per_s": statistics.median(floor),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "pi_lines_per_cpu_s": statistics.median(pi_cpu),
        "bridge_lines_per_cpu_s": statistics.median(bridge_cpu),
        "cpu_ratio": statistics.median(cpu_ratios),
        "cpu_ratio_min": min(cpu_ratios),
    }


def print_latency(report: dict[str, Any], args: argparse.Namespace) -> None:
    """Print the latency table."""
    print(
        f"latency, pi stdout line -> WebSocket client ({args.runs} runs x {args.deltas}"
        f" deltas, {args.interval_us} us apart)"
    )
    print(f"{'path':<8}{'n':>7}{'p50 us':>10}{'p99 us':>10}{'mean us':>10}{'cpu us/line':>13}")
    for name in ("floor", "mule"):
        r = report[name]
        print(
            f"{name:<8}{r['n']:>7}{r['p50_us']:>10.0f}{r['p99_us']:>10.0f}"
            f"{r['mean_us']:>10.0f}{r['cpu_us_per_line']:>13.0f}"
        )
    added = report["added"]
    print(
        f"mule adds: p50 {added['p50_us']:.0f} us, p99 {added['p99_us']:.0f} us"
        f" (target p50 <= 1000 us); server CPU {added['cpu_us_per_line']:.0f} us more per line"
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run both measurements, print a report, return the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--deltas", type=int, default=1000, help="stamped deltas per run")
    p.add_argument("--interval-us", type=int, default=2000, help="pause between deltas")
    p.add_argument("--runs", type=int, default=3, help="runs per path")
    p.add_argument(
        "--pieces", default="300,1000,3000", help="tokens per real-pi recording (comma-separated)"
    )
    p.add_argument("--repeat", type=int, default=5, help="parse repetitions per recording")
    p.add_argument("--rounds", type=int, default=5, help="real-pi recordings per size")
    p.add_argument("--warm", type=int, default=1, help="unmeasured prompts before each recording")
    p.add_argument("--parse-only", action="store_true", help="skip the latency measurement")
    args = p.parse_args(argv)
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mule-bench-serve-") as tmp_name:
        tmp = Path(tmp_name)
        if not args.parse_only:
            report |= latency_figures(stamping_pi(tmp), args.deltas, args.interval_us, args.runs)
        if REAL_PI.exists():
            report["parse"] = [
                parse_figures(int(x), tmp, args.rounds, args.repeat, args.warm)
                for x in args.pieces.split(",")
            ]
    if not args.parse_only:
        print_latency(report, args)
    if "parse" in report:
        print(
            f"parse rate: real pi's stdout through the bridge's parsing ({args.rounds} recordings"
            f" per size after {args.warm} warm-up prompt(s), {args.repeat} parses each; medians)"
        )
        head = ("tokens", "bytes/line", "pi lines/s", "bridge lines/s", "json.loads", "x pi", "min")
        print("".join(f"{h:>15}" for h in head))
        for r in report["parse"]:
            row = (
                f"{r['pieces']:>15}{r['bytes_per_line']:>15,.0f}{r['pi_lines_per_s']:>15,.0f}"
                f"{r['bridge_lines_per_s']:>15,.0f}{r['json_lines_per_s']:>15,.0f}"
                f"{r['ratio']:>15.1f}{r['ratio_min']:>15.1f}"
            )
            print(row)
        print("per CPU second (each side's own CPU time: what it does with a core to itself)")
        head2 = ("tokens", "pi lines/cpu-s", "bridge", "x pi", "min")
        print("".join(f"{h:>15}" for h in head2))
        for r in report["parse"]:
            row = (
                f"{r['pieces']:>15}{r['pi_lines_per_cpu_s']:>15,.0f}"
                f"{r['bridge_lines_per_cpu_s']:>15,.0f}{r['cpu_ratio']:>15.1f}"
                f"{r['cpu_ratio_min']:>15.1f}"
            )
            print(row)
        print("(target: >= 10x pi; json.loads alone on the same lines for comparison)")
    else:
        print(f"parse rate: skipped ({REAL_PI} is not installed)")
    return report


if __name__ == "__main__":
    main()
