"""A mule worker process: its runtime settings, its heartbeat, and dead peers' recovery."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, final

import anyio.lowlevel
from dbos import DBOS, DBOSClient

from mule.dbos._observe import ListenerFactory
from mule.dbos._store import PgStore
from mule.pi import now_ms

Post = Callable[..., Any]  # an event loop's call-soon-from-another-thread


@final
class Runtime:
    """The worker settings of this process (DBOS is one per process)."""

    def __init__(
        self,
        url: str,
        executor_id: str,
        schema: str,
        cancel_poll_s: float,
        listener: ListenerFactory | None = None,
    ) -> None:
        self.url = url
        self.listener = listener
        self.executor_id = executor_id
        self.store = PgStore(url, schema=schema)
        self.cancel_poll_s = cancel_poll_s
        self.client: DBOSClient | None = None
        # One poller for every run in flight (a query per run every poll took a database
        # round trip per run: 500 queries/s at 100 runs, most of a worker's time), and one
        # flush timer: a timer task per run woke the loop 25 times a second per run.
        self._watch_lock = threading.Lock()
        self._watched: dict[str, tuple[Post, Callable[[], None]]] = {}
        self._flushed: dict[object, tuple[Post, Callable[[], None]]] = {}
        self._threads: list[threading.Thread] = []

    def _start_threads(self) -> None:
        if not self._threads:  # under _watch_lock
            for target, name in ((self._poll, "mule-cancel-poll"), (self._tick, "mule-flush")):
                thread = threading.Thread(target=target, name=name, daemon=True)
                thread.start()
                self._threads.append(thread)

    def watch(self, run_id: str, post: Post, on_cancel: Callable[[], None]) -> None:
        """Call `on_cancel` through `post` (on the run's loop) once DBOS marks the run cancelled."""
        with self._watch_lock:
            self._watched[run_id] = (post, on_cancel)
            self._start_threads()

    def unwatch(self, run_id: str) -> None:
        """Stop watching the run."""
        with self._watch_lock:
            self._watched.pop(run_id, None)

    def flush_every(self, key: object, post: Post, flush: Callable[[], None]) -> None:
        """Call `flush` through `post` every `store.flush_ms` until `unflush(key)`."""
        with self._watch_lock:
            self._flushed[key] = (post, flush)
            self._start_threads()

    def unflush(self, key: object) -> None:
        """Stop flushing for `key`."""
        with self._watch_lock:
            self._flushed.pop(key, None)

    def _tick(self) -> None:
        """Every `store.flush_ms`: one call per event loop flushes every run's buffered events."""
        while True:
            time.sleep(self.store.flush_ms / 1000)
            with self._watch_lock:
                due = list(self._flushed.values())
            _post_all(due)

    def _poll(self) -> None:
        """Every `cancel_poll_s`: which watched runs DBOS marked cancelled, in one query."""
        while True:
            time.sleep(self.cancel_poll_s)
            with self._watch_lock:
                ids = list(self._watched)
            if not ids:
                continue
            try:
                if self.client is None:
                    self.client = DBOSClient(system_database_url=self.url, application_name="mule")
                found = self.client.list_workflows(
                    workflow_ids=ids, status="CANCELLED", load_input=False, load_output=False
                )
            except Exception as exc:  # a database hiccup: ask again at the next poll
                DBOS.logger.warning(f"mule cancel poll failed: {exc}")
                continue
            with self._watch_lock:
                due = [self._watched.pop(w.workflow_id, None) for w in found]
            _post_all([d for d in due if d is not None])


def _post_all(calls: list[tuple[Post, Callable[[], None]]]) -> None:
    """Run the calls on their event loops: one hand-over per loop."""
    by_loop: dict[Post, list[Callable[[], None]]] = {}
    for post, fn in calls:
        by_loop.setdefault(post, []).append(fn)
    for post, fns in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop has ended
            post(_call_each, fns)


def _call_each(fns: list[Callable[[], None]]) -> None:
    for fn in fns:
        try:
            fn()
        except Exception as exc:  # one run's failure is not the others'
            DBOS.logger.warning(f"mule: a timer call failed: {exc}")


def loop_post() -> Post:
    """Return the running event loop's call-soon-from-any-thread (asyncio or trio)."""
    native = anyio.lowlevel.current_token().native_token
    post: Post | None = getattr(native, "call_soon_threadsafe", None)
    return post if post is not None else native.run_sync_soon  # type: ignore[attr-defined]


@final
class Worker:
    """A mule worker (this process): DBOS launched, the queue consumed, dead peers recovered.

    Every worker writes a heartbeat row; one whose heartbeat is older than `dead_after_s` is
    taken as dead, and the first live worker to delete its row recovers its pending workflows
    with DBOS's own recovery (`DBOS._recover_pending_workflows([dead_id])`), which re-enqueues
    them so that exactly one worker dequeues each one and replays it.

    Attributes:
        rt: This process's worker settings (database URL, executor id, the run store).
        heartbeat_s: Seconds between two heartbeats (each also looks for dead peers).
        dead_after_s: Seconds without a heartbeat after which a peer is taken as dead.
        stop_event: Set to stop the heartbeat thread.
        recovered: Executor ids of the dead peers this worker recovered, in order.
        thread: The heartbeat thread.

    """

    def __init__(self, rt: Runtime, heartbeat_s: float, dead_after_s: float) -> None:
        self.rt = rt
        self.heartbeat_s = heartbeat_s
        self.dead_after_s = dead_after_s
        self.stop_event = threading.Event()
        self.recovered: list[str] = []
        self._db = PgStore(rt.url, schema=rt.store.schema)
        self.beat()
        self.thread = threading.Thread(target=self._loop, name="mule-heartbeat", daemon=True)
        self.thread.start()

    def beat(self) -> None:
        """Record that this executor is alive."""
        self._db._x(
            "INSERT INTO {}.workers VALUES (%s, %s)"
            " ON CONFLICT (executor_id) DO UPDATE SET seen_ms = EXCLUDED.seen_ms",
            (self.rt.executor_id, now_ms()),
        )

    def recover_dead(self) -> list[str]:
        """Recover the pending workflows of executors whose heartbeat stopped; return their ids."""
        cutoff = now_ms() - int(self.dead_after_s * 1000)
        rows = self._db._x(
            "DELETE FROM {}.workers WHERE seen_ms < %s AND executor_id <> %s RETURNING executor_id",
            (cutoff, self.rt.executor_id),
        ).fetchall()
        dead = [str(r[0]) for r in rows]
        if dead:
            DBOS._recover_pending_workflows(dead)
            self.recovered.extend(dead)
        return dead

    def _loop(self) -> None:
        while not self.stop_event.wait(self.heartbeat_s):
            try:
                self.beat()
                self.recover_dead()
            except Exception as exc:  # a database hiccup: try again at the next beat
                DBOS.logger.warning(f"mule worker heartbeat failed: {exc}")

    def stop(self) -> None:
        """Stop the heartbeat and DBOS (in-flight workflows are recovered by a peer)."""
        self.stop_event.set()
        self.thread.join()
        self._db.close()
        DBOS.destroy(workflow_completion_timeout_sec=0)


__all__ = ["Post", "Runtime", "Worker", "loop_post"]
