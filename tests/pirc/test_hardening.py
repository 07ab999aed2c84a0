"""Issue 17 defects 1 and 4 and argv values: deep lines, a child that stops reading, reaped pids.

Each test reproduces a defect that once hung or crashed the bridge; each wait is bounded by
`anyio.fail_after`, so a regression fails instead of hanging.

Also tests the private rule `mule.pirc._framing.nesting_exceeds`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from mule.pirc import (
    Bridge,
    BridgeConfig,
    ConfigError,
    LineError,
    WriteTimeout,
    decode_line,
    parse_record,
)
from mule.pirc._framing import nesting_exceeds
from tests.pirc.helpers import assert_reaped

FAKE = str(Path(__file__).parent / "fake_pi.py")


def cfg(scenario: str, **kw: Any) -> BridgeConfig:
    base: dict[str, Any] = {
        "provider": "local",
        "model": "fake",
        "executable": FAKE,
        "env": {"FAKE_PI_SCENARIO": scenario},
        "command_timeout": 5.0,
        "stop_grace": 0.5,
        "abort_grace": 0.5,
    }
    base.update(kw)
    return BridgeConfig(**base)


def test_deep_line_is_a_typed_error_not_a_recursion_error() -> None:
    """A line nested 100,000 deep raises LineError('too_deep'); the limit is exact."""
    with pytest.raises(LineError) as info:
        decode_line(b"[" * 100_000)
    assert info.value.problem == "too_deep"
    at_limit = b'{"a":' + b"[" * 255 + b"]" * 255 + b"}"
    assert decode_line(at_limit, 256)["a"]
    with pytest.raises(LineError, match="deeper than 256"):
        decode_line(b'{"a":' + b"[" * 256 + b"]" * 256 + b"}", 256)
    # brackets inside strings (escaped quotes included) are text, not nesting
    text = b'{"s":"\\"' + b"[" * 1000 + b'"}'
    assert not nesting_exceeds(text, 256)
    assert decode_line(text)["s"].startswith('"[')
    stats_bad = parse_record(b"[" * 5000)
    assert stats_bad is None


@pytest.mark.anyio
async def test_deep_line_from_pi_is_skipped_and_the_job_completes() -> None:
    """Defect 1: the reader used to die of RecursionError, and stop() then hung forever."""
    with anyio.fail_after(20):
        async with Bridge(cfg("deep")) as b:
            result = await b.run("go")
            stats = b.stats
    assert (result.outcome, result.text) == ("completed", "survived")
    assert stats.frames.deep_lines == 2
    assert stats.handler_errors == 0
    assert_reaped(b.pid)


async def _grandchild(b: Bridge) -> int:
    """Return the fake's stray grandchild pid, read from its stderr."""
    proc = b._process
    assert proc is not None
    for _ in range(2000):  # bounded poll: the stderr line has no event of its own
        for line in proc._stderr_tail:
            m = re.search(r"grandchild=(\d+)", line)
            if m:
                return int(m.group(1))
        await anyio.sleep(0.01)
    raise AssertionError("the fake never reported its grandchild")


@pytest.mark.anyio
async def test_stop_is_bounded_when_pi_ignores_stdin_sigterm_and_its_stdout() -> None:
    """Defect 4 and 17.1: writes have deadlines; stop() escalates to SIGKILL and returns."""
    config = cfg("deaf", write_timeout=0.5)
    b = Bridge(config)
    grandchild = 0
    try:
        with anyio.fail_after(30):
            async with b:
                grandchild = await _grandchild(b)
                with pytest.raises(WriteTimeout):
                    await b.prompt("x" * 1_000_000)  # far past the 64 KB pipe buffer
                with pytest.raises(WriteTimeout):  # the stream may hold half a line
                    await b.get_state()
                started = time.monotonic()
                rc = await b.stop()
                took = time.monotonic() - started
    finally:
        if grandchild:
            os.kill(grandchild, signal.SIGKILL)
    assert rc == -signal.SIGKILL
    bound = config.abort_grace + 2 * config.stop_grace + 4 * 2.0
    assert took < bound, took
    assert_reaped(b.pid)
    job = b.job
    assert job is not None
    assert job.done.is_set()


@pytest.mark.anyio
async def test_signals_never_reach_a_reaped_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once pi is reaped its pid may be another process's: kill() must not killpg it."""
    calls: list[int] = []
    real = os.killpg

    def recording_killpg(pid: int, sig: int) -> None:
        calls.append(pid)
        real(pid, sig)

    with anyio.fail_after(20):
        async with Bridge(cfg("ok")) as b:
            await b.get_state()
            monkeypatch.setattr(os, "killpg", recording_killpg)
            b.kill()
            assert await b.wait_exit() == -signal.SIGKILL
            b.kill()
            b.kill()
    assert calls == [b.pid]
    assert_reaped(b.pid)


