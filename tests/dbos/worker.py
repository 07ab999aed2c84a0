"""A mule DBOS worker for the tests: `python -m tests.dbos.worker URL EXECUTOR PAUSE_DIR [traced]`.

Registers the test agents, launches DBOS, prints `ready <executor id>`, and runs until its
stdin closes (or it is killed). With `traced`, each run execution is traced by
`mule.otel.traced` (the real SDK), linked to the trace kept in the run's metadata, its
replayed steps marked, and every
finished span is appended at once to `PAUSE_DIR/spans-<executor id>.jsonl`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from dbos import DBOS

from mule.dbos import AgentFactory, DurableRun, ListenerFactory, launch_worker, register_agent
from mule.pi import Message
from mule.promise import MulePromiseListener, MuleRunInput
from tests.dbos import agents

TRACE_KEY = "otel.traceparent"


def tracing(where: Path, executor_id: str) -> ListenerFactory:
    """Return the worker's listener factory: each execution traced, linked to the one before."""
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from mule.otel import link_to, traced

    out = where / f"spans-{executor_id}.jsonl"

    class ToFile(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            with out.open("a") as f:  # at once: the worker may be killed next
                for s in spans:
                    assert s.context is not None
                    f.write(
                        json.dumps(
                            {
                                "name": s.name,
                                "trace": format(s.context.trace_id, "032x"),
                                "span": format(s.context.span_id, "016x"),
                                "parent": None
                                if s.parent is None
                                else format(s.parent.span_id, "016x"),
                                "links": [
                                    [
                                        format(link.context.trace_id, "032x"),
                                        format(link.context.span_id, "016x"),
                                    ]
                                    for link in s.links
                                ],
                                "attributes": dict(s.attributes or {}),
                            },
                            default=list,
                        )
                        + "\n"
                    )
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ToFile()))

    def listen(run: DurableRun) -> MulePromiseListener:
        continues = run.meta.get(TRACE_KEY)
        try:
            link = None if continues is None else link_to(continues)
        except ValueError:
            link = None  # damaged: trace the execution without the link

        def keep(parent: str) -> None:
            run.set_meta(TRACE_KEY, parent)

        return traced(
            tracer_provider=provider,
            agent_name=run.agent,
            conversation_id=run.run_id,
            continues=link,
            on_run_start=keep,
            replayed=run.replayed,
        )

    return listen


def main(url: str, executor_id: str, pause_dir: str, *flags: str) -> None:
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
        listener=tracing(where, executor_id) if "traced" in flags else None,
    )
    print(f"ready {executor_id}", flush=True)
    sys.stdin.read()
    worker.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
