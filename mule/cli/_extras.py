"""Which `pip install 'mule[...]'` line a missing optional dependency needs (loads without rich)."""

from __future__ import annotations

from typing import Final

EXTRA_OF: Final = {
    "rich": "cli",
    "httpx": "cli",
    "starlette": "server",
    "uvicorn": "server",
    "websockets": "server",
    "mcp": "mcp",
    "mcp_types": "mcp",
    "httpx2": "mcp",
    "pydantic": "mcp",
    "opentelemetry": "otel-export",
    "dbos": "dbos",
    "psycopg": "dbos",
}
"""Top-level module -> the extra of pyproject.toml that installs it."""


def missing_extra(exc: ImportError, what: str) -> str | None:
    """Return the one-line advice for a missing optional module, or None if it is not one of ours.

    >>> missing_extra(ModuleNotFoundError("x", name="starlette.routing"), "mule serve")
    "mule serve needs starlette: pip install 'mule[server]'"
    """
    top = (exc.name or "").partition(".")[0]
    extra = EXTRA_OF.get(top)
    if extra is None:
        return None
    return f"{what} needs {top}: pip install 'mule[{extra}]'"


__all__ = ["EXTRA_OF", "missing_extra"]
