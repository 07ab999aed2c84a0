"""The crash matrix: SIGKILL a real child at every checkpoint of a run, recover, finish."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mule.effects import MuleEvent, MuleResume
from mule.journal import Journal
from mule.pi import AbortSignal, Message
from mule.testing.crash import CrashLab, check_case

pytestmark = pytest.mark.slow

BACKENDS = ("asyncio", "trio")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrashLab]:
    """One zygote for the module, over the SQLite journal."""
    with CrashLab("mule.journal:Journal", tmp_path_factory.mktemp("crash")) as lab:
        yield lab


@pytest.fixture(scope="module")
def points(lab: CrashLab) -> list[str]:
    """Return the points of an uninterrupted run, in order."""
    return lab.points()


def test_points_cover_every_kind_of_kill(points: list[str]) -> None:
    """The run announces 50+ points, including each place the brief names."""
    assert len(points) >= 50
    assert len(set(points)) == len(points)
    for needed in (
        "before:XS:w1",  # before the start commit
        "after:XS:w1",  # after it
        "exec-before:w1",  # during execute, before the side effect
        "exec-after:w1",  # during execute, after it
        "after:XE:w1",  # after the result
        "before:ME:w1",  # before the message commit
        "stream:1",  # mid model stream
        "stream:2",  # mid stream of the attempt that fails
        "backoff:1",  # during the retry backoff
        "after:XS:l1",  # the sequential batch
        "before:RE",
        "after:RE",
    ):
        assert needed in points


def test_uninterrupted_run_passes_the_checks(lab: CrashLab) -> None:
    """With no kill, the scenario completes and its transcript passes every check."""
    case = lab.run_case([])
    check_case(case)
    assert not case.segments[0].killed
    assert sorted(case.effect_counts().values()) == [1] * 5


def test_every_single_kill_point(lab: CrashLab, points: list[str]) -> None:
    """A SIGKILL at each announced point, then recovery: the durability contract holds."""
    for i, name in enumerate(points):
        case = lab.run_case([name], backend=BACKENDS[i % 2])
        assert case.segments[0].killed
        assert case.segments[0].points[-1] == name
        check_case(case)


def test_kill_after_an_unsafe_effect_never_repeats_it(lab: CrashLab) -> None:
    """Killed after the write ran but before its end: the resumed run answers with the error."""
    case = lab.run_case(["exec-after:w1"], backend="trio")
    check_case(case)
    assert case.effect_counts()["w1"] == 1
    assert "exec-before:w1" not in case.segments[1].points


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_repeated_kills(lab: CrashLab, points: list[str], data: st.DataObject) -> None:
    """Kills in the first run and again while recovering (at chosen indices) lose nothing."""
    first = data.draw(st.sampled_from(points), label="first kill")
    more = data.draw(st.lists(st.integers(0, 45), max_size=2), label="later kills (indices)")
    backend = data.draw(st.sampled_from(BACKENDS), label="backend")
    check_case(lab.run_case([first, *more], backend=backend))


# -- the kit can fail: an owner that commits a tool's start too late -------------------------


class DeferredStart:
    """A broken owner: each tool_execution_start is recorded only with the next event."""

    def __init__(self, path: str) -> None:
        self.journal = Journal(path)

    def begin(self, run_id: str, messages: Sequence[Message]) -> None:
        """Delegate to the journal."""
        self.journal.begin(run_id, messages)

    def listener(self, run_id: str) -> Callable[[MuleEvent, AbortSignal], Awaitable[None]]:
        """Return the journal's listener, holding back each start by one event."""
        inner = self.journal.listener(run_id)
        held: list[MuleEvent] = []

        async def record(event: MuleEvent, signal: AbortSignal) -> None:
            pending = inner(event, signal)
            if pending is not None:
                await pending

        async def listen(event: MuleEvent, signal: AbortSignal) -> None:
            if held:
                await record(held.pop(), signal)
            if event.type == "tool_execution_start":
                held.append(event)
                return
            await record(event, signal)

        return listen

    def recover(self, run_id: str) -> tuple[tuple[Message, ...], MuleResume | None]:
        """Delegate to the journal."""
        return self.journal.recover(run_id)

    def transcript(self, run_id: str) -> tuple[Message, ...]:
        """Delegate to the journal."""
        return self.journal.transcript(run_id)

    def close(self) -> None:
        """Close the journal."""
        self.journal.close()


def test_the_matrix_catches_a_late_start_commit(tmp_path: Path) -> None:
    """An owner whose start is not durable before execute runs an unsafe tool twice: caught."""
    with CrashLab("tests.journal.test_crash_matrix:DeferredStart", tmp_path) as lab:
        case = lab.run_case(["exec-after:w2"])
        with pytest.raises(AssertionError, match="unsafe call w2 ran 2 times"):
            check_case(case)
