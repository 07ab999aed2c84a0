"""Node scripts that answer mule's differential tests, and the one process runner they share."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
REPO = HERE.parent.parent


class NodeLines:
    """A long-lived `node SCRIPT` process: one JSON line in, one JSON line out, per question."""

    def __init__(self, script: Path) -> None:
        node = shutil.which("node")
        assert node is not None, "node is required for the pi differential tests"
        self._proc = subprocess.Popen(
            [node, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="surrogatepass",  # JavaScript strings may hold lone surrogates
            cwd=REPO,
        )

    def ask(self, question: object) -> Any:
        """Send one question (as JSON) and return the script's answer (decoded)."""
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(question, allow_nan=False) + "\n")
        self._proc.stdin.flush()
        return json.loads(self._proc.stdout.readline())

    def close(self) -> None:
        """Stop the Node process."""
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=30)
        self._proc.stdout.close()
