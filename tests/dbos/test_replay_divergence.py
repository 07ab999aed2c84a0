"""A replay that asks for another kind of step than was recorded fails loudly, never reuses it.

Tests the private rule `mule.dbos._workflow._Durable.replayed`: a recorded step is reused only for a
step of its own kind (`MODEL_STEP`, `TOOL_STEP`).
"""

from __future__ import annotations

import pytest

from mule.dbos._workflow import MODEL_STEP, TOOL_STEP, _Durable


def durable(recorded: dict[int, tuple[str, str]]) -> _Durable:
    # The runtime is not touched by `replayed`: only the records read as the execution starts.
    return _Durable(None, "run-1", recorded)  # type: ignore[arg-type]


def test_a_recorded_step_of_the_asked_kind_is_replayed_once() -> None:
    d = durable({1: (MODEL_STEP, '{"a":1}'), 2: (TOOL_STEP, "[2]")})
    assert d.replayed(1, MODEL_STEP) == {"a": 1}
    assert d.replayed(2, TOOL_STEP) == [2]
    assert d.replayed(1, MODEL_STEP) is None  # taken: a second ask runs the step live
    assert d.replayed(3, TOOL_STEP) is None  # never recorded


@pytest.mark.parametrize(("recorded", "asked"), [(TOOL_STEP, MODEL_STEP), (MODEL_STEP, TOOL_STEP)])
def test_a_step_of_another_kind_means_the_workflow_diverged(recorded: str, asked: str) -> None:
    d = durable({4: (recorded, "{}")})
    with pytest.raises(RuntimeError) as caught:
        d.replayed(4, asked)
    text = str(caught.value)
    assert "run run-1 diverged from its recorded steps" in text
    assert f"step 4 was a {recorded}, this execution asks for a {asked}" in text
