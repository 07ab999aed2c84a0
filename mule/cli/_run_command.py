"""`mule run` and `mule demo`: build the run input, drive it with Ctrl-C honesty, map exit codes."""

from __future__ import annotations

import json
import re
import shlex
import signal as signals
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any, final

import anyio
from attrs import frozen
from returns.result import Failure, Result, Success
from rich.console import Console
from rich.control import Control
from rich.segment import ControlType
from rich.text import Text

from mule.cli._codes import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_TOOLS,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
)
from mule.cli._demo import DEMO_LABEL, DEMO_MODEL, DEMO_PROMPT, DEMO_TOOLS, DemoModel
from mule.cli._integrations import mcp_tools, otel_tracing
from mule.cli._journal import Continuation, continuation, new_run_id, open_journal
from mule.cli._models import load_registry, missing_key, resolve_model
from mule.cli._render import JsonLines, LiveView
from mule.cli._settings import MODEL_KEY, SETTINGS_KEY
from mule.effects import MuleEvent, RunEnd
from mule.journal import Journal, JournalError
from mule.pi import (
    PI_CODING_AGENT_RETRY_DEFAULTS,
    AbortController,
    AbortError,
    AbortSignal,
    RetryPolicy,
    StreamOptions,
    ThinkingLevel,
    UserMessage,
)
from mule.pi.providers import retry_after_ms
from mule.promise import MulePromiseListener, MuleRunFailed, MuleRunInput, run
from mule.tools import BASH_DEFAULT_TIMEOUT_S, Workspace, coding_tools

IDLE_TIMEOUT_TEXT = "Model stream idle timeout"
"""How the core words a model stream that went silent (its failed message's error text)."""

Record = Callable[[MuleEvent, AbortSignal], Awaitable[None] | None]


@final
@frozen(kw_only=True)
class RunOptions:
    """What `mule run` was asked to do."""

    prompt: str | None
    model: str
    base_url: str | None = None
    api: str | None = None  # the wire API, overriding the model's
    idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S  # None: wait forever
    system: str | None = None
    tools: tuple[str, ...] = DEFAULT_TOOLS
    journal: str | None = None
    resume: str | None = None
    json: bool = False
    yes: bool = False
    thinking: str | None = None
    retry: RetryPolicy = PI_CODING_AGENT_RETRY_DEFAULTS
    provider_retries: int | None = None
    cwd: Path = Path(".")  # absolute: the caller resolves it before the event loop starts
    confined: bool = True
    bash_timeout_s: float = BASH_DEFAULT_TIMEOUT_S
    mcp: tuple[str, ...] = ()  # stdio MCP server commands
    mcp_urls: tuple[str, ...] = ()  # streamable-HTTP MCP server URLs
    otel: bool = False
    settings: Mapping[str, Any] | None = None  # kept in the journal (see mule.cli._settings)


def default_system_prompt(root: Path, tools: Sequence[str]) -> str:
    """Return the system prompt used when `--system` is not given."""
    prompt = "You are a helpful assistant working in a terminal."
    if tools:
        prompt += (
            f" You can use these tools: {', '.join(tools)}. Paths are relative to the working "
            f"directory {root}, and the tools cannot leave it. Use them to look things up "
            "instead of guessing, then answer concisely."
        )
    return prompt


def consoles(json_mode: bool) -> tuple[Console, Console, IO[str] | None]:
    """Return (view, errors, text_out) for where stdout goes.

    On a terminal the live view is stdout. When stdout carries JSON lines the view goes to
    stderr; when it is a pipe or a file, stdout carries only the model's text, as it streams
    (`text_out`), and the view goes to stderr. Off a terminal nothing is wrapped at 80 columns.
    """
    err = Console(stderr=True, highlight=False)
    err.soft_wrap = not err.is_terminal
    if json_mode:
        return err, err, None
    if not sys.stdout.isatty():
        return err, err, sys.stdout
    return Console(highlight=False), err, None


def _user(prompt: str) -> UserMessage:
    return UserMessage(content=prompt, timestamp=int(time.time() * 1000))


