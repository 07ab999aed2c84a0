"""Real MCP servers for the tests: the SDK's server over stdio and over streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from attrs import frozen

HERE = Path(__file__).resolve().parent
SERVER = str(HERE / "server.py")
RAW = str(HERE / "raw_server.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@frozen
class HttpServer:
    url: str
    process: subprocess.Popen[bytes]
    marker: Path


def start_http(marker: Path) -> HttpServer:
    """Start the test server under uvicorn on 127.0.0.1 and wait until it accepts connections."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)],
        env={"MULE_TEST_MARKER": str(marker), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the HTTP MCP server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return HttpServer(f"http://127.0.0.1:{port}/mcp", process, marker)
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the HTTP MCP server did not start within 30 s")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """Return the file the server notes what it saw in (`slow cancelled`, ...)."""
    return tmp_path / "marker.txt"


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One HTTP server shared by a module's tests (each own server is ~1 s of start-up)."""
    server = start_http(tmp_path_factory.mktemp("mcp-http") / "marker.txt")
    try:
        yield server
    finally:
        stop(server.process)


@pytest.fixture
def own_http_server(marker: Path) -> Iterator[HttpServer]:
    """Start an HTTP server for one test (one that kills it)."""
    server = start_http(marker)
    try:
        yield server
    finally:
        stop(server.process)
