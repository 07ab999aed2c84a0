"""`mule serve` as a user types it: every documented line run literally, against the real pi.

Each `mule serve` line in a shell block of README.md or docs/*.md is run as written (through
`bash -c`, from the repo root, `.venv/bin` on PATH as after `./dev setup`), with the fake OpenAI
server on the port its `--base-url` names; a job started with the printed token must complete.
Also here: what a job's pi can see of the server's environment (issue 17, defect 3).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from mule.serve import DEFAULT_PORT
from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, tool_call
from tests.pirc.helpers import pi_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.pi,
    pytest.mark.skipif(not pi_available(), reason="pi CLI not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "cli-test-token-0123456789"
_FENCE = re.compile(r"^```(\w*)")


def documented_lines() -> list[tuple[str, str]]:
    """Return (file, line) for each `mule serve` command in a shell block of the docs."""
    out: list[tuple[str, str]] = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lang: str | None = None
        for line in path.read_text().splitlines():
            fence = _FENCE.match(line.strip())
            if fence:
                lang = None if lang is not None else fence.group(1)
                continue
            if lang in ("sh", "bash", "console", "shell") and "mule serve" in line:
                out.append((path.name, line.strip().removeprefix("$ ")))
    return out


LINES = documented_lines()


def test_the_docs_have_serve_lines_to_run() -> None:
    """The literal-run test below cannot pass vacuously: README and docs/serve.md have lines."""
    files = {f for f, _ in LINES}
    assert {"README.md", "serve.md"} <= files, LINES


@contextmanager
def serving(argv: list[str] | str, env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """Run `mule serve` (argv, or a shell line); yield (base URL, token) from what it printed."""
    shell = isinstance(argv, str)
    proc = subprocess.Popen(
        argv,
        shell=shell,
        executable="/bin/bash" if shell else None,
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        seen: list[str] = []
        while True:
            line = proc.stderr.readline()
            assert line, f"mule serve exited ({proc.wait()}): {seen}"
            seen.append(line)
            if " open http" in line:
                break
        url = line.split(" open ", 1)[1].strip()
        base, _, fragment = url.partition("#")
        token = fragment.removeprefix("token=") or env.get("MULE_SERVE_TOKEN", "")
        yield base.rstrip("/"), token
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as a person stops it
        proc.communicate(timeout=30)
        assert proc.returncode in (0, -signal.SIGINT, 130), proc.returncode
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_job(base: str, token: str, prompt: str) -> dict[str, Any]:
    """Start a job, wait (bounded) for it to end, return it."""
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=auth, timeout=30) as h:
        r = h.post("/jobs", json={"prompt": prompt})
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            job: dict[str, Any] = h.get(f"/jobs/{job_id}").json()
            if job["status"] not in ("starting", "running"):
                return job
            time.sleep(0.1)
    raise TimeoutError(f"job {job_id} did not end")


def port_free(port: int) -> bool:
    """Whether a server could bind `port` on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def user_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MULE_", "PI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


@pytest.mark.parametrize(("file", "line"), LINES, ids=[f"{f}:{ln[:60]}" for f, ln in LINES])
def test_each_documented_serve_line_works_as_written(file: str, line: str) -> None:
    """The line starts a server; a job through it reaches the model its --base-url names."""
    words = shlex.split(line, comments=True)
    assert "--base-url" in words, f"{file}: a runnable line needs a model server: {line}"
    port = urlsplit(words[words.index("--base-url") + 1]).port
    assert port is not None
    # Run as written, so on the ports the line names (mule serve's default when it names none).
    serve_port = int(words[words.index("--port") + 1]) if "--port" in words else DEFAULT_PORT
    for wanted in (port, serve_port):
        if wanted and not port_free(wanted):
            pytest.skip(f"port {wanted} on 127.0.0.1 is taken; this line runs as written on it")
    with FakeOpenAI(port=port) as fake:
        fake.set_default(chat_text("It works as documented.", pieces=4))
        with serving(shlex.join(words), user_env()) as (base, token):
            assert token, "the generated token must be printed in the URL"
            job = run_job(base, token, "hello")
        assert (job["status"], job["error"]) == ("completed", None), job
        assert job["text"] == "It works as documented."
        assert "hello" in str(fake.requests[-1]["body"])


