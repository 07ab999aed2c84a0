"""`SystemReplay` continued chunk by chunk is the replay of the whole transcript at once.

The reference below is Pi's rule written out plainly (pi-ai 1.6.0's `getCurrentTools` and
`getCurrentSystemPrompt`, which replay every system message in order); `tests/test_transcript.py`
checks the same functions against pi-ai itself under Node.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mule.pi import (
    Message,
    SystemMessage,
    SystemReplay,
    TextContent,
    Tool,
    ToolReference,
    UserMessage,
    get_current_system_prompt,
    get_current_tools,
)

NAMES = ("a", "b", "c")
TOOLS = st.builds(
    Tool,
    st.sampled_from(NAMES),
    st.sampled_from(("d1", "d2")),
    st.just({"type": "object"}),
)
SYSTEM = st.builds(
    SystemMessage,
    content=st.one_of(
        st.sampled_from(("", "base", "more")),
        st.lists(st.sampled_from(("x", "y", "")), max_size=2).map(
            lambda ts: tuple(TextContent(t) for t in ts)
        ),
    ),
    timestamp=st.just(0),
    sections=st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from(("s1", "s2")), st.one_of(st.none(), st.text(max_size=3))),
    ),
    tools_added=st.one_of(st.none(), st.lists(TOOLS, max_size=3).map(tuple)),
    tools_removed=st.one_of(
        st.none(), st.lists(st.sampled_from(NAMES).map(ToolReference), max_size=2).map(tuple)
    ),
)
MESSAGES = st.lists(st.one_of(SYSTEM, st.just(UserMessage("hi", 0))), max_size=12)


def reference(messages: list[Message]) -> tuple[tuple[Tool, ...], str]:
    tools: dict[str, Tool] = {}
    parts: list[str] = []
    sections: dict[str, str] = {}
    for m in messages:
        if not isinstance(m, SystemMessage):
            continue
        for ref in m.tools_removed or ():
            tools.pop(ref.name, None)
        for tool in m.tools_added or ():
            tools[tool.name] = tool
        text = m.content if isinstance(m.content, str) else "\n".join(b.text for b in m.content)
        if text:
            parts.append(text)
        for name, value in (m.sections or {}).items():
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
    prompt = "\n\n".join(p for p in ("\n\n".join(parts), *sections.values()) if p)
    return tuple(tools.values()), prompt


@settings(max_examples=300)
@given(messages=MESSAGES, data=st.data())
def test_continued_replay_is_the_whole_replay(messages: list[Message], data: Any) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(messages)), max_size=4)))
    replay = SystemReplay()
    for end in [*cuts, len(messages)]:
        replay = replay.advance(messages[:end])  # the transcript as it grew
        assert replay.seen == end
        assert (replay.tools, replay.system_prompt) == reference(messages[:end])
    assert (get_current_tools(messages), get_current_system_prompt(messages)) == reference(messages)


@given(messages=MESSAGES, more=MESSAGES)
def test_extend_reads_messages_after_the_seen(messages: list[Message], more: list[Message]) -> None:
    whole = SystemReplay().advance(messages).extend(more)
    assert whole.seen == len(messages) + len(more)
    assert (whole.tools, whole.system_prompt) == reference([*messages, *more])


def test_advance_over_nothing_new_is_the_same_replay() -> None:
    replay = SystemReplay().advance([SystemMessage("base", 0), UserMessage("hi", 0)])
    assert replay.advance([SystemMessage("base", 0), UserMessage("hi", 0)]) is replay


def test_a_shorter_transcript_is_refused() -> None:
    replay = SystemReplay().advance([UserMessage("a", 0), UserMessage("b", 0)])
    with pytest.raises(ValueError, match="shorter"):
        replay.advance([UserMessage("a", 0)])


def test_pairs_of_cuts_cover_every_split() -> None:
    """Every split point of a small transcript gives the whole replay (no hypothesis luck)."""
    messages: list[Message] = [
        SystemMessage("base", 0, tools_added=(Tool("a", "d", {}), Tool("b", "d", {}))),
        UserMessage("hi", 0),
        SystemMessage("", 0, sections={"s": "one"}, tools_removed=(ToolReference("a"),)),
        SystemMessage("more", 0, sections={"t": "two"}, tools_added=(Tool("a", "d2", {}),)),
        SystemMessage("", 0, sections={"s": None, "u": "three"}),
    ]
    for i, j in itertools.combinations(range(len(messages) + 1), 2):
        replay = SystemReplay().advance(messages[:i]).advance(messages[:j])
        assert (replay.tools, replay.system_prompt) == reference(messages[:j])
