"""`AssistantMessageEventStream`: Pi's EventStream semantics, plus mule's pull mode and aclose."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Literal, TypeAlias

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.pi import (
    ZERO_USAGE,
    AssistantMessage,
    AssistantMessageEvent,
    AssistantMessageEventStream,
    DoneEvent,
    ErrorEvent,
    IncompleteStreamError,
    StopReason,
    TextDeltaEvent,
)

pytestmark = pytest.mark.anyio


def msg(n: int, stop: StopReason = "stop") -> AssistantMessage:
    """Return a distinguishable assistant message (its timestamp is `n`)."""
    error = "boom" if stop in ("error", "aborted") else None
    return AssistantMessage((), "api", "prov", "m", ZERO_USAGE, stop, n, error_message=error)


def delta(n: int) -> TextDeltaEvent:
    """Return a text delta numbered `n`."""
    return TextDeltaEvent(content_index=0, delta=f"d{n}", partial=msg(n))


def done(n: int) -> DoneEvent:
    """Return a done event whose message is numbered `n`."""
    return DoneEvent(reason="stop", message=msg(n))


def error(n: int) -> ErrorEvent:
    """Return an error event whose message is numbered `n`."""
    return ErrorEvent(reason="error", error=msg(n, "error"))


async def drain(stream: AssistantMessageEventStream) -> list[AssistantMessageEvent]:
    """Collect what iteration yields, failing rather than hanging."""
    with anyio.fail_after(5):
        return [event async for event in stream]


async def result_of(stream: AssistantMessageEventStream) -> AssistantMessage:
    """Await `result()`, failing rather than hanging."""
    with anyio.fail_after(5):
        return await stream.result()


def same(got: Sequence[object], want: Sequence[object]) -> bool:
    """Whether two sequences hold the very same objects in order."""
    return len(got) == len(want) and all(a is b for a, b in zip(got, want, strict=True))


def finished(stream: AssistantMessageEventStream) -> bool:
    """Read `done` through a call, so the type checker does not pin it across pushes."""
    return stream.done


# -- push mode -----------------------------------------------------------------------------------


async def test_push_after_a_terminal_event_is_ignored() -> None:
    """Once a terminal event is pushed, later pushes (events or terminals) are dropped."""
    stream = AssistantMessageEventStream()
    first, terminal = delta(1), done(2)
    stream.push(first)
    assert not finished(stream)
    stream.push(terminal)
    assert finished(stream)
    stream.push(delta(3))
    stream.push(error(4))
    assert same(await drain(stream), [first, terminal])
    assert (await result_of(stream)) is terminal.message


async def test_error_terminal_resolves_result_with_the_error_message() -> None:
    """An `error` event finishes the stream and its `error` message is the result."""
    stream = AssistantMessageEventStream()
    failed = error(1)
    stream.push(failed)
    assert (await result_of(stream)) is failed.error
    assert same(await drain(stream), [failed])


async def test_end_with_a_result_resolves_result() -> None:
    """`end(result)` without a terminal event resolves `result()` with that message."""
    stream = AssistantMessageEventStream()
    queued = delta(1)
    stream.push(queued)
    final = msg(9)
    stream.end(final)
    assert stream.done
    assert (await result_of(stream)) is final
    assert same(await drain(stream), [queued])  # queued events survive end()


async def test_end_does_not_replace_a_terminal_result() -> None:
    """A terminal's result is settled: a later `end(other)` does not change it."""
    stream = AssistantMessageEventStream()
    terminal = done(1)
    stream.push(terminal)
    stream.end(msg(2))
    assert (await result_of(stream)) is terminal.message


async def test_end_wakes_a_waiting_result_with_its_message() -> None:
    """A task already awaiting `result()` gets the message passed to `end`."""
    stream = AssistantMessageEventStream()
    got: list[AssistantMessage] = []
    final = msg(5)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                got.append(await result_of(stream))

            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            assert got == []
            stream.end(final)
    assert same(got, [final])


