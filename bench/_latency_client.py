"""The WebSocket client of bench/serve_latency.py, in its own process (no shared GIL).

    python bench/_latency_client.py mule|floor URL [TOKEN]

It connects (and for `mule` authenticates), prints `ready`, and for `mule` reads the job id to
subscribe to from stdin. Then it stamps each frame as it arrives and, at the run's end, prints
the microseconds from each text delta's write (the stamp inside it) to its arrival, as JSON.
"""

from __future__ import annotations

import json
import sys
import time

from websockets.sync.client import connect


def _stamp(delta: str) -> int:
    return int(delta.split(";", 1)[0])


def main() -> None:
    mode, url = sys.argv[1], sys.argv[2]
    out: list[float] = []
    with connect(url, compression=None, max_size=None) as ws:
        if mode == "mule":
            ws.send(json.dumps({"type": "auth", "token": sys.argv[3]}))
        print("ready", flush=True)
        if mode == "mule":
            ws.send(json.dumps({"type": "subscribe", "job": sys.stdin.readline().strip()}))
        for data in ws:
            now = time.monotonic_ns()
            frame = json.loads(data)
            if mode == "floor":
                if frame.get("type") == "message_update":
                    event = frame["assistantMessageEvent"]
                    if event["type"] == "text_delta":
                        out.append((now - _stamp(event["delta"])) / 1000)
                continue
            if frame["type"] == "job_end":
                break
            if frame["type"] != "event" or frame["event"]["type"] != "message_update":
                continue
            ev = frame["event"]
            if "value" not in ev and ev["event"]["type"] == "text_delta":
                out.append((now - _stamp(ev["event"]["delta"])) / 1000)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
