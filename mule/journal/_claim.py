"""Who holds a run: the claim a journal listener takes, and whether its holder is still alive.

A claim is a token stored with the run (`runs.claim`) together with the holder's pid and host.
It is held while its holder can still write: in this process, while the listener that took it
is still referenced and has not recorded `run_end`; in another process on this host, while
that process is alive; on another host, until it is released (mule cannot see that host's
processes).
"""

from __future__ import annotations

import gc
import os
import socket
import uuid
from typing import Final

# Tokens of this process's listeners that have neither ended their run nor been collected.
_LIVE: Final[set[str]] = set()


def new_claim() -> str:
    """Return a fresh claim token, live in this process until `release`."""
    token = uuid.uuid4().hex
    _LIVE.add(token)
    return token


def release(token: str) -> None:
    """Mark a claim of this process as no longer held (its run ended or its listener is gone)."""
    _LIVE.discard(token)


def alive(pid: int) -> bool:
    """Return whether process `pid` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):  # a pid no process can have (a damaged row)
        return False
    return True


def held(claim: str | None, pid: int, host: str) -> bool:
    """Return whether the claim stored with a run still has a holder that can write."""
    if claim is None:
        return False
    if host != socket.gethostname():
        return True
    if pid == os.getpid():
        if claim in _LIVE:
            # A run that failed without `run_end` leaves its listener to the garbage
            # collector (often in a cycle through the failure's traceback): collect before
            # calling its claim held. Only a contended claim pays for this.
            gc.collect()
        return claim in _LIVE
    return alive(pid)


__all__ = ["alive", "held", "new_claim", "release"]
