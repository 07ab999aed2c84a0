"""A run's settings kept in its journal, so `mule run --journal J --resume ID` needs nothing else.

The `run` options that shape a run (model, endpoint, wire API, tools, limits, integrations) go
to `Journal.set_meta(run_id, "cli.settings", json)`; API keys never do (they are not options:
they come from the environment or models.json at resume time; a password in a URL is dropped).
`--yes` is not kept either: a resumed run asks again unless it is given again. Options given on
the resuming command line win over the stored ones.
"""

from __future__ import annotations

import argparse
import json
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from returns.result import Failure, Result, Success

SETTINGS_KEY: Final = "cli.settings"
MODEL_KEY: Final = "cli.model"
STORED: Final = (
    "model",
    "base_url",
    "api",
    "idle_timeout",
    "system",
    "tools",
    "thinking",
    "retries",
    "retry_base_ms",
    "provider_retries",
    "cwd",
    "unconfined",
    "mcp",
    "mcp_url",
    "otel",
    "bash_timeout",
)
"""The `mule run` destinations kept with a run."""


def without_password(url: str) -> str:
    """Return `url` without the password of its user info (a journal never keeps a secret).

    >>> without_password("https://me:s3cret@example.com/mcp")
    'https://me@example.com/mcp'
    """
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username}@{host}").geturl()


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """Return the run's settings as JSON values (URLs without passwords)."""
    out: dict[str, Any] = {}
    for key in STORED:
        value = getattr(args, key)
        if isinstance(value, Path):
            value = str(value.resolve())
        elif isinstance(value, tuple):
            value = list(value)
        if key == "base_url" and isinstance(value, str):
            value = without_password(value)
        elif key == "mcp_url" and isinstance(value, list):
            value = [without_password(u) for u in value]
        out[key] = value
    return out


def restore(args: argparse.Namespace, given: set[str], stored: Mapping[str, Any]) -> None:
    """Fill `args` with the stored settings, except the options given on the command line."""
    for key in STORED:
        if key in given or key not in stored:
            continue
        value = stored[key]
        if key == "cwd":
            value = Path(value)
        elif key == "tools":
            value = tuple(value)
        setattr(args, key, value)


def stored_settings(path: Path, run_id: str) -> Result[tuple[str, dict[str, Any]], str]:
    """Return the whole run id that `run_id` names (a unique prefix will do) and its settings."""
    from mule.cli._journal import find_run
    from mule.journal import Journal

    if not path.exists():
        return Failure(f"no run {run_id!r}: there is no journal at {path}")
    try:
        with Journal(path) as journal:
            found = find_run(journal, run_id)
            if isinstance(found, Failure):
                return Failure(found.failure())
            full = found.unwrap()
            raw = journal.meta(full).get(SETTINGS_KEY)
    except Exception as exc:  # sqlite3 errors, a damaged file, ...
        return Failure(f"cannot read journal {path}: {exc}")
    try:
        settings = json.loads(raw) if raw is not None else {}
    except ValueError:
        settings = {}  # damaged: the command line must say it all
    return Success((full, settings if isinstance(settings, dict) else {}))


__all__ = [
    "MODEL_KEY",
    "SETTINGS_KEY",
    "STORED",
    "restore",
    "settings_of",
    "stored_settings",
    "without_password",
]
