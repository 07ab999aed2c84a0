"""The transcript context (Pi 1.6.0): mule.pi's replay of system messages against pi-ai's own.

A generated transcript goes through pi-ai 1.6.0's `getCurrentSystemPrompt`, `getCurrentTools`,
`createInitialSystemMessage`, `normalizeContext` and `getToolStateChanges` under Node, and
through mule.pi's; the answers must be equal.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mule.pi import (
    Context,
    SystemMessage,
    Tool,
    ToolReference,
    TranscriptContext,
    UserMessage,
    collapse_context,
    create_initial_system_message,
    get_current_system_prompt,
    get_current_tools,
    get_tool_state_changes,
    normalize_context,
    to_wire,
    without_system_messages,
)
from mule.testing import strategies as ms

PI_AI = (
    Path(__file__).resolve().parents[2]
    / "node"
    / "node_modules"
    / "@earendil-works"
    / "pi-ai"
    / "dist"
    / "index.js"
)

SCRIPT = """
import { createInterface } from "node:readline";
const ai = await import(process.argv[1]);
for await (const line of createInterface({ input: process.stdin })) {
  const { messages, prompt, tools, previous } = JSON.parse(line);
  const initial = ai.createInitialSystemMessage(prompt, tools);
  const changes = ai.getToolStateChanges(previous, tools);
  process.stdout.write(JSON.stringify({
    prompt: ai.getCurrentSystemPrompt(messages),
    tools: ai.getCurrentTools(messages),
    initial: initial ?? null,
    normalized: ai.normalizeContext({ systemPrompt: prompt, messages, tools }).messages.length,
    added: changes.toolsAdded.map((t) => t.name),
    removed: changes.toolsRemoved.map((t) => t.name),
  }) + "\\n");
}
"""

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not PI_AI.exists(), reason="needs node and pi-ai 1.6.0"
)


@pytest.fixture(scope="module")
def pi_ai() -> Iterator[subprocess.Popen[str]]:
    """One Node process answering a JSON line per transcript."""
    node = shutil.which("node")
    assert node is not None
    proc = subprocess.Popen(
        [node, "--input-type=module", "-e", SCRIPT, str(PI_AI)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=10)
    assert proc.stdout is not None
    proc.stdout.close()


def ask(proc: subprocess.Popen[str], query: dict[str, Any]) -> dict[str, Any]:
    """Send one query line; return pi-ai's answer."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(json.dumps(query) + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    assert line, "the Node helper exited"
    answer: dict[str, Any] = json.loads(line)
    return answer


# Few names, so that additions, removals and redeclarations of one name meet.
_tools = st.builds(
    Tool,
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["d", "e"]),
    st.sampled_from([{"type": "object"}, {"type": "object", "properties": {"x": {}}}]),
)
_system = st.builds(
    SystemMessage,
    content=st.sampled_from(["", "Base.", "More."]) | st.just(()),
    timestamp=st.just(1),
    sections=st.none()
    | st.dictionaries(st.sampled_from(["s", "t"]), st.none() | st.sampled_from(["S", "T"])),
    tools_added=st.none() | st.lists(_tools, min_size=1, max_size=3).map(tuple),
    tools_removed=st.none()
    | st.lists(st.builds(ToolReference, st.sampled_from(["a", "b", "c"])), max_size=2).map(tuple),
)
_transcripts = st.lists(_system | st.just(UserMessage("u", 1)), max_size=5).map(tuple)


@settings(max_examples=300, deadline=None)
@given(
    _transcripts,
    st.sampled_from(["", "You are a test."]),
    st.lists(_tools, max_size=3, unique_by=lambda t: t.name).map(tuple),
    st.lists(_tools, max_size=3, unique_by=lambda t: t.name).map(tuple),
)
def test_replay_matches_pi_ai(
    pi_ai: subprocess.Popen[str],
    messages: tuple[Any, ...],
    prompt: str,
    tools: tuple[Tool, ...],
    previous: tuple[Tool, ...],
) -> None:
    """The prompt, the tools, the initial message and tool changes are pi-ai 1.6.0's."""
    answer = ask(
        pi_ai,
        {
            "messages": [to_wire(m) for m in messages],
            "prompt": prompt,
            "tools": [to_wire(t) for t in tools],
            "previous": [to_wire(t) for t in previous],
        },
    )
    assert get_current_system_prompt(messages) == answer["prompt"]
    assert [to_wire(t) for t in get_current_tools(messages)] == answer["tools"]
    initial = create_initial_system_message(prompt, tools)
    assert (to_wire(initial) if initial else None) == answer["initial"]
    normalized = normalize_context(Context(messages, prompt, tools))
    assert len(normalized.messages) == answer["normalized"]
    added, removed = get_tool_state_changes(previous, tools)
    assert [t.name for t in added] == answer["added"]
    assert [r.name for r in removed] == answer["removed"]


@given(ms.transcript_contexts())
def test_collapse_replays_the_system_messages(context: TranscriptContext) -> None:
    """A collapsed context carries the replayed prompt and tools, and no system message."""
    collapsed = collapse_context(context)
    assert collapsed.messages == without_system_messages(context.messages)
    assert (collapsed.system_prompt or "") == get_current_system_prompt(context.messages)
    assert (collapsed.tools or ()) == get_current_tools(context.messages)


def test_a_context_without_system_messages_is_sent_as_it_is() -> None:
    """The shorthand `Context` of a request without system messages is not rebuilt."""
    context = Context((UserMessage("hi", 1),), "sys", None)
    assert collapse_context(context) is context
