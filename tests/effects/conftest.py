"""The `root` fixture: every core scenario runs on each root (only "effects" for now)."""

from __future__ import annotations

import pytest

from tests.effects.kit import ROOTS, Root


@pytest.fixture(params=ROOTS)
def root(request: pytest.FixtureRequest) -> Root:
    """Return the root under test."""
    return request.param  # type: ignore[no-any-return]
