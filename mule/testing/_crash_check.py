"""The durability contract a finished crash case must meet, and Pi's transcript shape."""

from __future__ import annotations

from collections.abc import Sequence

from mule.effects import INTERRUPTED_UNSAFE
from mule.pi import (
    SUCCESS_STOP_REASONS,
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mule.testing._crash_lab import CrashCase
from mule.testing._crash_scenario import FINAL_TEXT, UNSAFE, text_of_result


def transcript_problems(messages: Sequence[Message]) -> list[str]:
    """Return why Pi would not accept `messages` as a transcript (empty when it would).

    The shape: user first; every assistant message succeeded; each assistant's tool calls are
    answered right after it, one result per call, and results appear nowhere else.
    """
    problems: list[str] = []
    if not messages or type(messages[0]) is not UserMessage:
        problems.append("the transcript does not start with a user message")
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        if type(m) is ToolResultMessage:
            problems.append(f"result for {m.tool_call_id} does not follow its assistant message")
        elif type(m) is AssistantMessage:
            if m.stop_reason not in SUCCESS_STOP_REASONS:
                problems.append(f"assistant message {i - 1} has stopReason {m.stop_reason}")
            want = [b.id for b in m.content if type(b) is ToolCall]
            got: list[str] = []
            while i < len(messages) and type(messages[i]) is ToolResultMessage:
                got.append(messages[i].tool_call_id)  # type: ignore[union-attr]
                i += 1
            if sorted(got) != sorted(want):
                problems.append(f"assistant message calls {want} answered by {got}")
            if not got and i < len(messages) and type(messages[i]) is AssistantMessage:
                problems.append(f"two assistant messages in a row at {i}")
    return problems


def check_case(case: CrashCase) -> None:
    """Assert the durability contract on a finished case; raise AssertionError with the reasons.

    No unsafe side effect happened twice; every tool call has exactly one result; nothing
    committed before a kill is lost (messages, and tool results whose end was committed); the
    final transcript is one Pi accepts and the run reached its final answer.
    """
    problems = list(transcript_problems(case.transcript))
    t = case.transcript
    effects = case.effect_counts()
    by_call = {m.tool_call_id: m for m in t if type(m) is ToolResultMessage}
    calls = {
        b.id: b.name
        for m in t
        if type(m) is AssistantMessage
        for b in m.content
        if type(b) is ToolCall
    }
    for cid, name in calls.items():
        if name in UNSAFE and effects[cid] > 1:
            problems.append(f"unsafe call {cid} ran {effects[cid]} times")
        result = by_call.get(cid)
        if result is None:
            continue
        text = text_of_result(result)
        if name in UNSAFE and text != INTERRUPTED_UNSAFE and effects[cid] != 1:
            problems.append(f"unsafe call {cid} answered {text!r} but ran {effects[cid]} times")
        if text != INTERRUPTED_UNSAFE and not result.is_error:
            pid = text.rsplit(":", 1)[-1]
            if name in UNSAFE and f"{cid} {pid}" not in case.effects.read_text():
                problems.append(f"result of {cid} names pid {pid}, which never ran it")
        committed = case.results.get(cid)
        if committed is not None and text != committed:
            problems.append(f"committed result of {cid} ({committed!r}) became {text!r}")
    results = [m.tool_call_id for m in t if type(m) is ToolResultMessage]
    if len(results) != len(set(results)):
        problems.append(f"duplicate results: {results}")
    for m in case.committed:
        if m not in t:
            problems.append(f"committed message lost: {_describe(m)}")
    if not t or type(t[-1]) is not AssistantMessage or text_of_result(t[-1]) != FINAL_TEXT:
        problems.append("the run did not reach its final answer")
    if problems:
        kills = [s.points[-1] for s in case.segments if s.killed]
        raise AssertionError(
            f"crash case {case.run_id} (kills at {kills}):\n  " + "\n  ".join(problems)
        )


def _describe(m: Message) -> str:
    if type(m) is ToolResultMessage:
        return f"toolResult {m.tool_call_id}"
    return f"{m.role} {text_of_result(m)[:40]!r}"


__all__ = ["check_case", "transcript_problems"]
