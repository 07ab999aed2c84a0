"""A hand-written stdio 'MCP server' that breaks the protocol on purpose.

python tests/mcp/raw_server.py garbage   # answers tools/call with a line that is not JSON
python tests/mcp/raw_server.py invalid   # answers tools/call with a result of the wrong shape
"""

from __future__ import annotations

import json
import sys
import time


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    mode = sys.argv[1]
    tool = {"name": "garble", "description": "Break.", "inputSchema": {"type": "object"}}
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [tool]}})
        elif method == "tools/call" and mode == "garbage":
            print("raw: writing garbage", file=sys.stderr, flush=True)
            sys.stdout.write("Traceback (most recent call last): this is not JSON-RPC\n")
            sys.stdout.flush()
            time.sleep(3600)
        elif method == "tools/call" and mode == "invalid":
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": "not a list"}})
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            send({"jsonrpc": "2.0", "id": rid, "error": error})


if __name__ == "__main__":
    main()
