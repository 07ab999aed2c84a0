"""Record raw pi RPC stdout for the recorded-sequence tests (run by hand; needs the pi CLI).

`python -m tests.pirc.record` rewrites tests/pirc/recorded/*.jsonl (pi 0.73.1, the old
protocol: cumulative partials) and tests/pirc/recorded/pi-1.6.0/*.jsonl (pi 1.6.0: deltas,
`agent_settled`, dispositions) from live runs against the fake OpenAI server. Some scenarios
react to what pi writes (answer its dialogs, steer or abort mid-stream), as a host would.
`python -m tests.pirc.record legacy` or `current` records one version only; scenario names
after it (`text`, `abort`, ...) record those only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, openai_error, tool_call
from tests.pirc.helpers import HERE, PI_CURRENT, PI_LEGACY, config, make_home

OUT = HERE / "recorded"
OUT_CURRENT = OUT / "pi-1.6.0"
EXT = str(HERE / "ui_ext.ts")

# What to write after a record pi wrote (its JSON), given every record so far.
React = Callable[[dict[str, Any], list[dict[str, Any]]], list[dict[str, Any]]]


def _no_reaction(_rec: dict[str, Any], _seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return []


def record(
    name: str,
    script: list[dict[str, Any]],
    commands: list[dict[str, Any]],
    *,
    executable: str,
    out: Path,
    react: React = _no_reaction,
    done: Callable[[list[dict[str, Any]]], bool] | None = None,
    extensions: tuple[str, ...] = (),
    tools: tuple[str, ...] = ("ls", "read"),
) -> None:
    """Run pi with `script` queued, send `commands`, react, save stdout until `done` (or 4 s)."""
    with FakeOpenAI(script) as fake, tempfile.TemporaryDirectory() as td:
        dirs = make_home(Path(td), fake.base_url)
        (Path(dirs["work"]) / "a.txt").write_text("alpha\n")
        cfg = config(dirs, tools=tools, extensions=extensions, executable=executable)
        prompts = cfg.write_prompts()
        proc = subprocess.Popen(
            cfg.argv(prompts),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=cfg.child_env(),
            cwd=dirs["work"],
        )
        stdin, stdout = proc.stdin, proc.stdout
        assert stdin is not None
        assert stdout is not None
        lock = threading.Lock()

        def send(cmds: list[dict[str, Any]]) -> None:
            with lock:
                for c in cmds:
                    stdin.write((json.dumps(c) + "\n").encode())
                stdin.flush()

        lines: list[bytes] = []
        seen: list[dict[str, Any]] = []
        finished = threading.Event()

        def read() -> None:
            for raw in stdout:
                lines.append(raw)
                rec = json.loads(raw)
                seen.append(rec)
                send(react(rec, seen))
                if done is not None and done(seen):
                    finished.set()
            finished.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        send(commands)
        finished.wait(20 if done is not None else 4)
        if done is not None:
            time.sleep(0.3)  # anything pi writes right after
        stdin.close()
        proc.wait(timeout=10)
        reader.join(timeout=5)
        if prompts is not None:
            shutil.rmtree(prompts)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.jsonl").write_bytes(b"".join(lines))


def _count(kind: str, n: int = 1) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda seen: sum(r.get("type") == kind for r in seen) >= n


def _answers(ids: set[str]) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda seen: ids <= {r.get("id") for r in seen if r.get("type") == "response"}


def _dialogs(rec: dict[str, Any], _seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Answer ui_ext.ts's dialogs: confirm yes, pick green."""
    if rec.get("type") != "extension_ui_request":
        return []
    if rec.get("method") == "confirm":
        return [{"type": "extension_ui_response", "id": rec["id"], "confirmed": True}]
    if rec.get("method") == "select":
        return [{"type": "extension_ui_response", "id": rec["id"], "value": "green"}]
    return []


