"""`mule demo`: a scripted model (no LLM, no network) driving the real tools on a directory.

The script is fixed (list the directory, then read a README or grep for definitions, then
answer), but every argument after the first and the whole final answer are built from the real
tool results, so the demo shows what the loop does with actual data.
"""

from __future__ import annotations

import re
import time
from typing import Final, final

from attrs import define

from mule.pi import (
    AssistantMessageEventStream,
    Model,
    StreamOptions,
    TextContent,
    ToolResultMessage,
    TranscriptContext,
    UserMessage,
)
from mule.pi.scripted import Call, Reply, Text, Thinking, scripted_stream

DEMO_LABEL: Final = "demo: scripted model, no LLM"
DEMO_MODEL: Final = Model(
    id="scripted",
    name=DEMO_LABEL,
    api="mule-demo",
    provider="demo",
    base_url="local:",
)
DEMO_PROMPT: Final = "What is in this directory?"
DEMO_TOOLS: Final = ("ls", "read", "grep")
DEFINITIONS: Final = r"^\s*(def|class|function|fn|func|struct|interface|impl)\s+\w+"
_README = re.compile(r"^readme(\.(md|rst|txt|markdown))?$", re.IGNORECASE)


def _pieces(text: str, size: int = 6) -> int:
    return max(1, len(text) // size)


def _text_of(message: ToolResultMessage) -> str:
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


def _body(text: str) -> str:
    """Strip the tools' trailing `[...]` notes."""
    return re.sub(r"\n\n\[[^\n]*\]\s*$", "", text)


def _entries(ls: ToolResultMessage) -> list[str]:
    if ls.is_error:
        return []
    body = _body(_text_of(ls))
    return [] if body == "(empty directory)" else [e for e in body.splitlines() if e]


def _listing(entries: list[str]) -> str:
    dirs = [e for e in entries if e.endswith("/")]
    files = [e for e in entries if not e.endswith("/")]

    def names(xs: list[str], n: int = 8) -> str:
        shown = ", ".join(f"`{x}`" for x in xs[:n])
        return shown + (f" and {len(xs) - n} more" if len(xs) > n else "")

    parts = []
    if dirs:
        parts.append(f"{len(dirs)} director{'ies' if len(dirs) != 1 else 'y'} ({names(dirs)})")
    if files:
        parts.append(f"{len(files)} file{'s' if len(files) != 1 else ''} ({names(files)})")
    return " and ".join(parts)


def _readme_summary(name: str, result: ToolResultMessage) -> str:
    if result.is_error:
        return f"I tried to read `{name}`, but the tool said: {_text_of(result)}"
    lines = [ln.strip() for ln in _body(_text_of(result)).splitlines()]
    title = next((ln.lstrip("#").strip() for ln in lines if ln.startswith("#")), None)
    prose = next(
        (ln for ln in lines if ln and not ln.startswith(("#", "```", "<", "[", "!", "|", "-"))),
        None,
    )
    out = f"`{name}` is there"
    if title:
        out += f"; its title is **{title}**"
    if prose:
        out += f", and it starts: “{prose[:200]}{'…' if len(prose) > 200 else ''}”"
    return out + "."


def _grep_summary(result: ToolResultMessage) -> str:
    text = _body(_text_of(result))
    if result.is_error:
        return f"My search for definitions failed: {text}"
    if text == "No matches found":
        return "A search for function, class and type definitions found none."
    hits = [ln for ln in text.splitlines() if re.match(r"^[^:\n]+:\d+: ", ln)]
    files = sorted({h.split(":", 1)[0] for h in hits})
    examples = []
    for h in hits[:5]:
        file, _, rest = h.split(":", 2)
        examples.append(f"`{rest.strip()[:60]}` in `{file}`")
    return (
        f"Searching for definitions found {len(hits)} in {len(files)} file"
        f"{'s' if len(files) != 1 else ''}, e.g. " + "; ".join(examples) + "."
    )


@final
@define
class DemoModel:
    """A stream function that plays the demo's next step from the tool results so far."""

    delay_ms: float = 12.0
    calls: int = 0

    def __call__(
        self, model: Model, context: TranscriptContext, options: StreamOptions | None = None
    ) -> AssistantMessageEventStream:
        """Stream the reply for the current step."""
        self.calls += 1
        reply = self.next_reply(context)
        signal = options.signal if options is not None else None
        return scripted_stream(reply, model, signal, int(time.time() * 1000))

    def _reply(self, *blocks: Text | Thinking | Call) -> Reply:
        return Reply(blocks=blocks, delay_ms=self.delay_ms)

    def next_reply(self, context: TranscriptContext) -> Reply:
        """Return the reply for the step the transcript has reached."""
        start = max(
            (i for i, m in enumerate(context.messages) if isinstance(m, UserMessage)), default=0
        )
        results = [m for m in context.messages[start:] if isinstance(m, ToolResultMessage)]
        if not results:
            think = "The user asks what is here. I have real tools; listing the directory first."
            say = "Let me look at the current directory."
            return self._reply(
                Thinking.of(think, _pieces(think)),
                Text.of(say, _pieces(say)),
                Call("demo-ls", "ls", {"path": "."}),
            )
        entries = _entries(results[0])
        if len(results) == 1 and entries:
            readme = next((e for e in entries if _README.match(e)), None)
            if readme is not None:
                think = f"There is a {readme}; reading its start should say what this is."
                return self._reply(
                    Thinking.of(think, _pieces(think)),
                    Call("demo-read", "read", {"path": readme, "limit": 40}),
                )
            think = "No README. Searching for definitions shows what the code is made of."
            return self._reply(
                Thinking.of(think, _pieces(think)),
                Call("demo-grep", "grep", {"pattern": DEFINITIONS, "limit": 20}),
            )
        return self._reply(Text.of(self.answer(results), _pieces(self.answer(results), 10)))

    def answer(self, results: list[ToolResultMessage]) -> str:
        """Return the final answer, built from the real tool results."""
        ls = results[0]
        entries = _entries(ls)
        if ls.is_error:
            found = f"Listing the directory failed: {_text_of(ls)}"
        elif not entries:
            found = "The directory is empty."
        else:
            found = f"This directory holds {_listing(entries)}."
        more = ""
        if len(results) > 1:
            second = results[1]
            if second.tool_name == "read":
                path = second.details.get("path") if isinstance(second.details, dict) else None
                more = " " + _readme_summary(str(path or "the README"), second)
            else:
                more = " " + _grep_summary(second)
        calls = (
            "the tool call and its result were"
            if len(results) == 1
            else f"the {len(results)} tool calls and their results were"
        )
        return (
            f"{found}{more}\n\n"
            f"_({DEMO_LABEL}: the replies were scripted, but {calls} real. "
            'Next: `mule run "your question" --model provider/id`.)_'
        )


__all__ = ["DEFINITIONS", "DEMO_LABEL", "DEMO_MODEL", "DEMO_PROMPT", "DEMO_TOOLS", "DemoModel"]