def test_a_jobs_pi_never_sees_the_token_or_unlisted_secrets(tmp_path: Path) -> None:
    """The bash tool's `env` shows PATH and what --pass-env allowed, never the server's token."""
    with FakeOpenAI() as fake:
        fake.push(chat_stream(calls=[tool_call("c1", "bash", {"command": "env"})]))
        fake.push(chat_text("seen"))
        env = user_env(
            MULE_SERVE_TOKEN=TOKEN,
            MULE_TEST_ALLOWED="visible-value",
            AWS_SECRET_ACCESS_KEY="not-for-pi",
            TOKEN_COPY=TOKEN,
        )
        argv = [
            *(str(Path(sys.executable).parent / "mule"), "serve", "--port", "0"),
            *("--model", "local/m", "--base-url", fake.base_url, "--tools", "bash"),
            *("--pass-env", "MULE_TEST_ALLOWED", "--cwd", str(tmp_path)),
        ]
        with serving(argv, env) as (base, token):
            assert token == TOKEN  # taken from the environment (and not printed)
            job = run_job(base, token, "show me the environment")
    assert job["status"] == "completed", job
    results = [m for m in job["result"]["messages"] if m["role"] == "toolResult"]
    shown = results[0]["content"][0]["text"]
    assert "PATH=" in shown
    assert "MULE_TEST_ALLOWED=visible-value" in shown
    assert TOKEN not in shown
    assert "MULE_SERVE_TOKEN" not in shown
    assert "not-for-pi" not in shown


def gone(pid: int) -> bool:
    """Whether `pid` has exited and been reaped (by `mule serve`, its parent)."""
    return not os.path.exists(f"/proc/{pid}")


def test_delete_and_ctrl_c_are_prompt_and_reap_pi() -> None:
    """DELETE a job while its pi starts or streams, then Ctrl-C with a job running: prompt.

    A job's pi takes seconds to start on a busy machine; stop() used to wait for it to answer
    an abort (2 s) and to read its stdin's EOF (5 s), then sent SIGTERM (5 s more). The bounds
    here are generous (the measured figures are far below, see the issue's closing note).
    """
    with FakeOpenAI() as fake:
        fake.set_default(chat_text("slow " * 100, pieces=100, delay_ms=200))  # about 20 s
        fake.push(chat_text("quick answer", pieces=2))
        argv = ["mule", "serve", "--model", "local/m", "--base-url", fake.base_url, "--port", "0"]
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=user_env(MULE_SERVE_TOKEN=TOKEN),
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            assert proc.stderr is not None
            while " open http" not in (line := proc.stderr.readline()):
                assert line, f"mule serve exited ({proc.wait()})"
            base = line.split(" open ", 1)[1].strip().partition("#")[0].rstrip("/")
            auth = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=base, headers=auth, timeout=60) as h:

                def start(until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
                    job_id = h.post("/jobs", json={"prompt": "go"}).json()["id"]
                    deadline = time.monotonic() + 90
                    job: dict[str, Any] = {}
                    while not until(job := h.get(f"/jobs/{job_id}").json()):
                        assert job["status"] in ("starting", "running"), job
                        assert time.monotonic() < deadline, job
                        time.sleep(0.02)
                    return job

                def delete(job: dict[str, Any]) -> float:
                    t0 = time.monotonic()
                    r = h.delete(f"/jobs/{job['id']}")
                    took = time.monotonic() - t0
                    print(f"DELETE took {took:.2f} s")
                    assert (r.status_code, r.json()["status"]) == (200, "cancelled"), r.text
                    assert gone(job["pid"])
                    return took

                done = start(lambda j: j["status"] == "completed")
                assert done["text"] == "quick answer"
                starting = start(lambda j: j["pid"] is not None)  # pi forked, not up yet
                assert delete(starting) < 5
                requests = len(fake.requests)
                streaming = start(lambda j: len(fake.requests) > requests)  # pi is streaming
                assert delete(streaming) < 5
                running = start(lambda j: j["pid"] is not None)
            t0 = time.monotonic()
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
            _, err = proc.communicate(timeout=30)
            took = time.monotonic() - t0
            print(f"exit after Ctrl-C took {took:.2f} s")
            assert took < 5
            assert proc.returncode == 130, err
            assert "Traceback" not in err
            assert gone(running["pid"])
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
