"""One true job lifecycle (issue 13 item 1): prompts, aborts and queued messages racing a job's end.

The fake pi (`tests/pirc/fake_pi_model.py`) models pi's concurrency: it reads commands while a
run streams and answers them where pi does. The hypothesis test fires the bridge's commands at
arbitrary times into its jittered event bursts and checks the contract in docs/pirc.md.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mule.effects import RunEnd
from mule.pi import AssistantMessage, UserMessage, text_of
from mule.pirc import Bridge, BridgeConfig, CommandFailed, Job, JobResult
from tests.pirc.helpers import assert_reaped

FAKE = str(Path(__file__).parent / "fake_pi_model.py")
FAKE_RETRY = str(Path(__file__).parent / "fake_pi_retry.py")


PROTOCOLS = ["0.73", "1.6"]  # the fake pi's protocol: pi 0.73.1's, or 1.6.0's


def cfg(seed: int = 0, protocol: str = "0.73", **kw: Any) -> BridgeConfig:
    base: dict[str, Any] = {
        "provider": "local",
        "model": "fake",
        "executable": FAKE,
        "env": {"FAKE_PI_SEED": str(seed), "FAKE_PI_PROTOCOL": protocol},
        "command_timeout": 15.0,  # a loaded CI box: a bound, not a timing claim
        "stop_grace": 0.5,
        "abort_grace": 1.0,
    }
    base.update(kw)
    return BridgeConfig(**base)


def users(result: JobResult) -> list[str]:
    return [text_of(m) for m in result.messages if isinstance(m, UserMessage)]


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_prompt_right_after_abort_gets_the_new_job(protocol: str) -> None:
    """`await b.abort(); await b.run(...)` returns the new answer, never the aborted one."""
    with anyio.fail_after(20):
        async with Bridge(cfg(protocol=protocol)) as b:
            first = await b.prompt("slow one")
            await anyio.sleep(0.05)
            await b.abort()
            assert first.done.is_set()  # abort returns once the job has ended
            assert first.outcome().outcome == "cancelled"
            r = await b.run("Try again")
            assert (r.outcome, r.text, users(r)) == ("completed", "done:Try again", ["Try again"])
            assert r.run != first.run
    assert_reaped(b.pid)


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_prompt_after_abort_retry_starts_a_new_job(protocol: str) -> None:
    """abort_retry() during the backoff ends that job cancelled; the next prompt is new."""
    with anyio.fail_after(20):
        async with Bridge(cfg(protocol=protocol)) as b:
            job = await b.prompt("fail forever")
            while job.state.phase != "retrying":
                await job.changed.wait()
            await b.abort_retry()
            assert job.done.is_set()
            assert job.outcome().outcome == "cancelled"
            r = await b.run("again")
            assert r.text == "done:again"
            assert r.run != job.run


@pytest.mark.anyio
@pytest.mark.parametrize("order", ["end_first", "answer_first"])
async def test_abort_retry_read_in_a_backoff_the_bridge_has_not_seen(order: str) -> None:
    """An `abort_retry` that pi reads in a backoff still in the pipe ends the job `cancelled`.

    The bridge sees the job running when it sends the command; pi's failed `agent_end` and
    `auto_retry_start` come only before its answer, with `Retry cancelled` on either side of
    it. (The random search below found this on trio: the job ended `failed`.)
    """
    retry_cfg = cfg(executable=FAKE_RETRY, env={"FAKE_PI_ORDER": order})
    with anyio.fail_after(20):
        async with Bridge(retry_cfg) as b:
            job = await b.prompt("flaky")
            while job.state.phase != "running":
                await job.changed.wait()
            await b.abort_retry()
            assert job.done.is_set()  # returns once the cancelled job has ended
            r = job.outcome()
            assert (r.outcome, r.error, r.attempts) == ("cancelled", "Retry cancelled", 1)
            nxt = await b.run("again")
            assert (nxt.outcome, nxt.text, users(nxt)) == ("completed", "done:again", ["again"])
            assert nxt.run != job.run


@pytest.mark.anyio
async def test_abort_retry_after_the_backoff_lets_the_retry_run() -> None:
    """An `abort_retry` that pi answers as its retry starts (the sleep over): the retry runs on."""
    with anyio.fail_after(20):
        async with Bridge(cfg(executable=FAKE_RETRY, env={"FAKE_PI_ORDER": "too_late"})) as b:
            job = await b.prompt("flaky")
            while job.state.phase != "running":
                await job.changed.wait()
            await b.abort_retry()
            assert job.state.phase in ("running", "settling", "done")  # out of the backoff
            r = await job.wait(10)
            assert (r.outcome, r.text, r.attempts) == ("completed", "done:flaky", 2)


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_prompt_while_running_is_refused_and_queued_prompts_join(protocol: str) -> None:
    """No streaming_behavior while a job runs: CommandFailed; with it: the running job."""
    with anyio.fail_after(20):
        async with Bridge(cfg(protocol=protocol)) as b:
            job = await b.prompt("slow base")
            with pytest.raises(CommandFailed, match="streaming_behavior"):
                await b.prompt("intruder")
            joined = await b.prompt("more please", streaming_behavior="followUp")
            assert joined is job
            steered = await b.steer("steer me")
            assert steered is job
            r = await job.wait(10)
            assert r.outcome == "completed"
            assert users(r) == ["slow base", "steer me", "more please"]
            assert await b.steer("late") is None  # no job open: pi keeps it for the next run
            nxt = await b.run("next")
            assert users(nxt) == ["next", "late"]


Op = tuple[Literal["prompt", "queue", "steer", "follow_up", "abort", "abort_retry"], str, float]

FATES = ("plain", "slow", "retry1", "retry2", "fail")
ops_strategy = st.lists(
    st.tuples(
        st.sampled_from(
            ["prompt", "prompt", "queue", "steer", "follow_up", "abort", "abort_retry"]
        ),
        st.sampled_from(FATES),
        st.sampled_from([0.0, 0.0, 0.001, 0.005, 0.02, 0.05]),
    ),
    min_size=1,
    max_size=12,
)


async def exercise(seed: int, ops: list[Op], protocol: str = "0.73") -> None:
    counter = itertools.count()
    fresh: list[tuple[str, Job]] = []  # prompts that started a job, with the job they got
    queued: list[tuple[str, Job]] = []  # messages queued into a job the caller got back
    queued_prompts: list[tuple[str, Job]] = []
    aborts = 0
    run_ends: dict[Any, int] = {}
    async with Bridge(cfg(seed, protocol)) as b:
        sub = b.subscribe(capacity=100_000)

        async def one(kind: str, fate: str) -> None:
            nonlocal aborts
            text = f"{fate}-{next(counter)}"
            try:
                if kind == "prompt":
                    fresh.append((text, await b.prompt(text)))
                elif kind == "queue":
                    # joins the open job, or starts its own: told apart by the results below
                    queued_prompts.append(
                        (text, await b.prompt(text, streaming_behavior="followUp"))
                    )
                elif kind in ("steer", "follow_up"):
                    send = b.steer if kind == "steer" else b.follow_up
                    job = await send(text)
                    if job is not None:
                        queued.append((text, job))
                elif kind == "abort":
                    aborts += 1
                    await b.abort()
                else:
                    aborts += 1
                    await b.abort_retry()
            except CommandFailed:
                pass  # refused as the contract says (a prompt while a job runs)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for kind, fate, delay in ops:
                    await anyio.sleep(delay)
                    tg.start_soon(one, kind, fate)
            current = b.job
            if current is not None and not current.done.is_set():
                aborts += 1
                await b.abort()
            jobs = {id(j): j for _, j in fresh + queued + queued_prompts}.values()
            results = {id(j): await j.wait(20) for j in jobs}
            for text, job in queued_prompts:
                starts = users(results[id(job)])[:1] == [text]
                (fresh if starts else queued).append((text, job))
            await anyio.sleep(0.05)  # let the last RunEnds reach the subscription
            sub.close()
            async for ev in sub:
                if isinstance(ev, RunEnd):
                    run_ends[ev.run] = run_ends.get(ev.run, 0) + 1

    # every job a caller got ended exactly once, with its own run
    for job in jobs:
        assert run_ends.get(job.run) == 1, (job.run, run_ends)
    assert all(n == 1 for n in run_ends.values()), run_ends
    # a prompt that started a job got a job of its own, which carries its text and no other
    # prompt's: nothing merged, reused or lost
    own = [j for _, j in fresh]
    assert len({id(j) for j in own}) == len(own)
    for text, job in fresh:
        r = results[id(job)]
        assert text in users(r), (text, r)
        others = {t for t, j in fresh if j is not job}
        assert not others & set(users(r)), (text, users(r))
        assert_outcome(text, r, aborts)
    for text, job in queued:
        r = results[id(job)]
        # pi 1.6.0 takes a message into a job until it settles; an abort after that leaves it
        # in pi's queue for the next run (the job's last answer may still be complete)
        if r.outcome == "completed" and (protocol == "0.73" or aborts == 0):
            assert text in users(r), (text, r)


def assert_outcome(text: str, r: JobResult, aborts: int) -> None:
    last = next(m for m in reversed(r.messages) if isinstance(m, AssistantMessage))
    if r.outcome == "completed":
        # pi 1.6.0 runs what was queued into a job before it settles, after a failure too:
        # a failed prompt's job then completes with the queued message's answer.
        assert not text.startswith("fail") or users(r)[-1] != text, (text, users(r))
        assert text_of(last) == "done:" + users(r)[-1]
    elif r.outcome == "failed":
        assert text.startswith("fail"), (text, r)
        assert r.error == "503 overloaded"
    else:
        assert r.outcome == "cancelled"
        assert aborts > 0


# A random search each run (20 interleavings per backend keep CI near 20 s; `--hypothesis-seed`
# replays one). It once found `abort_retry` read by pi in a backoff the bridge had not read yet
# ending the job 'failed' (now the scripted tests above).
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**16), ops=ops_strategy, protocol=st.sampled_from(PROTOCOLS))
def test_commands_racing_event_bursts_keep_one_job_per_prompt(
    anyio_backend: str, seed: int, ops: list[Op], protocol: str
) -> None:
    """Arbitrary interleavings of prompts, queued messages and aborts with pi's bursts.

    With pi 0.73.1's protocol and with 1.6.0's (deltas, dispositions, agent_settled).
    """
    anyio.run(exercise, seed, ops, protocol, backend=anyio_backend)