def _on_delta(n: int, *cmds: dict[str, Any]) -> React:
    """Send `cmds` once, at the `n`th streamed text delta."""

    def react(rec: dict[str, Any], seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ame = rec.get("assistantMessageEvent")
        if not isinstance(ame, dict) or ame.get("type") != "text_delta":
            return []
        count = sum(
            isinstance(r.get("assistantMessageEvent"), dict)
            and r["assistantMessageEvent"].get("type") == "text_delta"
            for r in seen
        )
        return list(cmds) if count == n else []

    return react


def record_all(executable: str, out: Path, current: bool, only: set[str] | None = None) -> None:
    """Record every scenario (or those in `only`) with one pi."""
    end = "agent_settled" if current else "agent_end"
    prompt = {"type": "prompt", "id": "p1", "message": "go"}
    ls = tool_call("call_1", "ls", {"path": "."})

    def rec(
        name: str,
        script: list[dict[str, Any]],
        commands: list[dict[str, Any]] | None = None,
        **kw: Any,
    ) -> None:
        if only is not None and name not in only:
            return
        kw.setdefault("done", _count(end))
        record(name, script, commands or [prompt], executable=executable, out=out, **kw)

    rec("text", [chat_text("hello there", pieces=2)], done=None)
    rec("tool", [chat_stream(calls=[ls]), chat_text("done")], done=None)
    rec("retry_ok", [openai_error(500, "boom"), chat_text("recovered")], done=None)
    rec("retry_exhausted", [openai_error(500, "boom")] * 3, done=None)
    rec("not_retryable", [openai_error(400, "bad request")], done=None)
    if current:
        usage = {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42}
        thinking = chat_stream(
            reasoning="let me think", text="thought it over", pieces=3, usage=usage
        )
        rec("thinking", [thinking])
        pieces = tool_call("c1", "ls", {"path": ".", "deep": {"n": 1, "x": [0, 1.5, "é"]}}, 6)
        rec("tool_pieces", [chat_stream(calls=[pieces]), chat_text("ok", pieces=3)])
        rec(
            "abort",
            [chat_text("a long answer " * 20, pieces=40, delay_ms=20)],
            react=_on_delta(3, {"type": "abort", "id": "a1"}),
            done=_answers({"a1"}),
        )
        rec(
            "steer_follow_up",
            [
                chat_text("first answer", pieces=20, delay_ms=20),
                chat_text("steered"),
                chat_text("followed"),
            ],
            react=_on_delta(
                2,
                {"type": "steer", "id": "s1", "message": "change course"},
                {"type": "follow_up", "id": "f1", "message": "and then this"},
            ),
        )
        sh = tool_call("c1", "bash", {"command": "echo hi; echo oops >&2"})
        rec("bash_tool", [chat_stream(calls=[sh]), chat_text("ran")], tools=("bash",))
        big = tool_call("c1", "big_output", {"size": 70_000})
        rec(
            "large_output",
            [chat_stream(calls=[big]), chat_text("big done")],
            extensions=(EXT,),
            tools=("big_output",),
        )
        session = [
            {"type": "get_available_thinking_levels", "id": "c1"},
            {"type": "get_entries", "id": "c2"},
            {"type": "get_tree", "id": "c3"},
            {"type": "clear_queue", "id": "c4"},
            {"type": "bash", "id": "c5", "command": "echo out; echo err >&2"},
            {"type": "get_state", "id": "c6"},
            {"type": "no_such_command", "id": "c7"},
            {"type": "get_messages", "id": "c8"},
        ]
        rec(  # after one prompt's run, so that the session holds messages
            "commands",
            [chat_stream(calls=[ls]), chat_text("listed")],
            react=lambda r, _seen: session if r.get("type") == "agent_settled" else [],
            done=_answers({f"c{i}" for i in range(1, 9)}),
        )
    ask = tool_call("c1", "ask_user", {"question": "ok?"})
    rec(
        "ext_ui_details",
        [chat_stream(calls=[ask]), chat_text("answered")],
        react=_dialogs,
        extensions=(EXT,),
        tools=("ask_user",),
    )


def main(argv: list[str] | None = None) -> None:
    """Record every scenario, with both pi versions unless one is named."""
    args = argv if argv is not None else sys.argv[1:]
    which = [a for a in args if a in ("legacy", "current")] or ["legacy", "current"]
    only = {a for a in args if a not in ("legacy", "current")} or None
    if "legacy" in which:
        record_all(PI_LEGACY, OUT, current=False, only=only)
    if "current" in which:
        record_all(PI_CURRENT, OUT_CURRENT, current=True, only=only)


if __name__ == "__main__":
    main()
