"""Fuzz targets (issue 17.2): report how many inputs each target tried (and the longest times).

Targets count their inputs with `tests.fuzz.budget.tally`; this prints the counts at the end of
the session and, when `MULE_FUZZ_COUNTS` names a file, writes them there as JSON (`./dev fuzz`
sums them over its rounds).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.fuzz.budget import CAMPAIGN, COUNTS, LONGEST


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the inputs each fuzz target tried, and the longest times targets measured."""
    if not COUNTS:
        return
    mode = "campaign" if CAMPAIGN else "ci"
    terminalreporter.section(f"fuzz inputs tried ({mode})")
    for target, n in sorted(COUNTS.items()):
        terminalreporter.write_line(f"{n:>9,}  {target}")
    for measure, seconds in sorted(LONGEST.items()):
        terminalreporter.write_line(f"longest {seconds * 1000:9.2f} ms  {measure}")
    path = os.environ.get("MULE_FUZZ_COUNTS")
    if path:
        found: dict[str, float] = {**COUNTS, **{f"longest: {k}": v for k, v in LONGEST.items()}}
        Path(path).write_text(json.dumps(found, indent=1, sort_keys=True))
