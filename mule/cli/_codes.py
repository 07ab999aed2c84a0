"""The CLI's constants that must load without rich (so a missing extra gets a clear message)."""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_CANCELLED: Final = 130

DEFAULT_IDLE_TIMEOUT_S: Final = 120.0
"""How long `mule run` waits for the next model stream event before failing the attempt."""
DEFAULT_TOOLS: Final = ("read", "ls", "grep", "bash")
THINKING_LEVELS: Final = ("off", "minimal", "low", "medium", "high", "xhigh")

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_S",
    "DEFAULT_TOOLS",
    "EXIT_CANCELLED",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "THINKING_LEVELS",
]
