"""Which run events are durability points, and which only stream (the record is the codec's).

Each event is stored as `mule.effects.event_to_record` JSON.
"""

from __future__ import annotations

# Events after which the journal commits before the listener returns. The core awaits the
# listener before acting on the event, so a commit here happens-before the effect it enables.
COMMIT_POINTS = frozenset(
    {
        "run_start",
        "tool_execution_start",
        "tool_execution_end",
        "message_end",
        "turn_end",
        "run_end",
    }
)
# Events the fold never needs: skipped when recovering.
STREAM_ONLY = ("message_update", "tool_execution_update")


__all__ = ["COMMIT_POINTS", "STREAM_ONLY"]
