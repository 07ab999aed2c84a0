"""A Node.js older than pi 1.6.0 runs on (22.19), if the machine has one outside the venv."""

from __future__ import annotations

import shutil
import subprocess

NODE_FLOOR = (22, 19)


def find_old_node() -> str | None:
    """Return the path of a `node` older than 22.19 in the system's bin dirs, else None."""
    found = shutil.which("node", path="/usr/local/bin:/usr/bin:/bin")
    if found is None:
        return None
    try:
        said = subprocess.run(
            [found, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.strip()
        major, minor = (int(p) for p in said.lstrip("v").split(".")[:2])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    return found if (major, minor) < NODE_FLOOR else None


OLD_NODE = find_old_node()
