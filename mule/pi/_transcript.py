"""The transcript context (Pi 1.6.0): the system prompt and the tools live in system messages.

pi-ai's `TranscriptContext` is only `{messages}`: the leading system message holds the base
prompt and the tool declarations, and later system messages add instructions, patch named
sections, and add or remove tools. Replaying them in order gives what the model sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

from attrs import frozen

from mule._fields_repr import fields_repr
from mule.pi._content import TextContent
from mule.pi._context import Context
from mule.pi._json import stringify
from mule.pi._messages import Message, SystemMessage
from mule.pi._tool import Tool, ToolReference


@final
@frozen
class TranscriptContext:
    """What one model call sees (Pi 1.6.0): the transcript, system messages included.

    Attributes:
        messages: The transcript, oldest first; its system messages carry the prompt and tools.

    """

    messages: tuple[Message, ...]

    __repr__ = fields_repr


def create_initial_system_message(
    system_prompt: str | None, tools: Sequence[Tool] | None
) -> SystemMessage | None:
    """Return the leading system message for a prompt and tools (None when both are empty)."""
    has_prompt = bool(system_prompt)
    has_tools = bool(tools)
    if not has_prompt and not has_tools:
        return None
    return SystemMessage(
        content=system_prompt or "",
        timestamp=0,
        tools_added=tuple(tools) if has_tools and tools is not None else None,
    )


def normalize_context(context: Context | TranscriptContext) -> TranscriptContext:
    """Fold a `Context`'s prompt and tools into a leading system message (pi-ai's rule)."""
    if type(context) is TranscriptContext:
        return context
    assert isinstance(context, Context)
    initial = create_initial_system_message(context.system_prompt, context.tools)
    if initial is None:
        return TranscriptContext(context.messages)
    return TranscriptContext((initial, *context.messages))


@final
@frozen
class SystemReplay:
    """What a transcript's system messages declare so far: its tools and its prompt.

    Pi replays the whole transcript for every model call; this replay can be continued, so a
    run that only appends to its transcript reads each message once (`advance`), not once per
    turn.

    Attributes:
        seen: How many messages of the transcript have been replayed.
        tools: The tools declared so far, in declaration order.
        parts: The non-empty texts of the system messages so far, in order.
        sections: The named sections so far (name, text), in order of first patch.

    """

    seen: int = 0
    tools: tuple[Tool, ...] = ()
    parts: tuple[str, ...] = ()
    sections: tuple[tuple[str, str], ...] = ()

    __repr__ = fields_repr

    def extend(self, messages: Sequence[Message]) -> SystemReplay:
        """Return the replay after `messages` too (read as the ones after the `seen` first)."""
        if not messages:
            return self
        tools: dict[str, Tool] | None = None
        parts: list[str] | None = None
        sections: dict[str, str] | None = None
        for m in messages:
            if type(m) is not SystemMessage:
                continue
            if m.tools_removed or m.tools_added:
                if tools is None:
                    tools = {t.name: t for t in self.tools}
                for ref in m.tools_removed or ():
                    tools.pop(ref.name, None)
                for tool in m.tools_added or ():
                    tools[tool.name] = tool  # a redeclaration keeps its place, as a JS Map's
            text = _text(m.content)
            if text:
                if parts is None:
                    parts = list(self.parts)
                parts.append(text)
            if m.sections:
                if sections is None:
                    sections = dict(self.sections)
                for name, value in m.sections.items():
                    if value is None:
                        sections.pop(name, None)
                    else:
                        sections[name] = value
        return SystemReplay(
            self.seen + len(messages),
            self.tools if tools is None else tuple(tools.values()),
            self.parts if parts is None else tuple(parts),
            self.sections if sections is None else tuple(sections.items()),
        )

    def advance(self, transcript: Sequence[Message]) -> SystemReplay:
        """Return the replay of `transcript`, which extends the one replayed so far."""
        if len(transcript) < self.seen:
            raise ValueError("the transcript is shorter than what was replayed")
        return self.extend(transcript[self.seen :])

    @property
    def system_prompt(self) -> str:
        """The prompt text: the parts, then the sections, joined by blank lines."""
        content = "\n\n".join(self.parts)
        return "\n\n".join(p for p in (content, *(v for _, v in self.sections)) if p)


def get_current_tools(messages: Sequence[Message]) -> tuple[Tool, ...]:
    """Return the tools after replaying every system message's removals and additions."""
    return SystemReplay().extend(messages).tools


def _text(content: str | tuple[TextContent, ...]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.text for b in content)


def get_current_system_prompt(messages: Sequence[Message]) -> str:
    """Return the prompt text after replaying every system message ("" when there is none).

    Each message's text is appended to the base prompt, then the named sections (patched by
    name, `null` removing one) follow; non-empty parts are joined by a blank line.
    """
    return SystemReplay().extend(messages).system_prompt


def without_system_messages(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Return the transcript without its system messages (what a collapsing provider sends)."""
    return tuple(m for m in messages if type(m) is not SystemMessage)


def collapse_context(context: Context | TranscriptContext) -> Context:
    """Return a request's context with its system messages replayed into prompt and tools.

    What pi-ai 1.6.0's providers read from a transcript (`getCurrentSystemPrompt`,
    `getCurrentTools`) for APIs that carry the prompt and the tools outside the message list;
    the system messages themselves are left out of the messages.
    """
    if type(context) is Context and not any(type(m) is SystemMessage for m in context.messages):
        return context
    messages = normalize_context(context).messages
    prompt = get_current_system_prompt(messages)
    tools = get_current_tools(messages)
    return Context(without_system_messages(messages), prompt or None, tools or None)


def declarations_equal(left: Tool, right: Tool) -> bool:
    """Whether two tools declare the same interface (their JSON, as pi-ai compares them)."""
    if left is right:  # the common case: the run's own declarations, replayed
        return True
    return (
        left.name == right.name
        and left.description == right.description
        and stringify(left.parameters) == stringify(right.parameters)
    )


def get_tool_state_changes(
    previous: Sequence[Tool], current: Sequence[Tool]
) -> tuple[tuple[Tool, ...], tuple[ToolReference, ...]]:
    """Return `(added, removed)` from one tool set to another; a changed one is both."""
    before = {t.name: t for t in previous}
    after = {t.name: t for t in current}
    added = tuple(
        t for t in current if (p := before.get(t.name)) is None or not declarations_equal(p, t)
    )
    removed = tuple(
        ToolReference(t.name)
        for t in previous
        if (c := after.get(t.name)) is None or not declarations_equal(t, c)
    )
    return added, removed


__all__ = [
    "SystemReplay",
    "TranscriptContext",
    "collapse_context",
    "create_initial_system_message",
    "declarations_equal",
    "get_current_system_prompt",
    "get_current_tools",
    "get_tool_state_changes",
    "normalize_context",
    "without_system_messages",
]
