"""The true-floor benchmark runs in its quickest mode and its equality checks hold (no timing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import true_floor
from bench._floor import run_floor
from bench._mule_side import run_effects, run_promise
from bench._workload import Mismatch, Record, Workload, backend, check, expected
from bench.spy_breakdown import report

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("backend_name", ["asyncio", "trio"])
def test_every_side_sees_the_workload(backend_name: str) -> None:
    """Each paired scenario runs at quick size; every run's record matched the workload."""
    report = true_floor.run_scenarios(
        ["s1", "s2", "10k", "scale"], [backend_name], true_floor.QUICK, 1, quick=True
    )
    got = report.results[backend_name]
    assert got["s1"]["events"] == true_floor.QUICK.s1.events
    assert got["s2"]["events"] == true_floor.QUICK.s2.events * true_floor.QUICK.s2_runs
    assert set(got["s1"]["ratio"]) == {true_floor.PROMISE, true_floor.EFFECTS}
    assert {r[0] for r in report.rows()} >= {"S1 mule.run (x floor)", "S2 mule.run (x floor)"}


@pytest.mark.parametrize("side", [run_floor, run_promise, run_effects])
def test_a_record_that_differs_is_a_mismatch(side: object) -> None:
    """A side's record is compared for real: another workload's record does not pass."""
    be = backend("asyncio")
    script = Workload(2, 3).script()
    rec: Record = be.run(lambda: side(script, be.yield_now))  # type: ignore[operator]
    check("side", rec, expected(script))
    with pytest.raises(Mismatch, match="deltas differ"):
        check("side", rec, expected(Workload(2, 4).script()))
    rec.results.pop()
    with pytest.raises(Mismatch, match="results differ"):
        check("side", rec, expected(script))


def test_the_record_counts_what_the_workload_says() -> None:
    work = Workload(3, 5, calls=2)
    want = expected(work.script())
    assert len(want.deltas) == 15
    assert len(want.calls) == len(want.results) == 4
    assert work.events == 15 + 8
    assert want.results[0] == ("call_0_0", "echo:0")


@pytest.mark.slow
def test_the_cli_quick_mode_prints_the_table() -> None:
    """The fresh-process scenarios (RSS, first run, import) run and the table is printed."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench/true_floor.py"),
            "--quick",
            "--backend",
            "asyncio",
            "--scenario",
            "s1",
            "rss",
            "first",
            "import",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    out = done.stdout
    for row in ("S1 mule.run (x floor)", "S2 peak RSS mule.run (MB)", "import mule (ms)"):
        assert row in out, out
    assert "first run after import, mule.effects.run (ms)" in out


def test_the_layer_breakdown_gives_each_sample_to_its_innermost_layer(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    loop = "<module> (x.py:1);Handle._run (asyncio/events.py:80)"
    drive = f"{loop};Interpreter.drive (mule/effects/_interpret.py:195)"
    raw.write_text(
        f"{drive};step (mule/effects/_transition.py:120) 3\n"
        f"{drive};AssistantMessageEventStream.__anext__ (mule/pi/_event_stream.py:101)"
        ";_guard (bench/_mule_side.py:99) 1\n"
        f"{drive} 2\n"
        f"{loop} 2\n"
        f"{loop};<module> (mule/__init__.py:1) 5\n"  # an import: left out
    )
    got = dict(report(str(raw)))
    assert got == {
        "machine (step, stream_update)": 3 / 8,
        "model stream (the bench's provider-shaped generator)": 1 / 8,
        "interpreter (drive, perform)": 2 / 8,
        "event loop and the rest": 2 / 8,
    }


@pytest.mark.parametrize("vendor", ["anthropic", "openai-completions"])
def test_the_provider_loop_measure_hands_on_the_replayed_events(vendor: str) -> None:
    """`provider_parse --loop`: the reads hold the replayed events; both runs complete."""
    from bench.provider_parse import loop_seconds, reads
    from mule.testing.vendor_streams import replay, standard

    rec = standard(vendor, 20)
    pieces = [rec.body[i : i + 256] for i in range(0, len(rec.body), 256)]
    batches = reads(rec, pieces)
    assert [e.type for b in batches for e in b] == [e.type for e in replay(rec, pieces)]
    assert any(len(b) > 1 for b in batches)
    for batched in (True, False):
        assert loop_seconds(rec, batches, batched) > 0
