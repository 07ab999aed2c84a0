"""Differential conformance: mule's loop against the real pi-agent-core 1.6.0 loop.

Each scenario runs through Pi's `runAgentLoopContinue` (tests/conformance/harness.mjs, one Node
process for the whole module) and through mule on both roots; the projections must be equal
after the divergence table in `runner.DIVERGENCES` (documented in docs/conformance.md).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator

import anyio
import pytest
from hypothesis import HealthCheck, given, settings

from tests.conformance.runner import (
    DIVERGENCES,
    HAVE_PI,
    PI_BLOCKED,
    ROOTS,
    PiHarness,
    Root,
    Scenario,
    compare,
    expected_for_mule,
    run_mule,
)
from tests.conformance.scenarios import SCENARIOS, call, reply, scenario, text, user
from tests.conformance.strategies import scenarios

pytestmark = [
    pytest.mark.pi,
    pytest.mark.skipif(not HAVE_PI, reason="node/node_modules is missing (run ./dev setup)"),
]

GENERATED = 200


@pytest.fixture(scope="module")
def pi() -> Iterator[PiHarness]:
    """One long-lived Node harness for the module."""
    harness = PiHarness()
    yield harness
    harness.close()


def check(pi: PiHarness, sc: Scenario, roots: tuple[tuple[Root, str], ...]) -> set[str]:
    """Run `sc` on Pi (concurrently with mule) and on each (root, backend); assert equality."""
    collect = pi.submit(sc)
    runs = [
        (root, backend, anyio.run(run_mule, sc, root, backend=backend)) for root, backend in roots
    ]
    observed = collect()
    codes = set()
    for root, backend, got in runs:
        cmp = compare(sc, observed, got)
        assert cmp.ok, (
            f"mule ({root} on {backend}) differs from Pi"
            + (f" after {cmp.code}" if cmp.code else "")
            + ":\n"
            + "\n".join(cmp.diffs)
            + f"\nscenario: {json.dumps(sc)}"
        )
        codes.add(cmp.code)
    return codes


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_section6_scenario_matches_pi(pi: PiHarness, name: str, root: Root, backend: str) -> None:
    """A hand-written section-6 scenario: mule emits Pi's events, messages and ending."""
    check(pi, SCENARIOS[name], ((root, backend),))


@pytest.mark.slow
@settings(
    max_examples=GENERATED,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sc=scenarios())
def test_generated_scenario_matches_pi(pi: PiHarness, sc: Scenario) -> None:
    """A random scenario: both roots (effects on asyncio, promise on trio) match Pi."""
    check(pi, sc, (("effects", "asyncio"), ("promise", "trio")))


def test_every_divergence_is_exercised(pi: PiHarness) -> None:
    """Each divergence-table entry is needed by some hand-written scenario (none is dead)."""
    used: set[str] = set()
    for sc in SCENARIOS.values():
        used |= check(pi, sc, (("effects", "asyncio"),))
    assert {d.code for d in DIVERGENCES if d.rewrite is not None} <= used
    blocked = SCENARIOS["s13_empty_rejection"]
    events, _ = pi.run(blocked)
    assert PI_BLOCKED in json.dumps(events)  # the adjustment is needed, not decorative
    assert PI_BLOCKED not in json.dumps(expected_for_mule(blocked, *pi.run(blocked))[0])


def test_a_real_difference_is_reported(pi: PiHarness) -> None:
    """The comparison is not vacuous: a changed scenario on one side is caught."""
    sc = scenario(
        tools=[{"name": "A"}],
        replies=[reply(call("a", "A"), call("b", "A")), reply(text("done"))],
        calls={"a": {"steps": [{"sleep": 30}]}, "b": {"steps": [{"sleep": 5}]}},
        steering=[[], [user("s")]],
    )
    observed = pi.run(sc)
    swapped = copy.deepcopy(sc)
    swapped["calls"] = {"a": {"steps": [{"sleep": 5}]}, "b": {"steps": [{"sleep": 30}]}}
    mule = anyio.run(run_mule, swapped, "effects")
    cmp = compare(sc, observed, mule)
    assert not cmp.ok
    assert "tool_execution_end" in cmp.diffs[0]
    mule = anyio.run(run_mule, sc, "effects")
    assert compare(sc, observed, mule).ok


def test_divergence_rewrites_only_where_it_applies(pi: PiHarness) -> None:
    """A3 cuts Pi's run at the raising call's end; a clean run is left untouched."""
    sc = SCENARIOS["s36_execute_raises"]
    events, end = pi.run(sc)
    want, want_end, code = expected_for_mule(sc, events, end)
    assert code == "A3"
    assert end["kind"] == "returned"  # Pi itself carried on with an error result
    assert want[-1] == {"t": "run_end", "outcome": "failed", "phase": "tool"}
    assert [e["t"] for e in want].count("tool_execution_end") == 1  # c2's end only
    assert want_end == {"kind": "failed", "phase": "tool"}
    clean = SCENARIOS["s05_parallel_completion_order"]
    events, end = pi.run(clean)
    assert expected_for_mule(clean, events, end)[2] == ""
