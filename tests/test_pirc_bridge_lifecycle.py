"""The bridge's own lifecycle: pi that cannot start, and cancels or deadlines around the block.

Fake pi (tests/pirc/fake_pi.py) and the real pi CLI, on asyncio and trio.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from mule.pirc import Bridge, ProcessExited
from tests.pirc.helpers import PI_CURRENT, assert_reaped, config, make_home
from tests.pirc.old_node import OLD_NODE


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.pi
@pytest.mark.skipif(
    not OLD_NODE or not os.path.exists(PI_CURRENT), reason="no Node older than 22.19 or no pi"
)
@pytest.mark.parametrize("attempt", range(8))
async def test_pi_160_on_an_old_node_reports_its_exit_and_stderr(
    tmp_path: Path, attempt: int
) -> None:
    """Pi 1.6.0 exits 1 at once on Node 20: the first command says so, with its stderr.

    The write may find pi's stdin open or already closed (a race, once in eight runs before):
    either way the error is pi's exit, never "cannot write to pi".
    """
    assert OLD_NODE is not None
    dirs = make_home(tmp_path, "http://127.0.0.1:9/v1")
    env = {"PATH": str(Path(OLD_NODE).parent)}
    cfg = config(dirs, executable=PI_CURRENT, env=env, inherit_env=False)
    with anyio.fail_after(60):
        async with Bridge(cfg) as b:
            with pytest.raises(ProcessExited) as info:
                await b.prompt("hi")
    assert "cannot write" not in str(info.value)
    assert "enableCompileCache" in str(info.value)
    assert info.value.returncode == 1
    assert b.returncode == 1
    assert_reaped(b.pid)
