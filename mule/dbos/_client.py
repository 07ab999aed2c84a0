"""The client side of DBOS-run mule runs: start, follow, cancel and await from any process."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, final

from attrs import frozen
from dbos import DBOSClient, WorkflowHandle

from mule.dbos._store import PgStore, StoredEvent, follow
from mule.dbos._workflow import DEFAULT_QUEUE, WORKFLOW_NAME
from mule.effects import from_wire
from mule.pi import AssistantMessage, Message


@final
@frozen
class RunSummary:
    """What a DBOS-run mule run returned: its status, transcript and failure, if any.

    Attributes:
        status: `"completed"`, `"cancelled"` or `"failed"`.
        messages: The messages the run added (`MuleRunOutcome.messages`); empty when it
            failed (its committed transcript is `MuleDBOSClient.transcript`).
        message: The run's last assistant message; None when it failed.
        error: `"phase: message"` of the run's `MuleError` when it failed, else None.

    """

    status: str
    messages: tuple[Message, ...]
    message: AssistantMessage | None
    error: str | None

    @staticmethod
    def from_wire(data: dict[str, Any]) -> RunSummary:
        """Rebuild a summary from the workflow's (JSON) return value."""
        message = data.get("message")
        return RunSummary(
            status=data["status"],
            messages=tuple(from_wire(Message, m) for m in data["messages"]),
            message=None if message is None else from_wire(AssistantMessage, message),
            error=data.get("error"),
        )


@final
class MuleDBOSClient:
    """Starts, follows, cancels and awaits DBOS-run mule runs from any process (no DBOS launch).

    Blocking methods; from async code call them through `anyio.to_thread.run_sync`.
    `follow` is async and works on asyncio and trio.

    Attributes:
        url: The PostgreSQL URL of DBOS's system database and mule's run store.
        schema: The schema of mule's run store in that database.
        queue: The DBOS queue runs are started on.
        store: The run store (`PgStore`): transcripts and event logs.
        client: The DBOS client that starts, cancels and awaits the workflows.

    """

    def __init__(self, url: str, *, schema: str = "mule", queue: str = DEFAULT_QUEUE) -> None:
        self.url = url
        self.schema = schema
        self.queue = queue
        self.store = PgStore(url, schema=schema)
        self.client = DBOSClient(system_database_url=url, application_name="mule")

    def close(self) -> None:
        """Release the connections."""
        self.store.close()
        self.client.destroy()

    def __enter__(self) -> MuleDBOSClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, agent: str, messages: Sequence[Message], run_id: str | None = None) -> str:
        """Record the run and enqueue it; return its id (the workflow id). Idempotent by id."""
        run_id = run_id or f"run-{uuid.uuid4().hex}"
        self.store.begin(run_id, messages, exist_ok=True)
        self.client.enqueue(
            {"queue_name": self.queue, "workflow_name": WORKFLOW_NAME, "workflow_id": run_id},
            agent,
            run_id,
        )
        return run_id

    def cancel(self, run_id: str) -> None:
        """Cancel the run wherever it executes; its worker ends it with run_end(cancelled)."""
        self.client.cancel_workflow(run_id)

    def result(self, run_id: str) -> RunSummary:
        """Wait for the run's workflow to finish and return its summary."""
        handle: WorkflowHandle[dict[str, Any]] = self.client.retrieve_workflow(run_id)
        data: dict[str, Any] = handle.get_result(polling_interval_sec=0.05)
        return RunSummary.from_wire(data)

    def workflow_status(self, run_id: str) -> str:
        """Return DBOS's status of the run's workflow (ENQUEUED, PENDING, SUCCESS, ...)."""
        return str(self.client.retrieve_workflow(run_id).get_status().status)

    def executor(self, run_id: str) -> str | None:
        """Return the executor id DBOS last assigned the run to."""
        return self.client.retrieve_workflow(run_id).get_status().executor_id

    def events(self, run_id: str) -> list[StoredEvent]:
        """Return every recorded event of the run so far."""
        return self.store.events(run_id)

    def transcript(self, run_id: str) -> tuple[Message, ...]:
        """Return the run's committed transcript."""
        return self.store.transcript(run_id)

    def follow(self, run_id: str, after: int = 0) -> AsyncIterator[StoredEvent]:
        """Follow the run live (from the start by default) until its run_end."""
        return follow(self.url, run_id, after=after, schema=self.schema)


__all__ = ["MuleDBOSClient", "RunSummary"]
