"""The bridge's fault matrix (issue 17.3): a fake pi that misbehaves in every way we know.

Dies, hangs, floods, stops reading, writes garbage, huge or deep lines, ignores EOF and signals:
on asyncio and trio, each ends in a typed result (a `JobResult` or a `BridgeError`) within a
bounded time, and no child is left unreaped.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from mule.pirc import (
    Bridge,
    BridgeConfig,
    BridgeError,
    JobResult,
    JobTimeout,
    ProcessExited,
    WriteTimeout,
)
from tests.pirc.helpers import assert_reaped

FAKE = str(Path(__file__).parent / "fake_pi.py")

# scenario -> what the run must end in (a JobResult outcome, or a BridgeError class)
MATRIX: dict[str, str | type[BridgeError]] = {
    "ok": "completed",
    "faults": "completed",  # a bad, a huge (over max_line_bytes) and a non-object line
    "garbage": "completed",
    "deep": "completed",
    "flood": "completed",
    "die": ProcessExited,
    "exit": ProcessExited,
    "hang": JobTimeout,  # never answers, ignores SIGTERM and EOF
    "deaf": WriteTimeout,  # stops reading stdin, ignores SIGTERM, a survivor holds stdout
}

JOB_LIMIT = 3.0  # a run that does next to no work
FLOOD_LINES = 20_000
# The flood's limit grows with its work: the bridge frames and maps ~10-17k lines/s on a busy
# 2-core box (linear in the line count), so a floor of 1,500 lines/s only fails a bridge that
# stalls or goes superlinear; a hang still ends in JobTimeout, within the test's 30 s bound.
FLOOD_FLOOR = 1_500


def cfg(scenario: str) -> BridgeConfig:
    base: dict[str, Any] = {
        "provider": "local",
        "model": "fake",
        "executable": FAKE,
        "env": {
            "FAKE_PI_SCENARIO": scenario,
            "FAKE_PI_HUGE": "100000",
            "FAKE_PI_FLOOD": str(FLOOD_LINES),
        },
        "max_line_bytes": 65536,
        "command_timeout": 3.0,
        "write_timeout": 0.5,
        "stop_grace": 0.3,
        "abort_grace": 0.3,
        "event_buffer": 10,
    }
    return BridgeConfig(**base)


def _survivor(b: Bridge) -> int | None:
    proc = b._process
    for line in proc._stderr_tail if proc is not None else ():
        m = re.search(r"grandchild=(\d+)", line)
        if m:
            return int(m.group(1))
    return None


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", list(MATRIX))
async def test_fault_ends_typed_bounded_and_reaped(scenario: str) -> None:
    expected = MATRIX[scenario]
    b = Bridge(cfg(scenario))
    outcome: JobResult | BridgeError
    survivor = None
    try:
        with anyio.fail_after(30):  # the bound: every fault ends well within it
            async with b:
                if scenario == "deaf":
                    for _ in range(500):  # bounded: the fake reports its survivor on stderr
                        survivor = _survivor(b)
                        if survivor:
                            break
                        await anyio.sleep(0.01)
                message = "x" * 1_000_000 if scenario == "deaf" else "go"
                limit = JOB_LIMIT
                if scenario == "flood":
                    limit += FLOOD_LINES / FLOOD_FLOOR
                try:
                    outcome = await b.run(message, time_limit=limit)
                except BridgeError as exc:
                    outcome = exc
    finally:
        if survivor:
            os.kill(survivor, signal.SIGKILL)
    if isinstance(expected, str):
        # the lines framed tell a stall (few) from a starved but progressing bridge (many)
        assert isinstance(outcome, JobResult), (outcome, b.stats.frames.lines)
        assert outcome.outcome == expected
    else:
        assert isinstance(outcome, expected), outcome
    assert b.process_done.is_set()
    assert_reaped(b.pid)
    if scenario == "flood":
        assert b.stats.frames.lines > FLOOD_LINES
