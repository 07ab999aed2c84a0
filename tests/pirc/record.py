"""Record raw pi RPC stdout for the recorded-sequence tests (run by hand; needs the pi CLI).

`python -m tests.pirc.record` rewrites tests/pirc/recorded/*.jsonl from live runs against the
fake OpenAI server. Only run-level and lifecycle records are kept, streaming updates trimmed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, openai_error, tool_call
from tests.pirc.helpers import HERE, config, make_home

OUT = HERE / "recorded"


def record(name: str, script: list[dict[str, Any]], commands: list[dict[str, Any]]) -> None:
    """Run pi with `script` queued, send `commands`, save stdout until the job settles."""
    with FakeOpenAI(script) as fake, tempfile.TemporaryDirectory() as td:
        dirs = make_home(Path(td), fake.base_url)
        (Path(dirs["work"]) / "a.txt").write_text("alpha\n")
        cfg = config(dirs, tools=("ls", "read"))
        prompts = cfg.write_prompts()
        proc = subprocess.Popen(
            cfg.argv(prompts),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=cfg.child_env(),
            cwd=dirs["work"],
        )
        assert proc.stdin is not None
        for c in commands:
            proc.stdin.write((json.dumps(c) + "\n").encode())
            proc.stdin.flush()
        time.sleep(4)
        out, _ = proc.communicate(timeout=10)
        if prompts is not None:
            shutil.rmtree(prompts)
    OUT.mkdir(exist_ok=True)
    (OUT / f"{name}.jsonl").write_bytes(out)


def main() -> None:
    """Record every scenario."""
    prompt = {"type": "prompt", "id": "p1", "message": "go"}
    ls = tool_call("call_1", "ls", {"path": "."})
    record("text", [chat_text("hello there", pieces=2)], [prompt])
    record("tool", [chat_stream(calls=[ls]), chat_text("done")], [prompt])
    record("retry_ok", [openai_error(500, "boom"), chat_text("recovered")], [prompt])
    record("retry_exhausted", [openai_error(500, "boom")] * 3, [prompt])
    record("not_retryable", [openai_error(400, "bad request")], [prompt])


if __name__ == "__main__":
    main()