async def test_result_resolves_on_terminal_push_without_any_consumer() -> None:
    """`result()` resolves when the terminal is pushed, though nobody iterates the stream."""
    stream = AssistantMessageEventStream()
    got: list[AssistantMessage] = []
    terminal = done(7)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                got.append(await result_of(stream))

            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            stream.push(delta(1))
            await anyio.wait_all_tasks_blocked()
            assert got == []  # a non-terminal event resolves nothing
            stream.push(terminal)
    assert same(got, [terminal.message])


async def test_a_waiting_consumer_is_woken_by_push() -> None:
    """A consumer blocked in iteration receives each event as it is pushed."""
    stream = AssistantMessageEventStream()
    got: list[AssistantMessageEvent] = []
    pushed: list[AssistantMessageEvent] = [delta(1), delta(2), done(3)]
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                async for event in stream:
                    got.append(event)

            tg.start_soon(consume)
            for i, event in enumerate(pushed):
                await anyio.wait_all_tasks_blocked()
                assert same(got, pushed[:i])  # blocked, waiting for this push
                stream.push(event)
    assert same(got, pushed)


async def test_iteration_yields_queued_events_then_stops() -> None:
    """Queued events come out in order; once finished and drained, iteration stops for good."""
    stream = AssistantMessageEventStream()
    pushed: list[AssistantMessageEvent] = [delta(1), delta(2), delta(3), done(4)]
    for event in pushed:
        stream.push(event)
    assert same(await drain(stream), pushed)
    assert await drain(stream) == []  # single consumer: the events were dequeued
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


async def test_end_without_terminal_makes_result_raise() -> None:
    """A bare `end()` with no terminal: `result()` raises instead of hanging (mule's choice)."""
    stream = AssistantMessageEventStream()
    queued = delta(1)
    stream.push(queued)
    stream.end()
    with anyio.fail_after(5), pytest.raises(IncompleteStreamError):
        await result_of(stream)
    assert same(await drain(stream), [queued])


async def test_end_without_terminal_wakes_waiters() -> None:
    """A consumer and a `result()` waiter both blocked are released by a bare `end()`."""
    stream = AssistantMessageEventStream()
    outcomes: list[str] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                outcomes.append(f"iterated {len([e async for e in stream])}")

            async def wait() -> None:
                with pytest.raises(IncompleteStreamError):
                    await result_of(stream)
                outcomes.append("raised")

            tg.start_soon(consume)
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            assert outcomes == []
            stream.end()
    assert sorted(outcomes) == ["iterated 0", "raised"]


async def test_aclose_in_push_mode_releases_waiters() -> None:
    """`aclose()` finishes a push stream: a blocked consumer stops, `result()` raises."""
    stream = AssistantMessageEventStream()
    got: list[AssistantMessageEvent] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                async for event in stream:
                    got.append(event)

            tg.start_soon(consume)
            await anyio.wait_all_tasks_blocked()
            await stream.aclose()
    assert got == []
    assert stream.done
    stream.push(done(1))  # ignored: already finished
    with pytest.raises(IncompleteStreamError):
        await result_of(stream)


# -- pull mode -----------------------------------------------------------------------------------


class Source:
    """An async-generator source that records what it produced and whether it was closed."""

    def __init__(self, events: Sequence[AssistantMessageEvent], then_hang: bool = False) -> None:
        self.events = list(events)
        self.then_hang = then_hang
        self.produced: list[AssistantMessageEvent] = []
        self.closed = False
        self.cancelled = False

    async def run(self) -> AsyncIterator[AssistantMessageEvent]:
        """Yield the events one by one; optionally hang afterwards (an open, silent response)."""
        try:
            for event in self.events:
                await anyio.lowlevel.checkpoint()
                self.produced.append(event)
                yield event
            if self.then_hang:
                try:
                    await anyio.sleep_forever()
                except anyio.get_cancelled_exc_class():
                    self.cancelled = True
                    raise
        finally:
            self.closed = True


async def test_pull_mode_produces_an_event_only_when_asked() -> None:
    """`from_source` is lazy: the source advances one event per `__anext__`, none before."""
    source = Source([delta(1), delta(2), done(3)])
    stream = AssistantMessageEventStream.from_source(source.run())
    await anyio.lowlevel.checkpoint()
    assert source.produced == []
    first = await stream.__anext__()
    assert same([first], source.events[:1])
    assert same(source.produced, source.events[:1])
    second = await stream.__anext__()
    assert same([first, second], source.events[:2])
    assert same(source.produced, source.events[:2])
    assert not stream.done
    await stream.aclose()