async def drive(
    inp: MuleRunInput,
    listener: MulePromiseListener,
    errors: Console,
    view: LiveView | None = None,
    advice: Callable[[str], str | None] | None = None,
) -> int:
    """Run to the end and return the exit code; the first Ctrl-C cancels the run honestly.

    Cancelling aborts the run's signal, so in-flight model and tool work stops and the run ends
    with `run_end(cancelled)`; a second Ctrl-C cancels the task outright. The notice gets a
    line of its own: the live view is cleared first, and so is the terminal's `^C` echo.
    """
    controller = AbortController()
    code = EXIT_CANCELLED  # unless the run returns or raises below (a forced cancel does neither)
    forced = False
    async with anyio.create_task_group() as tg:

        async def on_sigint() -> None:
            nonlocal forced
            with anyio.open_signal_receiver(signals.SIGINT) as received:
                async for _ in received:
                    if controller.signal.aborted:
                        forced = True
                        tg.cancel_scope.cancel()
                        return
                    if view is not None:
                        view.close()
                    if errors.is_terminal:
                        errors.control(
                            Control.move_to_column(0), Control((ControlType.ERASE_IN_LINE, 2))
                        )
                    errors.print(Text("cancelling… (Ctrl-C again to force)", style="yellow"))
                    controller.abort(AbortError("cancelled by Ctrl-C"))

        tg.start_soon(on_sigint)
        try:
            await run(inp, listener, controller.signal)
            code = EXIT_OK
        except MuleRunFailed as exc:
            errors.print(Text(f"run failed ({exc.phase}): {exc.error.message}", style="bold red"))
            said = advice(exc.error.message) if advice is not None else None
            if said is not None:
                errors.print(Text(said, style="dim"))
            code = EXIT_FAILED
        except AbortError:
            errors.print(Text("run cancelled", style="yellow"))
            code = EXIT_CANCELLED
        tg.cancel_scope.cancel()
    if forced:
        errors.print(Text("run cancelled (forced)", style="yellow"))
    return code


def _listener(
    view: LiveView, json_out: JsonLines | None, record: Record | None = None
) -> MulePromiseListener:
    """Compose the listeners: the journal first (durable before anything acts), then output."""

    async def listen(event: MuleEvent, signal: AbortSignal) -> None:
        if record is not None:
            pending = record(event, signal)  # a checkpoint: durable once awaited
            if pending is not None:
                await pending
        if json_out is None:
            view.handle(event)
            return
        json_out.write(event)
        if type(event) is RunEnd:
            view.handle(event)

    return listen


def _plan(
    opts: RunOptions, journal: Journal | None
) -> Result[tuple[str | None, Continuation], str]:
    """Return the run id and what the run starts from: a fresh prompt, or a journal's run."""
    if opts.resume is None:
        if not opts.prompt:
            return Failure("a prompt is required (unless you --resume a run)")
        run_id = new_run_id() if journal is not None else None
        return Success((run_id, Continuation((_user(opts.prompt),), None)))
    if journal is None:
        return Failure("--resume needs --journal PATH")
    if opts.prompt:
        return Failure("--resume continues a run as it was; leave out the prompt")
    return continuation(journal, opts.resume).map(lambda c: (c.run_id or opts.resume, c))


def failure_advice(message: str, *, api: str, custom_url: bool) -> str | None:
    """Return what to change after a run failed with `message`, when the CLI can tell."""
    if IDLE_TIMEOUT_TEXT in message:
        return (
            "the model sent nothing for that long: wait longer with --idle-timeout SECONDS "
            "(0 waits forever)"
        )
    if custom_url and re.search(r"\b404\b", message):
        other = "openai-responses" if api == "openai-completions" else "openai-completions"
        return (
            f"the server at --base-url may not speak {api}: choose its wire API with --api, "
            f"e.g. --api {other}"
        )
    return None


def resume_hint(path: Path, run_id: str, yes: bool) -> str:
    """Return the command that resumes `run_id` as it was (the journal keeps its settings)."""
    hint = f"mule run --journal {shlex.quote(str(path))} --resume {run_id}"
    return hint + " --yes" if yes else hint  # approval is not kept: it is asked for again


