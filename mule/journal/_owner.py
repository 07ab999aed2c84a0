"""The transcript-owner interface: what durable recording and recovery of runs needs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from mule.effects import MuleEvent, MuleResume
from mule.pi import AbortSignal, Message


class TranscriptOwner(Protocol):
    """Records runs durably and rebuilds the input that continues an interrupted one.

    `listener(run_id)` must make each `tool_execution_start` durable before it returns, or
    before the awaitable it returns ends (the core runs the tool only after that), and each
    committed message at its `message_end`; an assistant attempt followed by `model_prompt` in
    the same turn was superseded by a retry and must not be recovered. It should refuse a run
    another writer holds (the journal raises `JournalError`), so one run has one writer.
    """

    def begin(self, run_id: str, messages: Sequence[Message]) -> None:
        """Record a new run and its starting messages."""
        ...

    def listener(self, run_id: str) -> Callable[[MuleEvent, AbortSignal], Awaitable[None] | None]:
        """Return a listener that records one run (the first, or a resumed one) of `run_id`.

        It may return an awaitable (the journal does at checkpoints, committing off the loop):
        the event is durable once that is awaited, so a wrapper must await or return it.
        """
        ...

    def recover(self, run_id: str) -> tuple[tuple[Message, ...], MuleResume | None]:
        """Return the `messages` and `resume` that continue the run."""
        ...

    def transcript(self, run_id: str) -> tuple[Message, ...]:
        """Return the run's committed transcript."""
        ...


__all__ = ["TranscriptOwner"]
