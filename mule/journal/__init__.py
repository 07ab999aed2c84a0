"""Durable runs: a SQLite transcript owner that records every event and recovers runs."""

from mule.journal._fold import Fold, fold
from mule.journal._owner import TranscriptOwner
from mule.journal._record import COMMIT_POINTS, STREAM_ONLY
from mule.journal._sqlite import Journal, JournalError, JournalRunStatus, RunInfo, Synchronous
from mule.journal._writer import CommitWriter

__all__ = [
    "COMMIT_POINTS",
    "STREAM_ONLY",
    "CommitWriter",
    "Fold",
    "Journal",
    "JournalError",
    "JournalRunStatus",
    "RunInfo",
    "Synchronous",
    "TranscriptOwner",
    "fold",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish

_publish(__name__, globals(), __all__)
