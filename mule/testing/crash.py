"""A crash matrix for transcript owners: SIGKILL a real run at chosen points, recover, finish.

A `CrashLab` starts one pre-imported "zygote" process that forks a fresh child per run (so a
child costs a fork, not an interpreter start). Each child recovers the run from the owner,
runs the scripted scenario with the owner's listener, and announces named points on a
Unix socket, waiting for "go" after each: the parent SIGKILLs it exactly at a chosen point.
After the last kill, a child finishes the run; `check_case` then asserts the durability
contract. Bring your own owner: any `TranscriptOwner` made by an importable factory
`"package.module:callable"` taking a path (the SQLite `mule.journal:Journal` is the first).

The scenario: turn 1 streams text and three parallel calls (one safe `read`, two unsafe
`write`); turn 2's first attempt fails with a retryable error after streaming, the retry
streams text and a sequential batch (`log`, unsafe and sequential, and `read`); turn 3
answers "All done.". Tools append `<call id> <pid>` to a side-effect file with fsync.

The parts: the parent's lab (`_crash_lab`), the child's side with the scenario
(`_crash_scenario`, forked by the zygote in `_crash_child`), and the contract a finished case
must meet (`_crash_check`).
"""

from mule.testing._crash_check import check_case, transcript_problems
from mule.testing._crash_lab import CrashCase, CrashChildError, CrashLab, Segment
from mule.testing._crash_scenario import (
    FINAL_TEXT,
    MODEL,
    PROMPT,
    RETRY,
    SYSTEM,
    TURNS,
    ScenarioModel,
    announcing,
    child_main,
    load_factory,
    run_scenario,
    scenario_tools,
)

__all__ = [
    "FINAL_TEXT",
    "MODEL",
    "PROMPT",
    "RETRY",
    "SYSTEM",
    "TURNS",
    "CrashCase",
    "CrashChildError",
    "CrashLab",
    "ScenarioModel",
    "Segment",
    "announcing",
    "check_case",
    "child_main",
    "load_factory",
    "run_scenario",
    "scenario_tools",
    "transcript_problems",
]
