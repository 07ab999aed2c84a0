#!/usr/bin/env python3
"""A stand-in for `pi --mode rpc` that injects protocol faults (run as a script by the tests).

The scenario comes from `FAKE_PI_SCENARIO`:
    ok       answer commands like pi; `prompt` runs a tiny text run
    faults   like ok, but the run is preceded by a bad line, a huge line (FAKE_PI_HUGE bytes),
             a non-object, an id-less response, a response with an unknown id and a U+2028 text
    exit     write to stderr and exit with code 3 after the first command
    nostart  close stdin at once, write an error to stderr, exit 1 after FAKE_PI_EXIT_DELAY s
             (0.3), as pi does on a Node it cannot run on: a write in between finds no reader
    hang     never answer and ignore SIGTERM (only SIGKILL ends it)
    ui       `prompt` opens a confirm dialog and reports the answer as an event
    command  `/dialog` opens a confirm and answers the prompt only once the dialog is answered
             (like an extension command); `/late` answers after FAKE_PI_LATE s, then runs;
             any other prompt runs at once, answering `echo:<message>`
    die      `prompt` starts a run, then pi dies (exit 1) mid-stream
    flood    `prompt` floods FAKE_PI_FLOOD (20,000) streaming updates before finishing its run
    garbage  `prompt` writes random bytes (invalid UTF-8, NULs, stray braces) before its run
    deep     like ok, but the run is preceded by a line nested 100,000 deep and one 300 deep
    deaf     never reads stdin, ignores SIGTERM, and leaves a grandchild in its own session
             holding stdout open (its pid on stderr as `grandchild=PID`): nothing but SIGKILL
             and a bounded wait ends it
`FAKE_PI_START_DELAY` (seconds, default 0) delays reading stdin at all, as a slow node boot does.
`get_state` data includes the argv and whether the key env var is set, so tests can check them.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from typing import Any

SCENARIO = os.environ.get("FAKE_PI_SCENARIO", "ok")


def out(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def raw(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def assistant(text: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
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
        "stopReason": "stop",
        "timestamp": 1,
    }


def run(text: str) -> None:
    user = {"role": "user", "content": [{"type": "text", "text": "go"}], "timestamp": 1}
    msg = assistant(text)
    out({"type": "agent_start"})
    out({"type": "turn_start"})
    out({"type": "message_start", "message": user})
    out({"type": "message_end", "message": user})
    out({"type": "message_start", "message": {**msg, "content": []}})
    out(
        {
            "type": "message_update",
            "message": msg,
            "assistantMessageEvent": {
                "type": "text_delta",
                "contentIndex": 0,
                "delta": text,
                "partial": msg,
            },
        }
    )
    out({"type": "message_end", "message": msg})
    out({"type": "turn_end", "message": msg, "toolResults": []})
    out({"type": "agent_end", "messages": [user, msg]})


def command(cid: Any, message: str) -> None:
    if message == "/dialog":
        out({"type": "extension_ui_request", "id": "dlg-c", "method": "confirm", "title": "?"})
        while True:
            answer = json.loads(sys.stdin.readline())
            if answer.get("type") == "extension_ui_response":
                break
            out(
                {
                    "type": "response",
                    "id": answer.get("id"),
                    "command": answer.get("type"),
                    "success": True,
                    "data": {"isStreaming": False},
                }
            )
        out({"type": "ui_answer_seen", "answer": answer})
        out({"type": "response", "id": cid, "command": "prompt", "success": True})
        return
    if message == "/late":
        time.sleep(float(os.environ.get("FAKE_PI_LATE", "1")))
        out({"type": "response", "id": cid, "command": "prompt", "success": True})
        run("echo:late")
        return
    out({"type": "response", "id": cid, "command": "prompt", "success": True})
    run("echo:" + message)


def deaf() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pid = os.fork()
    if pid == 0:  # the grandchild: out of pi's process group, stdout inherited
        os.setsid()
        os.close(0)  # like a tool's child: stdin not inherited, stdout (pi's pipe) held open
        time.sleep(60)
        os._exit(0)
    sys.stderr.write(f"deaf: grandchild={pid}\n")
    sys.stderr.flush()
    while True:
        time.sleep(1)


def main() -> None:
    if SCENARIO == "nostart":
        os.close(0)
        sys.stderr.write("SyntaxError: no export named 'enableCompileCache'\nNode.js v20\n")
        sys.stderr.flush()
        time.sleep(float(os.environ.get("FAKE_PI_EXIT_DELAY", "0.3")))
        sys.exit(1)
    if SCENARIO == "deaf":
        deaf()
    if SCENARIO == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.stderr.write("hang: ignoring SIGTERM\n")  # tests wait for this before timing out
        sys.stderr.flush()
    time.sleep(float(os.environ.get("FAKE_PI_START_DELAY", "0")))
    streaming = False
    for line in sys.stdin:
        cmd = json.loads(line)
        kind, cid = cmd.get("type"), cmd.get("id")
        if SCENARIO == "exit":
            sys.stderr.write("fatal: scripted early exit\n")
            sys.stderr.flush()
            sys.exit(3)
        if SCENARIO == "hang":
            continue
        if kind == "get_state":
            out(
                {
                    "type": "response",
                    "id": cid,
                    "command": kind,
                    "success": True,
                    "data": {
                        "isStreaming": streaming,
                        "argv": sys.argv,
                        "keySet": bool(os.environ.get("MULE_TEST_PI_KEY")),
                        "offline": os.environ.get("PI_OFFLINE"),
                        "noProxy": os.environ.get("NO_PROXY"),
                    },
                }
            )
        elif kind == "prompt" and SCENARIO == "command":
            command(cid, cmd.get("message", ""))
        elif kind == "prompt":
            out({"type": "response", "id": cid, "command": kind, "success": True})
            if SCENARIO == "faults":
                raw(b"this is not json\n")
                raw(
                    b'{"type":"message_update","pad":"'
                    + b"x" * int(os.environ["FAKE_PI_HUGE"])
                    + b'"}\n'
                )
                raw(b"[1,2,3]\r\n")
                out({"type": "response", "command": "nothing_sent", "success": True})
                out({"type": "response", "id": "nobody", "command": "get_state", "success": True})
                run("line\u2028sep\u2029end")
            elif SCENARIO == "die":
                out({"type": "agent_start"})
                out({"type": "turn_start"})
                sys.stdout.write('{"type":"message_upd')  # dies mid-line
                sys.stdout.flush()
                os._exit(1)
            elif SCENARIO == "flood":
                msg = assistant("x")
                update = json.dumps(
                    {
                        "type": "message_update",
                        "message": msg,
                        "assistantMessageEvent": {
                            "type": "text_delta",
                            "contentIndex": 0,
                            "delta": "x",
                            "partial": msg,
                        },
                    }
                )
                out({"type": "agent_start"})
                out({"type": "turn_start"})
                out({"type": "message_start", "message": {**msg, "content": []}})
                sys.stdout.write((update + "\n") * int(os.environ.get("FAKE_PI_FLOOD", "20000")))
                out({"type": "message_end", "message": msg})
                out({"type": "turn_end", "message": msg, "toolResults": []})
                out({"type": "agent_end", "messages": [msg]})
            elif SCENARIO == "garbage":
                rnd = random.Random(7)
                raw(bytes(rnd.randrange(256) for _ in range(20_000)) + b"\n{}}{\x00\xff\n")
                run("after garbage")
            elif SCENARIO == "deep":
                raw(b'{"type":"message_update","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
                raw(b'{"type":"message_update","x":' + b"[" * 300 + b"]" * 300 + b"}\n")
                run("survived")
            elif SCENARIO == "ui":
                out({"type": "agent_start"})
                out(
                    {
                        "type": "extension_ui_request",
                        "id": "dlg-1",
                        "method": "confirm",
                        "title": "Sure?",
                        "message": "really",
                    }
                )
                while True:  # the bridge may send its barrier while the dialog is open
                    answer = json.loads(sys.stdin.readline())
                    if answer.get("type") != "get_state":
                        break
                    out(
                        {
                            "type": "response",
                            "id": answer.get("id"),
                            "command": "get_state",
                            "success": True,
                            "data": {"isStreaming": True},
                        }
                    )
                out({"type": "ui_answer_seen", "answer": answer})
                out({"type": "agent_end", "messages": [assistant("ok")]})
            else:
                run("hi")
        elif kind == "extension_ui_response":
            pass
        elif kind == "abort":
            out({"type": "response", "id": cid, "command": kind, "success": True})
        elif kind in ("get_messages",):
            out(
                {
                    "type": "response",
                    "id": cid,
                    "command": kind,
                    "success": True,
                    "data": {"messages": [assistant("x"), {"role": "custom", "customType": "c"}]},
                }
            )
        elif kind == "set_model":
            out(
                {
                    "type": "response",
                    "id": cid,
                    "command": kind,
                    "success": False,
                    "error": "Model not found: x/y",
                }
            )
        else:
            # like pi: unknown commands are answered without their id
            out(
                {
                    "type": "response",
                    "command": kind,
                    "success": False,
                    "error": f"Unknown command: {kind}",
                }
            )
    while SCENARIO == "hang":  # stdin closed: still do not exit
        time.sleep(1)


if __name__ == "__main__":
    main()