async def run_command(opts: RunOptions) -> int:
    """`mule run`: resolve the model, build tools and input, run, and return the exit code."""
    out, err, text_out = consoles(opts.json)
    registry = load_registry()
    if isinstance(registry, Failure):
        err.print(Text(registry.failure(), style="red"))
        return EXIT_USAGE
    resolved = resolve_model(registry.unwrap(), opts.model, opts.base_url, api=opts.api)
    if isinstance(resolved, Failure):
        err.print(Text(resolved.failure(), style="red"))
        return EXIT_USAGE
    target = resolved.unwrap()
    no_key = missing_key(target)
    if no_key is not None:
        err.print(Text(no_key, style="red"))
        return EXIT_USAGE
    root = opts.cwd
    ws = Workspace.at(root, confined=opts.confined)
    retry = opts.retry if opts.retry.enabled else None
    view = LiveView(out, retry=retry, retry_after=retry_after_ms, text_out=text_out)
    try:
        tools = coding_tools(
            ws,
            opts.tools,
            confirm=None if opts.yes else view.confirm,
            bash_timeout_s=opts.bash_timeout_s,
        )
    except ValueError as exc:
        err.print(Text(str(exc), style="red"))
        return EXIT_USAGE
    journal: Journal | None = None
    if opts.journal is not None:
        opened = open_journal(Path(opts.journal))
        if isinstance(opened, Failure):
            err.print(Text(opened.failure(), style="red"))
            return EXIT_USAGE
        journal = opened.unwrap()
    try:
        async with AsyncExitStack() as stack:  # MCP sessions, the OTLP flush
            plan = _plan(opts, journal)
            if isinstance(plan, Failure):
                err.print(Text(plan.failure(), style="red"))
                return EXIT_USAGE
            run_id, start = plan.unwrap()
            added = await mcp_tools(stack, opts.mcp, opts.mcp_urls, tools)
            if isinstance(added, Failure):
                err.print(Text(added.failure(), style="red"))
                return EXIT_USAGE
            tools = (*tools, *added.unwrap())
            names = [t.descriptor.name for t in tools]
            tracing = None
            if opts.otel:
                setup = await otel_tracing(
                    stack,
                    journal=journal,
                    run_id=run_id,
                    resuming=opts.resume is not None,
                    messages=start.messages,
                )
                if isinstance(setup, Failure):
                    err.print(Text(setup.failure(), style="red"))
                    return EXIT_USAGE
                tracing = setup.unwrap()
            level: ThinkingLevel | None = None
            if opts.thinking not in (None, "off"):
                level = opts.thinking  # type: ignore[assignment]
            inp = MuleRunInput(
                model=target.model,
                system_prompt=opts.system
                if opts.system is not None
                else default_system_prompt(root, names),
                messages=start.messages,
                resume=start.resume,
                tools=tools,
                stream_options=StreamOptions(
                    api_key=target.api_key,
                    headers=target.headers,
                    reasoning=level,
                    max_retries=opts.provider_retries,
                ),
                model_stream_idle_timeout_ms=None
                if opts.idle_timeout_s is None
                else opts.idle_timeout_s * 1000,
                retry=retry,
                retry_after_ms=retry_after_ms,
            )
            record: Record | None = None
            if journal is not None and run_id is not None:
                if opts.resume is None:
                    journal.begin(run_id, start.messages)
                if opts.settings is not None:  # the latest settings: what a resume will use
                    journal.set_meta(run_id, SETTINGS_KEY, json.dumps(opts.settings))
                    journal.set_meta(run_id, MODEL_KEY, opts.model)
                try:
                    record = journal.listener(run_id)
                except JournalError as exc:  # another writer holds the run
                    err.print(Text(str(exc), style="red"))
                    return EXIT_USAGE
                verb = "resuming" if opts.resume is not None else "recording"
                err.print(Text(f"journal: {verb} run {run_id} in {journal.path}", style="dim"))
            json_out = JsonLines(sys.stdout) if opts.json else None
            if not opts.json:
                out.print(Text(f"{target.model.provider}/{target.model.id}", style="bold"), end="")
                out.print(Text(f"  {target.model.base_url}  cwd {root}", style="dim"))
            listener = _listener(view, json_out, record)
            if tracing is not None:
                listener = tracing(listener)
            try:
                custom_url = opts.base_url is not None and opts.api is None

                def advice(message: str) -> str | None:
                    return failure_advice(message, api=target.model.api, custom_url=custom_url)

                code = await drive(inp, listener, err, view, advice)
            finally:
                view.close()
            if not opts.json:
                out.print(view.summary())
            if journal is not None and run_id is not None and code != EXIT_OK:
                err.print(
                    Text(f"resume with: {resume_hint(journal.path, run_id, opts.yes)}", style="dim")
                )
            return code
    finally:
        if journal is not None:
            journal.close()


def _rule(console: Console, title: Text) -> None:
    if console.is_terminal:
        console.rule(title)
    else:  # a rule is padded to the width: a log gets the title alone
        console.print(Text("── ").append(title).append(" ──"))


async def demo_command(
    cwd: Path, *, json_mode: bool = False, delay_ms: float = 12.0, prompt: str = DEMO_PROMPT
) -> int:
    """`mule demo`: the scripted model with the real read/ls/grep tools on `cwd`."""
    out, err, text_out = consoles(json_mode)
    root = cwd
    ws = Workspace.at(root)
    view = LiveView(out, retry=None, text_out=text_out)
    tools = coding_tools(ws, DEMO_TOOLS)
    inp = MuleRunInput(
        model=DEMO_MODEL,
        system_prompt=default_system_prompt(root, DEMO_TOOLS),
        messages=(_user(prompt),),
        tools=tools,
        stream=DemoModel(delay_ms=delay_ms),
    )
    json_out = JsonLines(sys.stdout) if json_mode else None
    if not json_mode:
        _rule(out, Text(f"{DEMO_LABEL} · real tools on {root}", style="bold magenta"))
        out.print(Text(f"> {prompt}", style="bold"))
    try:
        code = await drive(inp, _listener(view, json_out), err, view)
    finally:
        view.close()
    if not json_mode:
        _rule(out, Text(DEMO_LABEL, style="magenta"))
    return code


__all__ = [
    "RunOptions",
    "default_system_prompt",
    "demo_command",
    "drive",
    "run_command",
]
