"""A mule DBOS worker for the tests: `python -m tests.dbos.worker URL EXECUTOR_ID PAUSE_DIR`.

Registers the test agents, launches DBOS, prints `ready <executor id>`, and runs until its
stdin closes (or it is killed).
"""

from __future__ import annotations

import sys
from pathlib import Path

from dbos import DBOS

from mule.dbos import AgentFactory, launch_worker, register_agent
from mule.pi._messages import Message
from mule.promise import MuleRunInput
from tests.dbos import agents


def main(url: str, executor_id: str, pause_dir: str) -> None:
    """Serve runs until stdin closes."""
    where = Path(pause_dir)

    def by_run(sequential: bool) -> AgentFactory:
        def build(messages: tuple[Message, ...]) -> MuleRunInput:
            run_id = DBOS.workflow_id
            assert run_id is not None
            return agents.scenario(run_id, where, sequential=sequential)(messages)

        return build

    register_agent("scenario", by_run(False))
    register_agent("scenario-seq", by_run(True))
    register_agent("slow", agents.slow)
    worker = launch_worker(
        url,
        executor_id=executor_id,
        worker_concurrency=8,
        heartbeat_s=0.2,
        dead_after_s=1.0,
        queue_poll_s=0.05,
        cancel_poll_s=0.05,
    )
    print(f"ready {executor_id}", flush=True)
    sys.stdin.read()
    worker.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
