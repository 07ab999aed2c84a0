"""The bounded event buffer: deltas dropped first, lifecycle never, back-pressure when full."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from mule.pirc import EventBuffer


def droppable(item: str) -> bool:
    return item.startswith("u")


@pytest.mark.anyio
async def test_fifo_under_capacity() -> None:
    """Below capacity nothing is dropped and order is kept."""
    buf: EventBuffer[str] = EventBuffer(4, droppable)
    for x in ("a", "u1", "b"):
        assert await buf.put(x)
    assert [await buf.get() for _ in range(3)] == ["a", "u1", "b"]
    assert buf.stats.dropped == 0


@pytest.mark.anyio
async def test_full_buffer_evicts_oldest_delta() -> None:
    """A new item evicts the oldest buffered delta; the newest delta survives."""
    buf: EventBuffer[str] = EventBuffer(3, droppable)
    for x in ("u1", "a", "u2"):
        await buf.put(x)
    assert await buf.put("b")  # evicts u1
    assert await buf.put("u3")  # evicts u2
    buf.close()
    assert [x async for x in _drain(buf)] == ["a", "b", "u3"]
    assert buf.stats.dropped == 2


@pytest.mark.anyio
async def test_full_of_lifecycle_drops_incoming_delta() -> None:
    """With only lifecycle items buffered, an incoming delta is dropped (counted)."""
    buf: EventBuffer[str] = EventBuffer(2, droppable)
    await buf.put("a")
    await buf.put("b")
    assert not await buf.put("u1")
    assert buf.stats.dropped == 1
    assert len(buf) == 2


@pytest.mark.anyio
async def test_full_of_lifecycle_blocks_lifecycle_until_read() -> None:
    """A lifecycle item waits for room (back-pressure) and is never lost."""
    buf: EventBuffer[str] = EventBuffer(2, droppable)
    await buf.put("a")
    await buf.put("b")
    done = anyio.Event()

    async def producer() -> None:
        await buf.put("c")
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(producer)
        await anyio.wait_all_tasks_blocked()
        assert not done.is_set()
        assert await buf.get() == "a"
        await done.wait()
    assert buf.stats.blocked_puts == 1
    buf.close()
    assert [x async for x in _drain(buf)] == ["b", "c"]


@pytest.mark.anyio
async def test_close_wakes_reader_and_blocked_writer() -> None:
    """close() ends the stream for readers and releases a blocked writer."""
    buf: EventBuffer[str] = EventBuffer(1, droppable)
    await buf.put("a")
    results: list[bool] = []

    async def producer() -> None:
        results.append(await buf.put("b"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(producer)
        await anyio.wait_all_tasks_blocked()
        buf.close()
    assert results == [False]
    assert await buf.get() == "a"
    with pytest.raises(anyio.EndOfStream):
        await buf.get()


@pytest.mark.anyio
async def test_force_put_exceeds_capacity() -> None:
    """force_put (used once pi is gone) never waits."""
    buf: EventBuffer[str] = EventBuffer(1, droppable)
    await buf.put("a")
    buf.force_put("b")
    assert len(buf) == 2


async def _drain(buf: EventBuffer[str]) -> AsyncIterator[str]:
    while True:
        try:
            yield await buf.get()
        except anyio.EndOfStream:
            return
