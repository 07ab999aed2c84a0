"""docs/guides/serve.md runs: its example as one script, the real pi CLI behind `mule serve`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.pirc.helpers import pi_available
from tests.test_docs import ROOT, page_script

pytestmark = [
    pytest.mark.slow,
    pytest.mark.pi,
    pytest.mark.skipif(not pi_available(), reason="pi CLI not installed"),
]

PAGE = ROOT / "docs" / "guides" / "serve.md"


def test_the_serve_guide_runs(tmp_path: Path) -> None:
    script = tmp_path / "serve_guide.py"
    script.write_text(page_script(PAGE))
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Mules are sure-footed.", "completed"]
