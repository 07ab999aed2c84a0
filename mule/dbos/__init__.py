"""Scale-out: mule runs as DBOS durable workflows on PostgreSQL, across workers and machines.

Needs the `mule[dbos]` extra. Workers call `register_agent` then `launch_worker(url)`; any
process starts, follows, cancels and awaits runs with `MuleDBOSClient(url)`. `PgStore` is the
PostgreSQL run store (also a `TranscriptOwner`, like `mule.journal.Journal`). See docs/dbos.md.
"""

from mule.pi import needs_extra

with needs_extra("dbos", "mule.dbos"):
    from mule.dbos._client import MuleDBOSClient, RunSummary
    from mule.dbos._observe import DurableRun, ListenerFactory
    from mule.dbos._store import PgStore, StoredEvent, StoreError, event_key, follow
    from mule.dbos._worker import Worker
    from mule.dbos._workflow import (
        DEFAULT_QUEUE,
        WORKFLOW_NAME,
        AgentFactory,
        dbos_config,
        launch_worker,
        register_agent,
    )

__all__ = [
    "DEFAULT_QUEUE",
    "WORKFLOW_NAME",
    "AgentFactory",
    "DurableRun",
    "ListenerFactory",
    "MuleDBOSClient",
    "PgStore",
    "RunSummary",
    "StoreError",
    "StoredEvent",
    "Worker",
    "dbos_config",
    "event_key",
    "follow",
    "launch_worker",
    "register_agent",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish

_publish(__name__, globals(), __all__)
