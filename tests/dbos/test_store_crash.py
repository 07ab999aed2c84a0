"""The crash matrix (mule.testing.crash) against the PostgreSQL run store.

Also tests the private rule `mule.dbos._store.StepRecord`: of two writers of one step, the first
stands.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mule.dbos import PgStore, StoreError
from mule.pi import UserMessage
from mule.testing.crash import CrashLab, check_case

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrashLab]:
    """One zygote for the module, over PgStore."""
    old = os.environ.get("MULE_DBOS_TEST_URL")
    os.environ["MULE_DBOS_TEST_URL"] = pg_url  # inherited by the zygote and its children
    try:
        with CrashLab("tests.dbos.owner:pg_owner", tmp_path_factory.mktemp("crash")) as lab:
            yield lab
    finally:
        if old is None:
            del os.environ["MULE_DBOS_TEST_URL"]
        else:
            os.environ["MULE_DBOS_TEST_URL"] = old


def test_every_single_kill_point(lab: CrashLab) -> None:
    """A SIGKILL at each point of the scenario, then recovery: the contract holds on PostgreSQL."""
    points = lab.points()
    assert len(points) >= 50
    for i, name in enumerate(points):
        case = lab.run_case([name], backend=("asyncio", "trio")[i % 2])
        assert case.segments[0].killed
        check_case(case)


def test_kills_while_recovering(lab: CrashLab) -> None:
    """Killed in the first run and twice more while resuming: nothing committed is lost."""
    for first in ("exec-after:w1", "stream:2", "after:XS:l1"):
        check_case(lab.run_case([first, 5, 9], backend="trio"))


def test_store_refuses_a_second_begin(pg_url: str) -> None:
    """begin() of an existing run fails unless exist_ok, which keeps the first base."""
    with PgStore(pg_url, schema="crashkit") as store:
        store.begin("twice", [UserMessage("one", 1)])
        with pytest.raises(StoreError):
            store.begin("twice", [UserMessage("two", 2)])
        store.begin("twice", [UserMessage("two", 2)], exist_ok=True)
        assert store.base("twice") == (UserMessage("one", 1),)
        with pytest.raises(StoreError):
            store.listener("never-begun")


def test_claims_are_taken_once(pg_url: str, tmp_path: Path) -> None:
    """An unsafe step is claimed by one execution only, across connections."""
    with PgStore(pg_url, schema="crashkit") as a, PgStore(pg_url, schema="crashkit") as b:
        assert a.claim("claims-run", "step:3", "exec-a")
        assert not b.claim("claims-run", "step:3", "exec-b")
        assert b.claim("claims-run", "step:4", "exec-b")
        assert a.claims("claims-run") == ["step:3", "step:4"]


def test_the_first_step_record_wins(pg_url: str) -> None:
    """Two executions record (or claim) one step, in one commit or two: the first stands."""
    from mule.dbos._store import StepRecord

    with PgStore(pg_url, schema="crashkit") as a, PgStore(pg_url, schema="crashkit") as b:
        first = StepRecord("steps-run", 1, "mule.model_attempt", '{"who":"a"}')
        a.record(first)  # outside an event loop: blocks until committed
        second = StepRecord("steps-run", 1, "mule.model_attempt", '{"who":"b"}')
        b.record(second)
        assert (first.kept, second.kept) == ('{"who":"a"}', '{"who":"a"}')
        # In one group commit (the writer thread's batch): the first in the batch wins.
        both = [StepRecord("steps-run", 2, "mule.tool_execution", f'"{w}"') for w in "xy"]
        claims = [StepRecord("steps-run", 2, None, e) for e in ("exec-x", "exec-y")]
        a._writer.submit([*both, *claims])
        assert [r.kept for r in both] == ['"x"', '"x"']
        assert [r.kept for r in claims] == [True, False]
        assert b.steps("steps-run") == {
            1: ("mule.model_attempt", '{"who":"a"}'),
            2: ("mule.tool_execution", '"x"'),
        }
        assert b.claims("steps-run") == ["step:2"]
