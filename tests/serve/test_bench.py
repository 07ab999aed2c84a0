"""bench/serve_latency.py runs at its smallest and measures what it claims (no timing asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import serve_latency as bench
from tests.pirc.helpers import pi_available

pytestmark = pytest.mark.slow


def test_both_latency_paths_see_every_stamped_delta(tmp_path: Path) -> None:
    """Through mule.serve and through the bare floor, each delta arrives once, stamped."""
    exe = bench.stamping_pi(tmp_path)
    for path in (bench.mule_latencies, bench.floor_latencies):
        got = path(exe, 40, 500)
        assert len(got) == 40, path.__name__
        assert all(0 < us < 60e6 for us in got)


@pytest.mark.pi
@pytest.mark.skipif(not pi_available(), reason="pi CLI not installed")
def test_the_real_pi_recording_parses_into_events(tmp_path: Path) -> None:
    """The recorded run of the real pi goes through the bridge's parsing into mule events."""
    # pi 1.6.0 writes 50 small lines in under one clock tick of CPU: 1,000 take several
    data, count, emitted, cpu_rate = bench.record_real_pi(1000, tmp_path, warm=1)
    assert emitted > 0
    assert 0 < cpu_rate < float("inf")  # pi's CPU time over the run was read
    lines = data.splitlines()
    assert len(lines) == count
    assert data.endswith(b"\n")
    assert lines[0].startswith(b'{"id":"bench-2","type":"response"')  # the warm-up is not kept
    assert lines[-1].startswith((b'{"type":"agent_end"', b'{"type":"agent_settled"'))
    rate, cpu, events = bench.parse_rate(data, count, 1)
    assert rate > 0
    assert cpu > 0
    updates = sum(b'"message_update"' in line for line in lines)
    assert updates > 500  # pi 1.6.0 may write two tokens' deltas as one
    assert events >= updates  # every message_update, plus the lifecycle
    assert bench.percentile([3.0, 1.0, 2.0], 50) == 2.0
