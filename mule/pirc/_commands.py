"""Bridge errors, and the shape of pi's RPC commands and responses."""

from __future__ import annotations

import uuid
from typing import Any, Literal, TypeAlias, final

from attrs import frozen

StreamingBehavior: TypeAlias = Literal["steer", "followUp"]
QueueMode: TypeAlias = Literal["all", "one-at-a-time"]

# Every command pi answers with exactly one `response` (section 2 of the protocol digest).
COMMAND_TYPES: frozenset[str] = frozenset(
    {
        "prompt",
        "steer",
        "follow_up",
        "abort",
        "new_session",
        "get_state",
        "get_messages",
        "set_model",
        "cycle_model",
        "get_available_models",
        "set_thinking_level",
        "cycle_thinking_level",
        "set_steering_mode",
        "set_follow_up_mode",
        "compact",
        "set_auto_compaction",
        "set_auto_retry",
        "abort_retry",
        "bash",
        "abort_bash",
        "get_session_stats",
        "export_html",
        "switch_session",
        "fork",
        "clone",
        "get_fork_messages",
        "get_last_assistant_text",
        "set_session_name",
        "get_commands",
    }
)


class BridgeError(Exception):
    """Base of every failure the bridge reports."""


@final
class ConfigError(BridgeError, ValueError):
    """A `BridgeConfig` that must not start pi (e.g. a value that looks like an option)."""


@final
class WriteTimeout(BridgeError):
    """pi did not take a command from its stdin within `write_timeout`: it no longer reads.

    The stream may hold part of a line, so the bridge writes nothing more to it.

    Attributes:
        timeout: The write deadline that passed (`write_timeout`), in seconds.

    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(f"pi did not read its stdin within {timeout:g} s")


@final
class CommandFailed(BridgeError):
    """pi answered a command with `success: false`; `error` is pi's text.

    Attributes:
        command: The command's type (`prompt`, `set_model`, ...).
        error: pi's error text.

    """

    def __init__(self, command: str, error: str) -> None:
        self.command = command
        self.error = error
        super().__init__(f"pi rejected {command}: {error}")


@final
class CommandTimeout(BridgeError):
    """No response to a command within its timeout.

    Attributes:
        command: The command's type.
        timeout: The wait that passed, in seconds.

    """

    def __init__(self, command: str, timeout: float) -> None:
        self.command = command
        self.timeout = timeout
        super().__init__(f"no response to {command} within {timeout:g} s")


@final
class ProcessExited(BridgeError):
    """The pi process is gone (or never started); `returncode` is its exit status if known.

    Attributes:
        returncode: pi's exit status (negative: killed by that signal); None if unknown.

    """

    def __init__(self, message: str, returncode: int | None = None) -> None:
        self.returncode = returncode
        super().__init__(message)


@final
class JobTimeout(BridgeError):
    """A job ran past its timeout; the bridge aborted it and stopped pi.

    Attributes:
        timeout: The job's limit that passed, in seconds.

    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(f"job did not finish within {timeout:g} s")


@final
@frozen
class Response:
    """One `response` record from pi."""

    command: str
    success: bool
    id: str | None = None
    data: Any = None
    error: str | None = None


def new_id() -> str:
    """Return a fresh command id."""
    return str(uuid.uuid4())


def parse_response(record: dict[str, Any]) -> Response:
    """Read a `type: response` record (missing keys are tolerated)."""
    rid = record.get("id")
    command = record.get("command")
    error = record.get("error")
    return Response(
        command=command if isinstance(command, str) else "",
        success=record.get("success") is True,
        id=rid if isinstance(rid, str) else None,
        data=record.get("data"),
        error=error if isinstance(error, str) else None,
    )


__all__ = [
    "COMMAND_TYPES",
    "BridgeError",
    "CommandFailed",
    "CommandTimeout",
    "ConfigError",
    "JobTimeout",
    "ProcessExited",
    "QueueMode",
    "Response",
    "StreamingBehavior",
    "WriteTimeout",
    "new_id",
    "parse_response",
]