async def test_pull_mode_result_drains_the_source_without_losing_events() -> None:
    """`result()` pulls up to the terminal; the events it pulled are still iterated afterwards."""
    extra = delta(9)
    source = Source([delta(1), delta(2), done(3), extra])
    stream = AssistantMessageEventStream.from_source(source.run())
    first = await stream.__anext__()
    with anyio.fail_after(5):
        result = await result_of(stream)
    terminal = source.events[2]
    assert isinstance(terminal, DoneEvent)
    assert result is terminal.message
    assert same(source.produced, source.events[:3])  # nothing past the terminal was pulled
    assert same([first, *await drain(stream)], source.events[:3])
    assert source.closed  # draining past the terminal released the source
    assert extra not in source.produced


async def test_pull_mode_source_ending_without_terminal() -> None:
    """A source that runs dry without a terminal ends iteration and makes `result()` raise."""
    source = Source([delta(1), delta(2)])
    stream = AssistantMessageEventStream.from_source(source.run())
    assert same(await drain(stream), source.events)
    assert stream.done
    with pytest.raises(IncompleteStreamError):
        await result_of(stream)


async def test_pull_mode_result_raises_when_the_source_runs_dry() -> None:
    """`result()` alone drains a terminal-less source, then raises."""
    source = Source([delta(1)])
    stream = AssistantMessageEventStream.from_source(source.run())
    with anyio.fail_after(5), pytest.raises(IncompleteStreamError):
        await result_of(stream)
    assert same(source.produced, source.events)


async def test_aclose_closes_the_source() -> None:
    """`aclose()` closes an unfinished source (its `finally` runs) and finishes the stream."""
    source = Source([delta(1), delta(2), done(3)])
    stream = AssistantMessageEventStream.from_source(source.run())
    await stream.__anext__()
    closed_before = source.closed
    await stream.aclose()
    assert not closed_before
    assert source.closed
    assert stream.done
    assert await drain(stream) == []
    assert same(source.produced, source.events[:1])
    with pytest.raises(IncompleteStreamError):
        await result_of(stream)


async def test_cancelling_the_consumer_cancels_the_pull() -> None:
    """No background task: cancelling a consumer waiting on the source cancels the source's wait."""
    source = Source([delta(1)], then_hang=True)
    stream = AssistantMessageEventStream.from_source(source.run())
    got: list[AssistantMessageEvent] = []
    with anyio.fail_after(5):
        with anyio.move_on_after(0.05) as scope:
            async for event in stream:
                got.append(event)
        assert scope.cancelled_caught
        assert source.cancelled
        await stream.aclose()
    assert same(got, source.events)
    assert source.closed


# -- any push sequence -----------------------------------------------------------------------------

Op: TypeAlias = Literal["event", "done", "error", "end"]
OPS = st.lists(st.sampled_from(["event", "event", "event", "done", "error", "end"]), max_size=12)


@given(ops=OPS, concurrent=st.booleans())
async def test_any_push_sequence_yields_events_up_to_the_first_terminal(
    ops: list[Op], concurrent: bool
) -> None:
    """Iteration yields exactly the pushes up to and including the first terminal (or a bare end).

    The result is the first terminal's message, or `IncompleteStreamError` when `end()` or the
    end of the sequence came first. With `concurrent`, a consumer iterates while pushes arrive.
    """
    stream = AssistantMessageEventStream()
    makers: dict[str, Callable[[int], AssistantMessageEvent]] = {
        "event": delta,
        "done": done,
        "error": error,
    }
    # None stands for a bare end()
    items = [None if op == "end" else makers[op](n) for n, op in enumerate(ops)]
    expected: list[AssistantMessageEvent] = []
    expected_result: AssistantMessage | None = None
    for item in items:
        if item is None:
            break
        expected.append(item)
        if isinstance(item, DoneEvent):
            expected_result = item.message
            break
        if isinstance(item, ErrorEvent):
            expected_result = item.error
            break
    got: list[AssistantMessageEvent] = []

    async def produce() -> None:
        for item in items:
            if item is None:
                stream.end()
            else:
                stream.push(item)
            if concurrent:
                await anyio.lowlevel.checkpoint()
        stream.end()  # a producer that stops pushing closes its stream

    async def consume() -> None:
        async for event in stream:
            got.append(event)

    with anyio.fail_after(5):
        if concurrent:
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                tg.start_soon(produce)
        else:
            await produce()
            await consume()
    assert same(got, expected)
    if expected_result is None:
        with pytest.raises(IncompleteStreamError):
            await result_of(stream)
    else:
        assert (await result_of(stream)) is expected_result