@pytest.mark.parametrize(
    "override",
    [
        {"model": "--extension=/tmp/evil.ts"},
        {"provider": "-e"},
        {"thinking": "--help"},
        {"tools": ("read", "--no-tools")},
        {"tools": ("read,bash",)},
        {"extensions": ("-x.ts",)},
        {"skills": ("--skill=/tmp",)},
        {"model": ""},
        {"model": "m\x00"},
        {"tools": ("read\ud800",)},
        {"system_prompt": "hi \ud800"},
        {"append_system_prompt": ("ok", "\udfff")},
    ],
)
def test_argv_values_that_look_like_options_are_refused(override: dict[str, Any]) -> None:
    """Per-job overrides reach pi's argv: a flag-like or unencodable value is a ConfigError."""
    with pytest.raises(ConfigError):
        cfg("ok", **override)
    with pytest.raises(ValueError, match=r"option|non-empty|tool name|NUL|surrogate"):
        cfg("ok", **override)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("command_timeout", 0),
        ("start_timeout", -1.0),
        ("job_timeout", float("nan")),
        ("ui_timeout", 0.0),
        ("write_timeout", "10"),
        ("stop_grace", -0.5),
        ("abort_grace", True),
        ("max_line_bytes", 0),
        ("max_line_depth", 2.5),
        ("event_buffer", -3),
    ],
)
def test_bounds_that_are_not_positive_numbers_are_refused(name: str, value: object) -> None:
    """A zero, negative, NaN or non-numeric bound is a ConfigError naming it, before pi starts."""
    with pytest.raises(ConfigError, match=rf"^{name} must be a positive"):
        cfg("ok", **{name: value})


def test_no_bound_is_infinity_or_for_dialogs_none() -> None:
    """`math.inf` means no bound; `ui_timeout=None` leaves dialogs to pi's own limit."""
    config = cfg("ok", job_timeout=float("inf"), ui_timeout=None)
    assert (config.job_timeout, config.ui_timeout) == (float("inf"), None)


def test_prompt_texts_reach_pi_through_private_files_never_as_argv_words(
    tmp_path: Path,
) -> None:
    """A prompt text, flag-like or naming a file, is passed as a file of exactly that text.

    pi reads a `--system-prompt` value naming an existing file as that file: the text itself
    must never be the value. extra_args stay options; an empty text is pi's own prompt.
    """
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    texts = ("--extension=/tmp/evil.ts", str(secret), "- be terse\r\n", "")
    c = cfg(
        "ok",
        system_prompt=str(secret),
        append_system_prompt=texts,
        extra_args=("--verbose",),
        tools=("read",),
    )
    with pytest.raises(ValueError, match="prompt_dir"):
        c.argv()
    prompt_dir = c.write_prompts()
    assert prompt_dir is not None
    try:
        argv = c.argv(prompt_dir)
        assert argv[-1] == "--verbose"
        assert str(secret) not in argv
        values = [argv[i + 1] for i, a in enumerate(argv) if a.endswith("system-prompt")]
        assert len(values) == 5
        assert values[-1] == ""  # empty: not a file, pi keeps its own
        for value, text in zip(values[:-1], (str(secret), *texts[:-1]), strict=True):
            path = Path(value)
            assert path.parent == Path(prompt_dir)
            assert path.read_bytes() == text.encode()
            assert path.stat().st_mode & 0o777 == 0o600
        assert Path(prompt_dir).stat().st_mode & 0o777 == 0o700
    finally:
        shutil.rmtree(prompt_dir)
    skills = cfg("ok", skills=("/srv/skills/a", "b")).argv()
    assert skills[skills.index("--skill") :][:4] == ["--skill", "/srv/skills/a", "--skill", "b"]
    assert cfg("ok").write_prompts() is None
    assert cfg("ok", system_prompt="").write_prompts() is None


@pytest.mark.anyio
async def test_the_bridge_removes_its_prompt_files_once_pi_is_gone() -> None:
    """The prompt pi reads is the bridge's private file, and the file goes with the bridge."""
    async with Bridge(cfg("ok", system_prompt="be kind")) as b:
        argv = (await b.get_state())["argv"]
        path = anyio.Path(argv[argv.index("--system-prompt") + 1])
        assert await path.read_text() == "be kind"
    assert not await path.parent.exists()
