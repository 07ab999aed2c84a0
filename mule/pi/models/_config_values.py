"""Config values of `models.json` resolved as Pi does, and where Pi keeps its agent directory.

A value is "!command" (its output), an environment variable's name, or a literal. Resolving a
value that starts with "!" runs it in a shell, exactly as Pi does.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Final

_COMMAND_TIMEOUT_S: Final = 10.0


def _run_command(command: str) -> str | None:
    try:
        done = subprocess.run(
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=_COMMAND_TIMEOUT_S,
            check=True,
            text=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def resolve_config_value(value: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Resolve a config value as Pi does.

    "!cmd" runs cmd in a shell (its trimmed stdout; None on failure or no output); otherwise
    the environment variable of that name when it is set and non-empty, else the literal.
    """
    if value.startswith("!"):
        return _run_command(value[1:])
    env = os.environ if environ is None else environ
    return env.get(value) or value


def resolve_config_value_or_raise(
    value: str, description: str, environ: Mapping[str, str] | None = None
) -> str:
    """Resolve a config value or raise `ValueError` with Pi's message."""
    resolved = resolve_config_value(value, environ)
    if resolved is not None:
        return resolved
    if value.startswith("!"):
        raise ValueError(f"Failed to resolve {description} from shell command: {value[1:]}")
    raise ValueError(f"Failed to resolve {description}")


def resolve_headers(
    headers: Mapping[str, str] | None, description: str, environ: Mapping[str, str] | None = None
) -> dict[str, str] | None:
    """Resolve every header value like an API key; None when there are none."""
    if not headers:
        return None
    return {
        key: resolve_config_value_or_raise(value, f'{description} header "{key}"', environ)
        for key, value in headers.items()
    }


def default_agent_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return Pi's agent directory: `PI_CODING_AGENT_DIR` (with ~ expanded) or ~/.pi/agent."""
    env = os.environ if environ is None else environ
    configured = env.get("PI_CODING_AGENT_DIR")
    if configured:
        if configured == "~" or configured.startswith("~/"):
            return Path(str(Path.home()) + configured[1:])
        return Path(configured)
    return Path.home() / ".pi" / "agent"


def default_models_json_path(environ: Mapping[str, str] | None = None) -> Path:
    """Return where Pi looks for `models.json`."""
    return default_agent_dir(environ) / "models.json"


__all__ = [
    "default_agent_dir",
    "default_models_json_path",
    "resolve_config_value",
    "resolve_config_value_or_raise",
    "resolve_headers",
]