# -- `__anext__`'s per-event path against the full rules (`_pull` + `push`) -----------------

SourceOp: TypeAlias = Literal["event", "done", "error", "push", "end"]
SOURCE_OPS = st.lists(
    st.sampled_from(["event", "event", "event", "done", "error", "push", "end"]), max_size=10
)


async def read_queued(stream: AssistantMessageEventStream) -> AssistantMessageEvent:
    """Read one event by the full rules only: pull into the queue, then take from it."""
    while True:
        if stream._queue:
            return stream._queue.popleft()
        if stream.done:
            await stream._close_source()
            raise StopAsyncIteration
        await stream._pull()


@given(ops=SOURCE_OPS)
async def test_reading_the_source_directly_is_reading_anext(ops: list[SourceOp]) -> None:
    """`__anext__` and `next_batch` give what the full rules give: events, done, result.

    The source may push into its own stream or end it while it is being awaited (the stream
    changed meanwhile), so the full rules must apply then too.
    """

    async def outcome(
        read: Callable[[AssistantMessageEventStream], Any],
    ) -> tuple[list[str], bool, object]:
        holder: list[AssistantMessageEventStream] = []
        makers: dict[str, Callable[[int], AssistantMessageEvent]] = {
            "event": delta,
            "done": done,
            "error": error,
        }

        async def source() -> AsyncIterator[AssistantMessageEvent]:
            for n, op in enumerate(ops):
                await anyio.lowlevel.checkpoint()
                if op == "push":
                    holder[0].push(delta(100 + n))
                elif op == "end":
                    holder[0].end()
                else:
                    yield makers[op](n)

        stream = AssistantMessageEventStream.from_source(source())
        holder.append(stream)
        seen: list[str] = []
        with anyio.fail_after(5):
            while True:
                try:
                    event = await read(stream)
                except StopAsyncIteration:
                    break
                seen.append(repr(event))
            try:
                result: object = (await stream.result()).timestamp
            except IncompleteStreamError:
                result = "incomplete"
        return seen, stream.done, result

    expected = await outcome(read_queued)
    assert await outcome(lambda s: s.__anext__()) == expected
    assert await outcome(batch_reader()) == expected


def batch_reader() -> Callable[[AssistantMessageEventStream], Any]:
    """Return a reader of one event at a time through `next_batch` (its per-read path)."""
    pending: list[AssistantMessageEvent] = []

    async def read(stream: AssistantMessageEventStream) -> AssistantMessageEvent:
        if not pending:
            pending.extend(await stream.next_batch())
            if not pending:
                raise StopAsyncIteration
        return pending.pop(0)

    return read


# -- batches: `from_batches` and `next_batch` ---------------------------------------------------

BatchOp: TypeAlias = Literal["event", "done", "error"]


