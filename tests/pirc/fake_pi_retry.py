#!/usr/bin/env python3
"""A scripted `pi --mode rpc` for `abort_retry` racing pi's auto-retry, in a fixed order.

The race: pi reads `abort_retry` in a retry backoff whose `agent_end` / `auto_retry_start` the
bridge has not read yet (they are still in the pipe). This fake makes that order exact: a
prompt's run starts and stays open; only when `abort_retry` arrives does it write the failed
attempt's end and the backoff's start (as if they had been in the pipe all along), then, by
`FAKE_PI_ORDER`:

    end_first     `auto_retry_end{Retry cancelled}`, then the answer (real pi's order: the
                  cancelled sleep's catch runs before the command's response is written)
    answer_first  the answer, then `auto_retry_end{Retry cancelled}` (tests/pirc/fake_pi_model's
                  order)
    too_late      the answer, then the retry's run, which succeeds: pi had left the backoff
                  (its sleep over, `continue()` pending), so `abort_retry` did nothing

Any later prompt runs at once and answers `done:<message>`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

ORDER = os.environ.get("FAKE_PI_ORDER", "end_first")


def out(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def assistant(text: str, stop: str = "stop", error: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}] if text else [],
        "api": "openai-completions",
        "provider": "local",
        "model": "fake",
        "usage": {
            "input": 1,
            "output": 1,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 2,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": stop,
        "timestamp": 1,
    }
    if error is not None:
        msg["errorMessage"] = error
    return msg


def begin(text: str) -> None:
    out({"type": "agent_start"})
    out({"type": "turn_start"})
    out({"type": "message_start", "message": user(text)})
    out({"type": "message_end", "message": user(text)})


def end(text: str, msg: dict[str, Any], retried: bool = False) -> None:
    out({"type": "message_start", "message": msg})
    out({"type": "message_end", "message": msg})
    if retried:  # pi announces a successful retry at its first good assistant message
        out({"type": "auto_retry_end", "success": True, "attempt": 1})
    out({"type": "turn_end", "message": msg, "toolResults": []})
    out({"type": "agent_end", "messages": [user(text), msg]})


def main() -> None:
    open_run: str | None = None  # the first prompt's text, its run waiting for abort_retry
    first = True
    streaming = False
    for line in sys.stdin:
        cmd = json.loads(line)
        kind, cid = cmd.get("type"), cmd.get("id")
        answer = {"type": "response", "id": cid, "command": kind, "success": True}
        if kind == "get_state":
            out({**answer, "data": {"isStreaming": streaming}})
        elif kind == "prompt" and first:
            first = False
            open_run = cmd["message"]
            out(answer)
            streaming = True
            begin(open_run)
        elif kind == "prompt":
            out(answer)
            begin(cmd["message"])
            end(cmd["message"], assistant("done:" + cmd["message"]))
        elif kind == "abort_retry" and open_run is not None:
            end(open_run, assistant("", "error", "503 overloaded"))
            streaming = False
            out({"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 50})
            cancelled = {"type": "auto_retry_end", "success": False, "attempt": 1}
            cancelled["finalError"] = "Retry cancelled"
            if ORDER == "end_first":
                out(cancelled)
                out(answer)
            elif ORDER == "answer_first":
                out(answer)
                out(cancelled)
            else:  # too_late: the retry runs and succeeds
                out(answer)
                begin(open_run)
                end(open_run, assistant("done:" + open_run), retried=True)
            open_run = None
        else:
            out(answer)


if __name__ == "__main__":
    main()
