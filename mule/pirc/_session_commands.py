"""pi's session commands as typed methods, over the one primitive that sends a command.

`Bridge` inherits these; each sends one command and returns the part of pi's response `data` it
names, tolerating a response whose `data` is missing or malformed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mule.pi import ImageContent, to_wire
from mule.pirc._commands import QueueMode
from mule.pirc._config import ThinkingOption
from mule.pirc._mapper import decode_message
from mule.pirc._pi_events import PiMessage
from mule.pirc._session_data import ClearedQueue, SessionEntries, SessionTree


def message_fields(message: str, images: Sequence[ImageContent]) -> dict[str, Any]:
    """Return the fields of a command that carries a user message and its images."""
    fields: dict[str, Any] = {"message": message}
    if images:
        fields["images"] = [to_wire(i) for i in images]
    return fields


class SessionCommands:
    """Typed wrappers of pi's RPC commands; a subclass provides `_command`."""

    async def _command(
        self,
        type: str,
        fields: Mapping[str, Any],
        time_limit: float | None,
        cid: str | None = None,
    ) -> Any:
        """Send one command and return its response's `data` (raises `BridgeError`s)."""
        raise NotImplementedError

    async def command(
        self, type: str, fields: Mapping[str, Any] | None = None, time_limit: float | None = None
    ) -> Any:
        """Send any command and return its response `data` (raises `CommandFailed` etc.)."""
        return await self._command(type, dict(fields or {}), time_limit)

    async def new_session(self, parent_session: str | None = None) -> dict[str, Any]:
        """Start a new session (writes a session file even under `--no-session`)."""
        fields = {"parentSession": parent_session} if parent_session else {}
        return dict(await self._command("new_session", fields, None) or {})

    async def get_state(self) -> dict[str, Any]:
        """Return pi's session state (model, isStreaming, messageCount, ...)."""
        return dict(await self._command("get_state", {}, None) or {})

    async def get_messages(self) -> tuple[PiMessage, ...]:
        """Return the session's messages (unknown roles stay raw)."""
        data = await self._command("get_messages", {}, None)
        raw = data.get("messages") if isinstance(data, Mapping) else None
        return tuple(decode_message(m) for m in raw) if isinstance(raw, list) else ()

    async def set_model(self, provider: str, model_id: str) -> dict[str, Any]:
        """Switch model; returns pi's model object."""
        data = await self._command("set_model", {"provider": provider, "modelId": model_id}, None)
        return dict(data or {})

    async def cycle_model(self) -> dict[str, Any] | None:
        """Cycle to the next scoped model (None if there is none)."""
        data = await self._command("cycle_model", {}, None)
        return dict(data) if isinstance(data, Mapping) else None

    async def get_available_models(self) -> list[dict[str, Any]]:
        """Return the models pi has credentials for."""
        data = await self._command("get_available_models", {}, None)
        models = data.get("models") if isinstance(data, Mapping) else None
        return list(models) if isinstance(models, list) else []

    async def set_thinking_level(self, level: ThinkingOption) -> None:
        """Set the thinking level."""
        await self._command("set_thinking_level", {"level": level}, None)

    async def cycle_thinking_level(self) -> str | None:
        """Cycle the thinking level; return the new one (None if the model cannot think)."""
        data = await self._command("cycle_thinking_level", {}, None)
        level = data.get("level") if isinstance(data, Mapping) else None
        return level if isinstance(level, str) else None

    async def get_available_thinking_levels(self) -> tuple[str, ...]:
        """Return the thinking levels the current model supports (pi >= 0.81; `off` first)."""
        data = await self._command("get_available_thinking_levels", {}, None)
        levels = data.get("levels") if isinstance(data, Mapping) else None
        return tuple(v for v in levels if isinstance(v, str)) if isinstance(levels, list) else ()

    async def clear_queue(self) -> ClearedQueue:
        """Empty pi's steering and follow-up queues; return what they held (pi >= 0.84)."""
        return ClearedQueue.from_data(await self._command("clear_queue", {}, None))

    async def get_entries(self, since: str | None = None) -> SessionEntries:
        """Return the session's entries, or those after entry `since` (pi >= 0.80).

        pi refuses an unknown `since` (`CommandFailed`: "Entry not found: <id>").
        """
        fields = {"since": since} if since is not None else {}
        return SessionEntries.from_data(await self._command("get_entries", fields, None))

    async def get_tree(self) -> SessionTree:
        """Return the session as a tree of entries (pi >= 0.80).

        pi nests each entry inside its parent: a session deeper than half the bridge's
        `max_line_depth` entries gives a line the bridge refuses (the call then times out).
        """
        return SessionTree.from_data(await self._command("get_tree", {}, None))

    async def set_steering_mode(self, mode: QueueMode) -> None:
        """Deliver steering messages all at once or one per turn (persists to settings)."""
        await self._command("set_steering_mode", {"mode": mode}, None)

    async def set_follow_up_mode(self, mode: QueueMode) -> None:
        """Deliver follow-ups all at once or one per turn."""
        await self._command("set_follow_up_mode", {"mode": mode}, None)

    async def compact(
        self, custom_instructions: str | None = None, time_limit: float | None = None
    ) -> dict[str, Any]:
        """Compact the session now."""
        fields = {"customInstructions": custom_instructions} if custom_instructions else {}
        return dict(await self._command("compact", fields, time_limit) or {})

    async def set_auto_compaction(self, enabled: bool) -> None:
        """Turn auto-compaction on or off."""
        await self._command("set_auto_compaction", {"enabled": enabled}, None)

    async def set_auto_retry(self, enabled: bool) -> None:
        """Turn auto-retry on or off (persists to settings)."""
        await self._command("set_auto_retry", {"enabled": enabled}, None)

    async def bash(self, command: str, time_limit: float | None = None) -> dict[str, Any]:
        """Run a shell command through pi; returns `{output, exitCode, cancelled, truncated}`."""
        return dict(await self._command("bash", {"command": command}, time_limit) or {})

    async def abort_bash(self) -> None:
        """Abort the running `bash` command."""
        await self._command("abort_bash", {}, None)

    async def get_session_stats(self) -> dict[str, Any]:
        """Return message, token and cost counts of the session."""
        return dict(await self._command("get_session_stats", {}, None) or {})

    async def export_html(self, output_path: str | None = None) -> str:
        """Export the session as HTML; return the file's path."""
        fields = {"outputPath": output_path} if output_path else {}
        data = await self._command("export_html", fields, None)
        return str(data.get("path", "")) if isinstance(data, Mapping) else ""

    async def switch_session(self, session_path: str) -> dict[str, Any]:
        """Load another session file."""
        data = await self._command("switch_session", {"sessionPath": session_path}, None)
        return dict(data or {})

    async def fork(self, entry_id: str) -> dict[str, Any]:
        """Fork the session at a user message entry."""
        return dict(await self._command("fork", {"entryId": entry_id}, None) or {})

    async def clone(self) -> dict[str, Any]:
        """Clone the session at its current entry."""
        return dict(await self._command("clone", {}, None) or {})

    async def get_fork_messages(self) -> list[dict[str, Any]]:
        """Return the user messages one can fork at."""
        data = await self._command("get_fork_messages", {}, None)
        msgs = data.get("messages") if isinstance(data, Mapping) else None
        return list(msgs) if isinstance(msgs, list) else []

    async def get_last_assistant_text(self) -> str | None:
        """Return the last assistant message's text (None if there is none)."""
        data = await self._command("get_last_assistant_text", {}, None)
        text = data.get("text") if isinstance(data, Mapping) else None
        return text if isinstance(text, str) else None

    async def set_session_name(self, name: str) -> None:
        """Name the session."""
        await self._command("set_session_name", {"name": name}, None)

    async def get_commands(self) -> list[dict[str, Any]]:
        """Return extension commands, prompt templates and skills."""
        data = await self._command("get_commands", {}, None)
        cmds = data.get("commands") if isinstance(data, Mapping) else None
        return list(cmds) if isinstance(cmds, list) else []


__all__ = ["SessionCommands", "message_fields"]
