"""mule runs as DBOS workflows on two worker processes: outcome, events, follow, cancel."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import mule.promise as promise
from mule.dbos import MuleDBOSClient
from mule.dbos._store import StoredEvent
from mule.journal._record import encode
from mule.effects._events import MuleEvent
from mule.pi._messages import UserMessage
from mule.testing.crash import FINAL_TEXT, PROMPT, CrashCase, check_case
from tests.dbos import agents
from tests.dbos.conftest import WorkerProc

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(pg_url: str, workers: list[WorkerProc]) -> Any:
    """A client in the test process (no DBOS launch here)."""
    with MuleDBOSClient(pg_url) as c:
        yield c


def prompt() -> tuple[UserMessage, ...]:
    return (UserMessage(PROMPT, 1_700_000_000_000),)


def case_of(client: MuleDBOSClient, run_id: str, pause_dir: Path) -> CrashCase:
    """The crash kit's view of a finished DBOS run (committed = everything it logged)."""
    case = CrashCase(run_id, "", pause_dir / f"{run_id}.effects")
    case.transcript = client.transcript(run_id)
    return case


def test_a_run_completes_through_a_worker(client: MuleDBOSClient, pause_dir: Path) -> None:
    """A run enqueued from this process completes on a worker, with the crash kit's checks."""
    run_id = client.start("scenario", prompt())
    summary = client.result(run_id)
    assert summary.status == "completed", summary.error
    assert summary.message is not None
    assert summary.message.content[0].text == FINAL_TEXT  # type: ignore[union-attr]
    check_case(case_of(client, run_id, pause_dir))
    assert sorted(case_of(client, run_id, pause_dir).effect_counts().values()) == [1] * 5
    assert (*prompt(), *summary.messages) == client.transcript(run_id)
