"""The CLI's live view and retry forecast, in process, against scripted runs.

Private rules tested here: the CLI's renderers in `mule.cli._render` (`LiveView`, `JsonLines`) and
its retry forecast `mule.cli._render.planned_retry_ms`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import threading
import time
from pathlib import Path

import pytest
from attrs import evolve
from rich.console import Console

from mule.cli._render import JsonLines, LiveView, planned_retry_ms
from mule.effects import ModelPrompt, MuleEvent, event_from_wire
from mule.pi import ZERO_USAGE, AssistantMessage, Model, RetryPolicy, UserMessage
from mule.pi.scripted import Call, ScriptedModel, Text, Thinking, error_reply, reply
from mule.promise import AbortSignal, MuleRunFailed, MuleRunInput, run, tool
from mule.tools import Workspace, coding_tools

MODEL = Model("scripted", "scripted", "scripted", "test", "local:")
POLICY = RetryPolicy(enabled=True, max_retries=1, base_delay_ms=1)


@tool
def shout(word: str) -> str:
    """Return the word in capitals."""
    return word.upper()


def _input(model: ScriptedModel, retry: RetryPolicy | None = None) -> MuleRunInput:
    return MuleRunInput(
        model=MODEL,
        system_prompt="",
        messages=(UserMessage("go", 0),),
        stream=model,
        tools=(shout,),
        retry=retry,
    )


_CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


def screen(raw: str) -> str:
    """Replay what a terminal keeps: handle CR, cursor-up and erase-line; drop other escapes."""
    rows: list[str] = [""]
    y = 0
    pos = 0
    for m in _CSI.finditer(raw + "\x1b[0m"):
        for ch in raw[pos : m.start()]:
            if ch == "\n":
                y += 1
                if y == len(rows):
                    rows.append("")
            elif ch == "\r":
                pass  # the view only writes CR before erasing or at line ends
            else:
                rows[y] += ch
        pos = m.end()
        if m.group(2) == "A":
            y = max(0, y - int(m.group(1) or 1))
        elif m.group(2) == "K":
            rows[y] = ""
    return "\n".join(r.rstrip() for r in rows[: y + 1])


@pytest.mark.anyio
async def test_live_view_on_a_terminal_prints_each_part_once() -> None:
    """On a (forced) terminal the transient view clears; thinking, tools and text stay once."""
    file = io.StringIO()
    console = Console(file=file, force_terminal=True, width=100, color_system=None)
    view = LiveView(console)
    model = ScriptedModel(
        [
            reply(Thinking.of("pondering deeply", 4), Call("c1", "shout", {"word": "hey"})),
            reply(Text.of("The answer is HEY.", 5)),
        ]
    )
    await run(_input(model), view)
    view.close()
    shown = screen(file.getvalue())
    assert "preparing" not in shown
    assert "waiting for the model" not in shown
    assert shown.count("pondering deeply") == 1
    assert shown.count('→ shout {"word":"hey"}') == 1
    assert "HEY" in shown
    assert shown.count("The answer is HEY.") == 1
    assert "2 turns" in view.summary().plain


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error", "retried"),
    [
        ("503 Service Unavailable", True),
        ("insufficient_quota (429)", False),
        ("400 bad request", False),
    ],
)
async def test_retry_forecast_matches_what_the_loop_does(error: str, retried: bool) -> None:
    """The view's "retrying in" forecast agrees with whether the core makes another attempt."""
    model = ScriptedModel([error_reply(error), reply("ok")])
    seen: list[MuleEvent] = []
    failed: list[AssistantMessage] = []

    async def listen(event: MuleEvent, _signal: AbortSignal) -> None:
        seen.append(event)
        value = getattr(event, "value", None)
        if isinstance(value, AssistantMessage) and value.stop_reason == "error":
            failed.append(value)

    with contextlib.suppress(MuleRunFailed):
        await run(_input(model, POLICY), listen)
    attempts = [e.attempt for e in seen if isinstance(e, ModelPrompt)]
    assert attempts == ([1, 2] if retried else [1])
    forecast = planned_retry_ms(failed[0], 1, POLICY)
    assert (forecast is not None) == retried
    if retried:
        assert forecast == 1


