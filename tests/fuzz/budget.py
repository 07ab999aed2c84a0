"""The fuzz targets' budget: a few seconds each in CI, as long as asked in a campaign.

`fuzz_settings(n)` gives a target `n` examples per run in CI (derandomized, so CI is
reproducible) and a per-example deadline, so a hang fails its example instead of the suite.
`./dev fuzz SECONDS` sets `MULE_FUZZ=campaign`: random seeds and `MULE_FUZZ_SCALE` (default 5)
times the examples, in rounds until the time is up. `tally(name)` counts the inputs a target
tried, `longest(measure, seconds)` keeps the longest time a target measured; the conftest prints
both and, with `MULE_FUZZ_COUNTS=path`, writes them as JSON (times under "longest: " keys).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Final

from hypothesis import HealthCheck, settings

CAMPAIGN: Final = os.environ.get("MULE_FUZZ") == "campaign"
SCALE: Final = int(os.environ.get("MULE_FUZZ_SCALE", "5")) if CAMPAIGN else 1
COUNTS: Final[Counter[str]] = Counter()
LONGEST: Final[dict[str, float]] = {}


def fuzz_settings(examples: int, deadline_ms: int = 5000, **extra: Any) -> settings:
    """Return a target's settings: `examples` in CI, SCALE times as many in a campaign."""
    return settings(
        max_examples=examples * SCALE,
        deadline=deadline_ms,
        derandomize=not CAMPAIGN,
        database=None,
        suppress_health_check=list(HealthCheck),
        **extra,
    )


def tally(target: str) -> None:
    """Count one input tried by `target`."""
    COUNTS[target] += 1


def longest(measure: str, seconds: float) -> None:
    """Keep the longest time seen for `measure` (reported with the counts, never asserted)."""
    LONGEST[measure] = max(seconds, LONGEST.get(measure, 0.0))


__all__ = ["CAMPAIGN", "COUNTS", "LONGEST", "SCALE", "fuzz_settings", "longest", "tally"]
