"""The crash matrix's zygote: imports everything once, then forks one child per request line.

`python -m mule.testing._crash_child <factory>` reads JSON requests on stdin until EOF; each
forked child runs `mule.testing.crash.child_main` and exits without cleanup handlers.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import anyio  # noqa: F401 (imported before forking so children start warm)

from mule.pi import needs_extra
from mule.testing._crash_scenario import child_main, load_factory

with needs_extra("testing", "mule.testing.crash"):
    import trio  # noqa: F401


def main(argv: list[str]) -> None:
    """Serve fork requests until stdin closes."""
    factory = argv[0]
    load_factory(factory)  # import the owner's module once, here
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            code = 0
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                child_main(factory, request)
            except BaseException:
                code = 1
            finally:
                os._exit(code)


__all__ = ["main"]


if __name__ == "__main__":
    main(sys.argv[1:])
