"""`--journal/--resume` and `mule journal list|show`: the CLI over `mule.journal.Journal`."""

from __future__ import annotations

import datetime
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path

from attrs import frozen
from returns.result import Failure, Result, Success
from rich.console import Console, Group
from rich.text import Text

from mule.cli._columns import columns
from mule.cli._settings import MODEL_KEY, SETTINGS_KEY
from mule.effects import MuleResume, ToolCompleted, ToolPending, ToolStarted
from mule.journal import Journal, JournalError
from mule.pi import (
    FAILURE_STOP_REASONS,
    AssistantMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


@frozen
class Continuation:
    """What a resumed run starts from (`run_id` in full, when a prefix named it)."""

    messages: tuple[Message, ...]
    resume: MuleResume | None
    run_id: str | None = None


JOURNAL_ENV = "MULE_JOURNAL"
"""The journal `mule journal list|show` read when no `--journal` is given."""


def journal_path(given: str | None, environ: Mapping[str, str] | None = None) -> Result[Path, str]:
    """Return the journal `mule journal` reads: `--journal`, else `$MULE_JOURNAL`.

    Without either, or when the file does not exist, the message says how to name one.
    """
    env = os.environ if environ is None else environ
    named = given or env.get(JOURNAL_ENV)
    if not named:
        return Failure(
            "no journal given: pass --journal PATH (the file a `mule run --journal PATH` wrote)"
            f" or set {JOURNAL_ENV}=PATH"
        )
    path = Path(named)
    if not path.exists():
        where = "--journal" if given else f"${JOURNAL_ENV}"
        return Failure(f"no journal at {path} (from {where})")
    return Success(path)


def new_run_id() -> str:
    """Return a fresh, short run id."""
    return uuid.uuid4().hex[:12]


def open_journal(path: Path) -> Result[Journal, str]:
    """Open (or create) a journal file."""
    try:
        return Success(Journal(path))
    except JournalError as exc:  # it names the file and the fault
        return Failure(str(exc))
    except Exception as exc:  # an argument the journal refuses (ValueError), ...
        return Failure(f"cannot open journal {path}: {exc}")


def continuation(journal: Journal, run_id: str) -> Result[Continuation, str]:
    """Return the input that continues `run_id`, or why it cannot be resumed.

    A completed run has nothing left to do; a run whose writer is alive is not ours to take. A
    run that failed on the model keeps its failed message in the journal; it is left out here
    (as Pi's providers drop it anyway), so resuming asks the model again.
    """
    try:
        return _continuation(journal, run_id)
    except JournalError as exc:  # a damaged journal: its message, not a traceback
        return Failure(str(exc))


def _continuation(journal: Journal, run_id: str) -> Result[Continuation, str]:
    found = find_run(journal, run_id)
    if isinstance(found, Failure):
        return Failure(found.failure())
    run_id = found.unwrap()
    info = next(r for r in journal.runs() if r.run_id == run_id)
    if info.status == "completed":
        return Failure(f"run {run_id} already completed; there is nothing to resume")
    if info.status == "running":
        return Failure(f"run {run_id} is still running (pid {info.pid})")
    messages, resume = journal.recover(run_id)
    if resume is None:
        while (
            messages
            and isinstance(messages[-1], AssistantMessage)
            and messages[-1].stop_reason in FAILURE_STOP_REASONS
        ):
            messages = messages[:-1]
    if not messages and resume is None:
        return Failure(f"run {run_id} has no messages to continue from")
    return Success(Continuation(messages, resume, run_id))


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")


_STATUS_STYLE = {
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
    "interrupted": "yellow",
    "running": "cyan",
}


def find_run(journal: Journal, given: str) -> Result[str, str]:
    """Return the run id that `given` names: the whole id, or a prefix only one run id has."""
    ids = [r.run_id for r in journal.runs()]
    if given in ids:
        return Success(given)
    matches = [i for i in ids if given and i.startswith(given)]
    if len(matches) == 1:
        return Success(matches[0])
    if matches:
        shown = ", ".join(matches[:5])
        return Failure(f"run id prefix {given!r} is ambiguous in {journal.path}: {shown}")
    return Failure(f"no run {given!r} in {journal.path}")


def _failed(exc: JournalError) -> int:
    Console(stderr=True).print(Text(str(exc), style="red"))
    return 2


def print_runs(console: Console, journal: Journal) -> int:
    """`mule journal list`: one row per run, ids whole (they are what `--resume` takes)."""
    try:
        return _print_runs(console, journal)
    except JournalError as exc:  # a damaged journal: its message, not a traceback
        return _failed(exc)


def _print_runs(console: Console, journal: Journal) -> int:
    rows = [
        [
            info.run_id,
            info.status,
            str(info.segments),
            _when(info.created_ms),
            _when(info.updated_ms),
            journal.meta(info.run_id).get(MODEL_KEY, ""),
        ]
        for info in journal.runs()
    ]
    out = console.file
    out.write(f"runs in {journal.path}\n")
    if not rows:
        out.write("(none yet)\n")
    else:
        header = ["run id", "status", "segments", "started", "updated", "model"]
        width = console.width if console.is_terminal else None
        right = [False, False, True, False, False, False]
        out.write("\n".join(columns(header, rows, width=width, right=right)) + "\n")
    out.flush()
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
    if isinstance(message, SystemMessage):
        return Text("system", style="bold")
    head = Text(f"assistant ({message.provider}/{message.model}, {message.stop_reason})")
    head.stylize("bold red" if message.stop_reason in FAILURE_STOP_REASONS else "bold blue")
    if message.error_message:
        head.append(f": {message.error_message}", style="red")
    return head


def _settings_line(raw: str | None) -> str:
    """Return the run's stored settings in a line: what `--resume` will use."""
    try:
        settings = json.loads(raw) if raw else {}
    except ValueError:
        return "settings: (damaged; give the options when resuming)"
    if not isinstance(settings, dict) or not settings.get("model"):
        return ""
    shown = [f"--model {settings['model']}"]
    for key, flag in (("base_url", "--base-url"), ("api", "--api"), ("cwd", "--cwd")):
        if settings.get(key):
            shown.append(f"{flag} {settings[key]}")
    tools = settings.get("tools")
    if isinstance(tools, list):
        shown.append(f"--tools {','.join(map(str, tools)) or repr('')}")
    return "settings: " + " ".join(shown)


def print_run(console: Console, journal: Journal, run_id: str) -> int:
    """`mule journal show`: the committed transcript and where a resume would pick up."""
    try:
        return _print_run(console, journal, run_id)
    except JournalError as exc:
        return _failed(exc)


def _print_run(console: Console, journal: Journal, run_id: str) -> int:
    found = find_run(journal, run_id)
    if isinstance(found, Failure):
        console.print(Text(found.failure(), style="red"))
        return 2
    run_id = found.unwrap()
    info = next(r for r in journal.runs() if r.run_id == run_id)
    console.print(
        Text.assemble(
            (f"run {run_id}", "bold"),
            "  ",
            (info.status, _STATUS_STYLE.get(info.status, "")),
            (f"  {info.segments} segment(s), started {_when(info.created_ms)}", "dim"),
        )
    )
    settings = _settings_line(journal.meta(run_id).get(SETTINGS_KEY))
    if settings:
        console.print(Text(settings, style="dim"), soft_wrap=True)
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
    "find_run",
    "new_run_id",
    "open_journal",
    "print_run",
    "print_runs",
]
