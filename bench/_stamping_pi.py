"""A stand-in for `pi --mode rpc` whose text deltas carry the moment each line was written.

On `prompt` it answers, then writes a run as real pi does (agent_start … agent_settled), with
`FAKE_PI_DELTAS` text deltas `FAKE_PI_INTERVAL_US` apart. Each `message_update` line holds, like
pi 1.6.0's, the delta and the usage so far (`FAKE_PI_PROTOCOL=0.73`: like pi 0.73.1's, the whole
partial message twice, `message` and the event's `partial`); its delta starts with
`time.monotonic_ns()` taken just before the line is written (CLOCK_MONOTONIC is the same clock
in every process on Linux, so a reader can subtract). Other commands get a success.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

DELTAS = int(os.environ.get("FAKE_PI_DELTAS", "500"))
INTERVAL_S = int(os.environ.get("FAKE_PI_INTERVAL_US", "2000")) / 1e6
V16 = os.environ.get("FAKE_PI_PROTOCOL", "1.6") == "1.6"
USAGE = {
    "input": 1,
    "output": 1,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 2,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


def out(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def assistant(text: str, stop: str = "stop") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}] if text else [],
        "api": "openai-completions",
        "provider": "local",
        "model": "fake",
        "usage": USAGE,
        "stopReason": stop,
        "timestamp": 1,
    }


def run() -> None:
    user = {"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": 1}
    out({"type": "agent_start"})
    out({"type": "turn_start"})
    out({"type": "message_start", "message": user})
    out({"type": "message_end", "message": user})
    out({"type": "message_start", "message": assistant("", "pending" if V16 else "stop")})
    if V16:
        start = {"type": "text_start", "contentIndex": 0}
        out({"type": "message_update", "usage": USAGE, "assistantMessageEvent": start})
    else:
        out(
            {
                "type": "message_update",
                "message": assistant(""),
                "assistantMessageEvent": {
                    "type": "text_start",
                    "contentIndex": 0,
                    "partial": assistant(""),
                },
            }
        )
    text = ""
    next_at = time.monotonic()
    for _ in range(DELTAS):
        next_at += INTERVAL_S
        while (left := next_at - time.monotonic()) > 0:
            time.sleep(left)
        delta = f"{time.monotonic_ns()};"
        text += delta
        if V16:
            event = {"type": "text_delta", "contentIndex": 0, "delta": delta}
            out({"type": "message_update", "usage": USAGE, "assistantMessageEvent": event})
            continue
        msg = assistant(text)
        event = {"type": "text_delta", "contentIndex": 0, "delta": delta, "partial": msg}
        out({"type": "message_update", "message": msg, "assistantMessageEvent": event})
    msg = assistant(text)
    out({"type": "message_end", "message": msg})
    out({"type": "turn_end", "message": msg, "toolResults": []})
    if V16:
        out({"type": "agent_end", "messages": [user, msg], "willRetry": False})
        out({"type": "agent_settled", "aborted": False})
    else:
        out({"type": "agent_end", "messages": [user, msg]})


def main() -> None:
    streaming = False
    for line in sys.stdin:
        cmd = json.loads(line)
        kind, cid = cmd.get("type"), cmd.get("id")
        data: dict[str, Any] | None = {"isStreaming": streaming} if kind == "get_state" else None
        if kind == "prompt" and V16:
            data = {"disposition": "started"}
        reply = {"type": "response", "id": cid, "command": kind, "success": True}
        out({**reply, "data": data} if data is not None else reply)
        if kind == "prompt":
            streaming = True
            run()
            streaming = False


if __name__ == "__main__":
    main()
