"""Shared setup for tests against the real pi CLI: an isolated agent dir and a bridge config."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mule.pirc import BridgeConfig, default_pi_executable

HERE = Path(__file__).parent
PI_CURRENT = default_pi_executable()
# node/'s npm script for pi 1.6.0: it runs on whatever `node` PATH finds (the old-Node tests).
PI_SCRIPT = str(Path(__file__).resolve().parents[2] / "node" / "node_modules" / ".bin" / "pi")
# pi 0.73.1 (node/legacy), the old RPC protocol.
PI_LEGACY = str(
    Path(__file__).resolve().parents[2] / "node" / "legacy" / "node_modules" / ".bin" / "pi"
)
# The pi the real-pi tests drive: 1.6.0 (`./dev setup` installs it). A representative set
# also runs against 0.73.1, for the old protocol (cumulative partials, no agent_settled):
# parametrize over both_pis().
PI = PI_CURRENT
KEY_ENV = "MULE_TEST_PI_KEY"
MODEL = "fake-model"


def assert_reaped(pid: int | None) -> None:
    """Fail unless `pid` was already reaped (not a zombie child of ours)."""
    assert pid is not None
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return
    raise AssertionError(f"process {pid} was still our unreaped child")


def pi_available() -> bool:
    """Whether the pi CLI and node are installed."""
    return os.path.exists(PI)


def both_pis() -> list[Any]:
    """Pytest params of the current pi and of 0.73.1 (skipped when it is not installed)."""
    import pytest

    legacy = pytest.mark.skipif(not os.path.exists(PI_LEGACY), reason="pi 0.73.1 not installed")
    return [
        pytest.param(PI_CURRENT, id="pi-1.6.0"),
        pytest.param(PI_LEGACY, id="pi-0.73.1", marks=legacy),
    ]


def make_home(root: Path, base_url: str, retry: dict[str, Any] | None = None) -> dict[str, str]:
    """Write models.json and settings.json into `root/agent`; return the dirs to use."""
    agent, home, tmp, work = root / "agent", root / "home", root / "tmp", root / "work"
    for d in (agent, home, tmp, work):
        d.mkdir(parents=True, exist_ok=True)
    models = {
        "providers": {
            "local": {
                "baseUrl": base_url,
                "api": "openai-completions",
                "apiKey": KEY_ENV,  # an env var NAME: the key itself stays off disk and argv
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                "models": [{"id": MODEL, "contextWindow": 128000, "maxTokens": 4096}],
            }
        }
    }
    settings = {
        "retry": retry
        or {"enabled": True, "maxRetries": 2, "baseDelayMs": 20, "provider": {"maxRetries": 0}},
        "compaction": {"enabled": False},
    }
    (agent / "models.json").write_text(json.dumps(models))
    (agent / "settings.json").write_text(json.dumps(settings))
    return {"agent": str(agent), "home": str(home), "tmp": str(tmp), "work": str(work)}


def config(dirs: dict[str, str], **kw: Any) -> BridgeConfig:
    """Return a bridge config for the local fake provider in these dirs."""
    base: dict[str, Any] = {
        "provider": "local",
        "model": MODEL,
        "api_key_env": KEY_ENV,
        "api_key": "sk-test-secret",
        "executable": PI,
        "cwd": dirs["work"],
        "agent_dir": dirs["agent"],
        "home": dirs["home"],
        "tmpdir": dirs["tmp"],
        "system_prompt": "You are a test.",
    }
    base.update(kw)
    return BridgeConfig(**base)
