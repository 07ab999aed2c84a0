"""Showing a run: a rich live view of thinking, text, tools and retries; or one JSON event a line.

The live view listens to mule events. While a model attempt streams, a transient `rich.live.Live`
shows its tail (thinking dimmed) and the tools in flight; each finished message and tool result
is then printed for good. On a non-terminal console nothing transient is drawn.

When stdout is not a terminal the view is given it as `text_out`: the model's text is written
there as each delta arrives, exactly as sent (no wrapping, no padding, no markup), and everything
else (thinking, tools, retries, the summary) goes to the console, which is then stderr.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from typing import IO, final

import anyio
import anyio.to_thread
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.panel import Panel
from rich.spinner import Spinner
from rich.text import Text

from mule.effects import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ModelPrompt,
    MuleEvent,
    MuleToolResult,
    RunEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnStart,
    to_json,
)
from mule.pi import (
    AbortSignal,
    AssistantMessage,
    RetryPolicy,
    TextContent,
    TextDeltaEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallStartEvent,
    is_retryable_assistant_error,
    retry_delay_ms,
)

RetryAfter = Callable[[AssistantMessage], float | None]


def planned_retry_ms(
    message: AssistantMessage,
    attempt: int,
    policy: RetryPolicy | None,
    retry_after: RetryAfter | None = None,
) -> float | None:
    """Return the wait before the loop retries this failed attempt, or None if it will not.

    The same decision the core makes (Pi's `retryAssistantCall`): a retryable error with budget
    left waits the exponential backoff, or longer when the server asked for longer.
    """
    if message.stop_reason != "error" or policy is None or not policy.enabled:
        return None
    if attempt - 1 >= policy.max_retries or not is_retryable_assistant_error(message, policy):
        return None
    delay = retry_delay_ms(policy, attempt)
    asked = retry_after(message) if retry_after is not None else None
    if asked is not None and math.isfinite(asked) and asked >= 0:
        delay = max(delay, asked)
    return delay


def _seconds(ms: float) -> str:
    if ms < 1000:
        return f"{ms:.0f} ms"
    s = ms / 1000
    return f"{s:.0f} s" if s >= 10 or s == int(s) else f"{s:.1f} s"


def call_summary(call: ToolCall, width: int = 100) -> str:
    """Return a one-line description of a tool call (the built-ins get their key argument)."""
    args = call.arguments
    path = args.get("path")
    match call.name:
        case "bash":
            text = str(args.get("command", ""))
        case "read":
            text = str(path)
            offset, limit = args.get("offset"), args.get("limit")
            if offset is not None or limit is not None:
                text += f" (lines {offset or 1}+{'' if limit is None else limit})"
        case "ls":
            text = str(path or ".")
        case "grep":
            text = f"{args.get('pattern')!r} in {path or '.'}"
            if args.get("glob"):
                text += f" ({args['glob']})"
        case _:
            text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _result_text(result: MuleToolResult) -> str:
    parts = [
        b.text if isinstance(b, TextContent) else f"[image {b.mime_type}]" for b in result.content
    ]
    return "\n".join(parts)


def _preview(text: str, lines: int) -> tuple[list[str], int]:
    rows = text.splitlines()
    return rows[:lines], max(0, len(rows) - lines)


@final
class _Block:
    """One content block of the attempt being streamed."""

    __slots__ = ("kind", "name", "parts")

    def __init__(self, kind: str, name: str = "") -> None:
        self.kind = kind
        self.name = name
        self.parts: list[str] = []

    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""


def _tail(text: str, lines: int) -> str:
    rows = text.splitlines()
    if len(rows) <= lines:
        return text
    return "…\n" + "\n".join(rows[-lines:])


@final
class LiveView:
    """A listener that renders a run on a rich console, live on a terminal."""

    def __init__(
        self,
        console: Console,
        *,
        retry: RetryPolicy | None = None,
        retry_after: RetryAfter | None = None,
        show_thinking: bool = True,
        stdin: IO[str] | None = None,
        text_out: IO[str] | None = None,
    ) -> None:
        self.console = console
        self.text_out = text_out
        self._text_open = False  # text_out's last write did not end a line
        self._streamed = False  # this attempt wrote text to text_out
        self.retry = retry
        self.retry_after = retry_after
        self.show_thinking = show_thinking
        self._stdin = stdin
        self._live: Live | None = None
        self._blocks: dict[int, _Block] = {}
        self._streaming = False
        self._attempt = 1
        # Tools in flight: the call, when it started (moved on by approval waits), its spinner.
        # Spinners live as long as what they show: a new one each frame would stay on frame 0.
        self._tools: dict[str, tuple[ToolCall, float, Spinner]] = {}
        self._waiting = Spinner("dots", Text("waiting for the model", style="dim"))
        self._turns = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        self._ask_lock = anyio.Lock()

    # -- the transient part ----------------------------------------------------------------

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        room = max(3, (options.max_height or console.height) - 2 - len(self._tools))
        for block in self._blocks.values():
            if block.kind == "thinking" and self.show_thinking:
                yield Text(_tail(block.text(), room), style="dim italic")
            elif block.kind == "text" and self.text_out is None:
                yield Text(_tail(block.text(), room))
            elif block.kind == "toolCall":
                yield Text(f"… preparing {block.name}", style="cyan dim")
        if self._streaming and not self._blocks:
            yield self._waiting
        for _call, _started, spinner in self._tools.values():
            yield spinner

    def _start_live(self) -> None:
        if self._live is None and self.console.is_terminal:
            self._live = Live(
                self,
                console=self.console,
                transient=True,
                refresh_per_second=10,
                vertical_overflow="crop",
            )
            self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def close(self) -> None:
        """Stop any live display (idempotent)."""
        self._stop_live()

    # -- events ------------------------------------------------------------------------------

    async def __call__(self, event: MuleEvent, _signal: AbortSignal) -> None:
        """Render one event."""
        self.handle(event)

    def handle(self, event: MuleEvent) -> None:
        """Render one event (synchronously)."""
        if type(event) is MessageUpdate:
            self._update(event)
            return
        match event:
            case TurnStart():
                self._turns += 1
            case ModelPrompt(attempt=attempt):
                self._attempt = attempt
                self._streamed = False
                self._blocks = {}
                self._streaming = True
                self._start_live()
            case MessageStart(value=AssistantMessage()):
                self._blocks = {}
            case MessageEnd(value=AssistantMessage() as message):
                self._streaming = False
                self._blocks = {}
                self._stop_live()
                self._print_message(message)
                if self._tools:
                    self._start_live()
            case ToolExecutionStart(tool_call=ident, call=call):
                self._stop_live()
                self.console.print(
                    Text.assemble(("→ ", "cyan"), (call.name, "bold cyan"), " ", call_summary(call))
                )
                label = Text(f"{call.name} {call_summary(call)}", style="cyan")
                self._tools[ident.value] = (call, time.monotonic(), Spinner("dots", label))
                self._start_live()
            case ToolExecutionEnd(tool_call=ident, call=call, result=result):
                started = self._tools.pop(ident.value, None)
                took = time.monotonic() - started[1] if started is not None else 0.0
                self._stop_live()
                self._print_result(call, result, took)
                if self._tools:
                    self._start_live()
            case RunEnd():
                self._end_text_line()
                self._stop_live()
                self._tools.clear()
            case _:
                pass

    def _update(self, event: MessageUpdate) -> None:
        ev = event.event
        kind = type(ev)
        if kind is TextDeltaEvent and self.text_out is not None:
            delta: str = ev.delta  # type: ignore[union-attr]
            if delta:
                self.text_out.write(delta)
                self.text_out.flush()
                self._text_open = not delta.endswith("\n")
                self._streamed = True
        elif kind is TextDeltaEvent or kind is ThinkingDeltaEvent or kind is ToolCallDeltaEvent:
            block = self._blocks.get(ev.content_index)  # type: ignore[union-attr]
            if block is not None:
                block.parts.append(ev.delta)  # type: ignore[union-attr]
        elif kind is TextStartEvent:
            self._end_text_line()  # a second text block starts on its own line
            self._blocks[ev.content_index] = _Block("text")  # type: ignore[union-attr]
        elif kind is ThinkingStartEvent:
            self._blocks[ev.content_index] = _Block("thinking")  # type: ignore[union-attr]
        elif isinstance(ev, ToolCallStartEvent):
            opened = ev.partial.content[ev.content_index]
            name = opened.name if isinstance(opened, ToolCall) else "tool"
            self._blocks[ev.content_index] = _Block("toolCall", name)

    def _end_text_line(self) -> None:
        if self._text_open and self.text_out is not None:
            self.text_out.write("\n")
            self.text_out.flush()
            self._text_open = False

    def _print_message(self, message: AssistantMessage) -> None:
        self._end_text_line()
        usage = message.usage
        self.input_tokens += usage.input + usage.cache_read + usage.cache_write
        self.output_tokens += usage.output
        self.cost += usage.cost.total
        for block in message.content:
            if isinstance(block, ThinkingContent) and self.show_thinking and block.thinking:
                self.console.print(Text(block.thinking, style="dim italic"))
            elif isinstance(block, TextContent) and block.text.strip() and self.text_out is None:
                self.console.print(Markdown(block.text))
        if message.stop_reason == "length":
            self.console.print(Text("(the model hit its output token limit)", style="yellow"))
        if message.stop_reason == "error":
            why = message.error_message or "unknown error"
            self.console.print(Text(f"✗ model error (attempt {self._attempt}): {why}", style="red"))
            if self._streamed:  # written already: a pipe cannot take it back
                self.console.print(
                    Text("  (the failed attempt's text stays on stdout)", style="dim")
                )
            wait = planned_retry_ms(message, self._attempt, self.retry, self.retry_after)
            if wait is not None and self.retry is not None:
                self.console.print(
                    Text(
                        f"↻ retrying in {_seconds(wait)} "
                        f"(retry {self._attempt} of {self.retry.max_retries})",
                        style="yellow",
                    )
                )

    def _print_result(self, call: ToolCall, result: MuleToolResult, took: float) -> None:
        text = _result_text(result)
        rows, more = _preview(text, 6 if result.is_error else 4)
        mark, style = ("✗", "red") if result.is_error else ("✓", "green")
        head = Text.assemble(
            (f"{mark} ", style), (call.name, f"bold {style}"), (f"  {took:.1f} s", "dim")
        )
        body = Text(
            "\n".join("  " + r[:200] for r in rows), style="red" if result.is_error else "dim"
        )
        if more:
            body.append(f"\n  … {more} more lines", style="dim")
        self.console.print(Group(head, body) if rows else head)

    def summary(self) -> Text:
        """Return a one-line account of turns, tokens and cost."""
        cost = f", ${self.cost:.4f}" if self.cost else ""
        return Text(
            f"{self._turns} turn{'s' if self._turns != 1 else ''}, "
            f"{self.input_tokens} tokens in, {self.output_tokens} out{cost}",
            style="dim",
        )

    # -- confirmation ----------------------------------------------------------------------

    async def confirm(self, command: str) -> bool:
        """Ask on the terminal whether `command` may run; no answer (EOF) means no."""
        async with self._ask_lock:
            self._stop_live()
            self.console.print(
                Panel(Text(command), title="bash wants to run", border_style="yellow", expand=False)
            )
            self.console.print(Text("Run it? [y/N] ", style="bold yellow"), end="")
            self.console.file.flush()
            stdin = self._stdin if self._stdin is not None else sys.stdin
            asked = time.monotonic()
            answer = await anyio.to_thread.run_sync(_readline, stdin, abandon_on_cancel=True)
            self._not_tool_time(command, time.monotonic() - asked)
            if answer is None:
                self.console.print("(no answer: not run)")
            approved = answer is not None and answer.strip().lower() in ("y", "yes")
            if self._tools or self._streaming:
                self._start_live()
            return approved

    def _not_tool_time(self, command: str, waited: float) -> None:
        """Leave the time the user took to answer out of the bash call's duration."""
        for ident, (call, started, spinner) in self._tools.items():
            if call.name == "bash" and call.arguments.get("command") == command:
                self._tools[ident] = (call, started + waited, spinner)


def _readline(stdin: IO[str] | None) -> str | None:
    if stdin is None or stdin.closed:
        return None
    try:
        line = stdin.readline()
    except (OSError, ValueError):
        return None
    return line if line else None


@final
class JsonLines:
    """A listener that writes each event as one JSON line (`mule.effects.to_json`)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    async def __call__(self, event: MuleEvent, _signal: AbortSignal) -> None:
        """Write one event."""
        self.write(event)

    def write(self, event: MuleEvent) -> None:
        """Write one event and flush, so a reader sees it at once."""
        self.out.write(to_json(event) + "\n")
        self.out.flush()


__all__ = ["JsonLines", "LiveView", "call_summary", "planned_retry_ms"]
