"""`--journal/--resume` and `mule journal list|show`: the CLI over `mule.journal.Journal`."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path

from attrs import frozen
from returns.result import Failure, Result, Success
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from mule.effects import MuleResume
from mule.effects._tools import ToolCompleted, ToolPending, ToolStarted
from mule.journal import Journal, JournalError
from mule.pi._content import ImageContent, TextContent, ThinkingContent, ToolCall
from mule.pi._messages import (
    FAILURE_STOP_REASONS,
    AssistantMessage,
    Message,
    ToolResultMessage,
    UserMessage,
)


@frozen
class Continuation:
    """What a resumed run starts from."""

    messages: tuple[Message, ...]
    resume: MuleResume | None


def new_run_id() -> str:
    """Return a fresh, short run id."""
    return uuid.uuid4().hex[:12]


def open_journal(path: Path) -> Result[Journal, str]:
    """Open (or create) a journal file."""
    try:
        return Success(Journal(path))
    except Exception as exc:  # sqlite3 errors, a directory in the way, ...
        return Failure(f"cannot open journal {path}: {exc}")


def continuation(journal: Journal, run_id: str) -> Result[Continuation, str]:
    """Return the input that continues `run_id`, or why it cannot be resumed.

    A completed run has nothing left to do; a run whose writer is alive is not ours to take. A
    run that failed on the model keeps its failed message in the journal; it is left out here
    (as Pi's providers drop it anyway), so resuming asks the model again.
    """
    info = next((r for r in journal.runs() if r.run_id == run_id), None)
    if info is None:
        return Failure(f"no run {run_id!r} in {journal.path}")
    if info.status == "completed":
        return Failure(f"run {run_id} already completed; there is nothing to resume")
    if info.status == "running":
        return Failure(f"run {run_id} is still running (pid {info.pid})")
    try:
        messages, resume = journal.recover(run_id)
    except JournalError as exc:
        return Failure(str(exc))
    if resume is None:
        while (
            messages
            and isinstance(messages[-1], AssistantMessage)
            and messages[-1].stop_reason in FAILURE_STOP_REASONS
        ):
            messages = messages[:-1]
    if not messages and resume is None:
        return Failure(f"run {run_id} has no messages to continue from")
    return Success(Continuation(messages, resume))


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


_STATUS_STYLE = {
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
    "interrupted": "yellow",
    "running": "cyan",
}


def print_runs(console: Console, journal: Journal) -> int:
    """`mule journal list`: one row per run."""
    table = Table(title=f"runs in {journal.path}", title_justify="left")
    for name in ("run id", "status", "segments", "started", "updated"):
        table.add_column(name, no_wrap=True)
    for info in journal.runs():
        table.add_row(
            info.run_id,
            Text(info.status, style=_STATUS_STYLE.get(info.status, "")),
            str(info.segments),
            _when(info.created_ms),
            _when(info.updated_ms),
        )
    console.print(table)
    return 0


def _blocks(message: Message) -> list[Text]:
    out: list[Text] = []
    content = message.content
    if isinstance(content, str):
        return [Text(content)]
    for block in content:
        if isinstance(block, TextContent):
            out.append(Text(block.text))
        elif isinstance(block, ThinkingContent):
            out.append(Text(block.thinking, style="dim italic"))
        elif isinstance(block, ToolCall):
            out.append(Text(f"→ {block.name} {block.arguments}", style="cyan"))
        elif isinstance(block, ImageContent):
            out.append(Text(f"[image {block.mime_type}]", style="dim"))
    return out


def _header(message: Message) -> Text:
    if isinstance(message, UserMessage):
        return Text("user", style="bold")
    if isinstance(message, ToolResultMessage):
        style = "bold red" if message.is_error else "bold green"
        return Text(f"tool result ({message.tool_name})", style=style)
    head = Text(f"assistant ({message.provider}/{message.model}, {message.stop_reason})")
    head.stylize("bold red" if message.stop_reason in FAILURE_STOP_REASONS else "bold blue")
    if message.error_message:
        head.append(f": {message.error_message}", style="red")
    return head


def print_run(console: Console, journal: Journal, run_id: str) -> int:
    """`mule journal show`: the committed transcript and where a resume would pick up."""
    info = next((r for r in journal.runs() if r.run_id == run_id), None)
    if info is None:
        console.print(Text(f"no run {run_id!r} in {journal.path}", style="red"))
        return 2
    console.print(
        Text.assemble(
            (f"run {run_id}", "bold"),
            "  ",
            (info.status, _STATUS_STYLE.get(info.status, "")),
            (f"  {info.segments} segment(s), started {_when(info.created_ms)}", "dim"),
        )
    )
    for message in journal.transcript(run_id):
        console.print(Group(_header(message), *_blocks(message)))
    _messages, resume = journal.recover(run_id)
    if resume is not None and resume.tools and info.status != "completed":
        console.print(Text("open turn (a resume picks up here):", style="bold yellow"))
        for checkpoint in resume.tools:
            call = checkpoint.call
            if isinstance(checkpoint, ToolCompleted):
                state = "completed"
            elif isinstance(checkpoint, ToolStarted):
                state = f"started, {checkpoint.replay} to replay"
            else:
                assert isinstance(checkpoint, ToolPending)
                state = "pending"
            console.print(Text(f"  {call.name} {call.arguments}: {state}"))
    return 0


__all__ = [
    "Continuation",
    "continuation",
    "new_run_id",
    "open_journal",
    "print_run",
    "print_runs",
]
