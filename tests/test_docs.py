"""Every code example in the guides runs: each page's python blocks, in order, as one script."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = sorted((ROOT / "docs" / "guides").glob("*.md"))
# Pages whose examples need a service are run by that service's suite:
# tests/dbos/test_guide.py and tests/serve/test_guide.py.
SERVICE_GUIDES = {"dbos", "serve"}
RUNNABLE = [p for p in GUIDES if p.stem not in SERVICE_GUIDES]
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


def page_script(page: Path) -> str:
    """Return a page's python blocks joined into one script."""
    return "\n\n".join(_BLOCK.findall(page.read_text()))


def test_every_guide_has_examples() -> None:
    names = {p.stem for p in GUIDES}
    assert {"quickstart", "streaming", "tools", "conversations", "output", "models"} <= names
    for page in GUIDES:
        assert page_script(page).strip(), f"{page.name} has no python example"


_EXPECTED = {
    "quickstart": ["It has 3 words.", "completed 3 new messages"],
    "streaming": ["Mules are sure-footed.\ncompleted"],
    "tools": [
        '[{"unit": "ft", "value": 12.5, "at": "2026-01-02T03:04:00"}]',
        "progress: mules: reading",
        "progress: mules: indexing",
    ],
    "conversations": [],
    "durable": ["completed\n['user', 'assistant', 'toolResult', 'assistant']\ncompleted"],
    "output": [
        "City(name='Paris', population=2100000)",
        "Rome.",
        "City(name='Rome', population=2800000)",
    ],
    "models": [
        "Hi, from the Responses API.\nHi, from llama3.2.\nBearer none\nBearer sk-local-secret\n"
        "anthropic: Hi, from Claude.\ngoogle: Hi, from Gemini.\n"
        "sk-ant-from-your-shell\ngemini-key-from-your-shell\n"
    ],
}


@pytest.mark.parametrize("page", RUNNABLE, ids=[p.stem for p in RUNNABLE])
def test_guide_examples_run(page: Path, tmp_path: Path) -> None:
    script = tmp_path / f"{page.stem}.py"
    script.write_text(page_script(page))
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for expected in _EXPECTED.get(page.stem, []):
        assert expected in done.stdout
