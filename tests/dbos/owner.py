"""The crash kit's owner factory for PgStore: the URL comes from MULE_DBOS_TEST_URL."""

from __future__ import annotations

import os

from mule.dbos import PgStore


def pg_owner(path: str) -> PgStore:
    """Return a PgStore on the test cluster (the kit's store path is not used)."""
    return PgStore(os.environ["MULE_DBOS_TEST_URL"], schema="crashkit")