@st.composite
def split(draw: st.DrawFn, items: list[Any]) -> list[list[Any]]:
    """Cut `items` into consecutive batches (empty ones too: a read may carry no event)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(items)), max_size=len(items) + 2)))
    edges = [0, *cuts, len(items)]
    return [items[a:b] for a, b in itertools.pairwise(edges)]


def expected_reads(items: list[AssistantMessageEvent]) -> list[AssistantMessageEvent]:
    """Return the events a stream hands on: up to and including the first terminal."""
    out: list[AssistantMessageEvent] = []
    for item in items:
        out.append(item)
        if isinstance(item, DoneEvent | ErrorEvent):
            break
    return out


def _items(ops: list[BatchOp]) -> list[AssistantMessageEvent]:
    makers: dict[str, Callable[[int], AssistantMessageEvent]] = {
        "event": delta,
        "done": done,
        "error": error,
    }
    return [makers[op](n) for n, op in enumerate(ops)]


BATCH_OPS = st.lists(st.sampled_from(["event", "event", "event", "done", "error"]), max_size=10)


class Batches:
    """A batch source that records whether it was closed."""

    def __init__(self, batches: list[list[AssistantMessageEvent]]) -> None:
        self.batches = batches
        self.closed = False

    async def gen(self) -> AsyncIterator[list[AssistantMessageEvent]]:
        try:
            for batch in self.batches:
                await anyio.lowlevel.checkpoint()
                yield batch
        finally:
            self.closed = True


@given(data=st.data(), ops=BATCH_OPS)
async def test_next_batch_hands_on_each_read_in_order_with_the_terminal_alone(
    data: st.DataObject, ops: list[BatchOp]
) -> None:
    """Any split of the events into reads: `next_batch` gives them in order, then empty ones.

    Each batch is within one read, a terminal in a batch of its own, nothing after it.
    """
    items = _items(ops)
    source = Batches(data.draw(split(items)))
    stream = AssistantMessageEventStream.from_batches(source.gen())
    got: list[tuple[AssistantMessageEvent, ...]] = []
    with anyio.fail_after(5):
        while batch := await stream.next_batch():
            got.append(batch)
        assert await stream.next_batch() == ()
    flat = [e for b in got for e in b]
    want = expected_reads(items)
    assert same(flat, want)
    for batch in got:
        terminals = [e for e in batch if isinstance(e, DoneEvent | ErrorEvent)]
        assert not terminals or len(batch) == 1
    assert source.closed
    if want and isinstance(want[-1], DoneEvent | ErrorEvent):
        final = want[-1]
        message = final.message if isinstance(final, DoneEvent) else final.error
        assert (await result_of(stream)) is message
    else:
        with pytest.raises(IncompleteStreamError):
            await result_of(stream)


@given(data=st.data(), ops=BATCH_OPS, reads=st.lists(st.booleans(), max_size=12))
async def test_batches_read_one_by_one_or_mixed_are_the_same_events(
    data: st.DataObject, ops: list[BatchOp], reads: list[bool]
) -> None:
    """`async for`, `next_batch`, or both in turn read the same events of a batch source once."""
    items = _items(ops)
    batches = data.draw(split(items))
    stream = AssistantMessageEventStream.from_batches(Batches(batches).gen())
    got: list[AssistantMessageEvent] = []
    turns = iter(reads)
    with anyio.fail_after(5):
        while True:
            if next(turns, False):
                batch = await stream.next_batch()
                if not batch:
                    break
                got += batch
            else:
                try:
                    got.append(await stream.__anext__())
                except StopAsyncIteration:
                    break
    assert same(got, expected_reads(items))


@given(ops=BATCH_OPS)
async def test_next_batch_of_single_events_and_of_pushes(ops: list[BatchOp]) -> None:
    """A source of single events gives batches of one; push style gives what is queued."""
    items = _items(ops)

    async def single() -> AsyncIterator[AssistantMessageEvent]:
        for item in items:
            yield item

    pulled = AssistantMessageEventStream.from_source(single())
    pushed = AssistantMessageEventStream()
    for item in items:
        pushed.push(item)
    pushed.end()
    for stream, at_most in ((pulled, 1), (pushed, len(items))):
        got: list[AssistantMessageEvent] = []
        with anyio.fail_after(5):
            while batch := await stream.next_batch():
                assert len(batch) <= at_most
                got += batch
        assert same(got, expected_reads(items))


async def test_aclose_releases_a_batch_source_mid_stream() -> None:
    """Closing a batch stream before its end closes the source (the provider's connection)."""
    source = Batches([[delta(1), delta(2)], [delta(3)], [done(4)]])
    stream = AssistantMessageEventStream.from_batches(source.gen())
    with anyio.fail_after(5):
        assert same(await stream.next_batch(), [source.batches[0][0], source.batches[0][1]])
        await stream.aclose()
        assert await stream.next_batch() == ()
    assert source.closed