def test_retry_forecast_respects_budget_and_server_wait() -> None:
    """No retry past the budget; a longer server-requested wait wins over the backoff."""
    msg = AssistantMessage((), "a", "p", "m", ZERO_USAGE, "error", 0, error_message="429")
    policy = RetryPolicy(enabled=True, max_retries=3, base_delay_ms=2000)
    assert planned_retry_ms(msg, 1, policy) == 2000
    assert planned_retry_ms(msg, 3, policy) == 8000
    assert planned_retry_ms(msg, 4, policy) is None
    assert planned_retry_ms(msg, 1, policy, lambda _m: 5000.0) == 5000
    assert planned_retry_ms(msg, 1, policy, lambda _m: float("nan")) == 2000
    assert planned_retry_ms(msg, 1, None) is None


@pytest.mark.anyio
async def test_json_lines_round_trip_through_the_codec() -> None:
    """Every line JsonLines writes decodes back to an equal mule event."""
    out = io.StringIO()
    lines = JsonLines(out)
    seen: list[MuleEvent] = []

    async def listen(event: MuleEvent, signal: AbortSignal) -> None:
        seen.append(event)
        await lines(event, signal)

    model = ScriptedModel([reply(Call("c1", "shout", {"word": "a"})), reply(Text.of("done", 2))])
    await run(_input(model), listen)
    decoded = [event_from_wire(json.loads(line)) for line in out.getvalue().splitlines()]
    assert decoded == seen


@pytest.mark.anyio
async def test_the_waiting_spinner_animates() -> None:
    """Frames 0.2 s apart differ: the spinner is one object, not a new one per frame."""
    prompts: list[ModelPrompt] = []

    async def listen(event: MuleEvent, _signal: AbortSignal) -> None:
        if isinstance(event, ModelPrompt):
            prompts.append(event)

    await run(_input(ScriptedModel([reply("ok")])), listen)
    clock = [0.0]
    file = io.StringIO()
    console = Console(
        file=file, force_terminal=True, width=60, color_system=None, get_time=lambda: clock[0]
    )
    view = LiveView(console)
    view.handle(prompts[0])
    view.close()  # no live refresh thread: the test draws the frames
    frames = []
    for _ in range(3):
        with console.capture() as captured:
            console.print(view)
        frames.append(captured.get())
        clock[0] += 0.2
    assert all("waiting for the model" in f for f in frames)
    assert len(set(frames)) == 3


@pytest.mark.anyio
async def test_approval_time_is_not_tool_time(tmp_path: Path) -> None:
    """The user takes 1.5 s to answer; the bash call is shown taking well under that."""
    read_end, write_end = os.pipe()
    stdin = os.fdopen(read_end, "r")
    file = io.StringIO()
    view = LiveView(Console(file=file, width=100, color_system=None), stdin=stdin)

    def answer_later() -> None:
        time.sleep(1.5)
        os.write(write_end, b"y\n")

    model = ScriptedModel(
        [reply(Call("c1", "bash", {"command": "echo hi"})), reply(Text.of("done", 1))]
    )
    inp = evolve(
        _input(model),
        tools=coding_tools(Workspace.at(tmp_path), ("bash",), confirm=view.confirm),
    )
    helper = threading.Thread(target=answer_later)
    helper.start()
    try:
        await run(inp, view)
    finally:
        helper.join()
        stdin.close()
        os.close(write_end)
    shown = file.getvalue()
    took = re.search(r"✓ bash  ([0-9.]+) s", shown)
    assert took is not None, shown
    assert float(took.group(1)) < 1.0
