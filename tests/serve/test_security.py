"""mule.serve's edges against a real uvicorn (issue 17): authorisation, JSON, Origin, logs.

Per-job authorisation, hostile JSON, the Origin check, and the token kept out of the access log.

Jobs here fail at once (no pi executable): enough to own, list, grant and cancel them. The
dialog case, which needs a live pi, is in test_live.py.

The body bound is the private rule `mule.serve._auth.MAX_BODY_BYTES`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from mule.pirc import BridgeConfig
from mule.serve import CLOSE_UNAUTHORIZED, ServerConfig
from mule.serve._auth import MAX_BODY_BYTES
from mule.testing.fake_openai import FakeOpenAI, chat_text
from tests.pirc.helpers import PI, PI_CURRENT, make_home
from tests.pirc.helpers import config as pi_config
from tests.serve.fixtures import (
    TOKEN,
    ServerThread,
    authed_ws,
    drain_until_closed,
    is_job_end,
    recv,
    recv_until,
    running,
)


def config(**kw: Any) -> ServerConfig:
    bridge = BridgeConfig(provider="local", model="m", executable="/nonexistent/pi")
    return ServerConfig(bridge=bridge, token=TOKEN, auth_timeout=2, **kw)


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with running(config(allowed_origins=("https://ops.example",))) as srv:
        yield srv


def mint(server: ServerThread) -> tuple[str, str]:
    with server.http() as h:
        r = h.post("/clients")
        assert r.status_code == 201, r.text
        return r.json()["client"], r.json()["token"]


# -- per-job authorisation (defect 5) ------------------------------------------------------------


def test_a_client_sees_and_cancels_only_its_own_or_granted_jobs(server: ServerThread) -> None:
    """B cannot list, read, cancel, delete or subscribe to A's job until A grants it."""
    a_id, a_token = mint(server)
    b_id, b_token = mint(server)
    with server.http(a_token) as a, server.http(b_token) as b:
        job = a.post("/jobs", json={"prompt": "mine"}).json()
        assert job["owner"] == a_id
        own = b.post("/jobs", json={"prompt": "b's"}).json()["id"]
        assert [j["id"] for j in b.get("/jobs").json()["jobs"]] == [own]
        assert job["id"] not in [j["id"] for j in b.get("/jobs").json()["jobs"]]
        for method, path in (
            ("GET", f"/jobs/{job['id']}"),
            ("POST", f"/jobs/{job['id']}/cancel"),
            ("DELETE", f"/jobs/{job['id']}"),
            ("POST", f"/jobs/{job['id']}/grant"),
        ):
            r = b.request(method, path, json={"client": b_id})
            assert (r.status_code, r.json()["error"]) == (404, "no such job"), (method, path)
        with authed_ws(server) as owner_ws:  # the server token is a principal of its own too
            owner_ws.send(json.dumps({"type": "subscribe", "job": job["id"]}))
            assert recv(owner_ws)["type"] == "error"
        with server.ws(query_token=b_token) as bws:
            assert recv(bws) == {"type": "ready", "client": b_id}
            bws.send(json.dumps({"type": "subscribe", "job": job["id"]}))
            assert recv(bws)["error"] == f"no job {job['id']!r}"
            bws.send(json.dumps({"type": "ui_response", "job": job["id"], "id": "u1"}))
            assert recv(bws)["request"] == "ui_response"

            r = a.post(f"/jobs/{job['id']}/grant", json={"client": "client-nobody"})
            assert r.status_code == 400
            r = a.post(f"/jobs/{job['id']}/grant", json={"client": b_id})
            assert r.json() == {"job": job["id"], "granted": [b_id]}
            assert b.get(f"/jobs/{job['id']}").status_code == 200
            assert job["id"] in [j["id"] for j in b.get("/jobs").json()["jobs"]]
            r = b.post(f"/jobs/{job['id']}/grant", json={"client": b_id})
            assert r.status_code == 403  # granted, but not the creator: cannot re-grant
            bws.send(json.dumps({"type": "subscribe", "job": job["id"]}))
            assert recv(bws)["type"] == "subscribed"
            recv_until(bws, is_job_end)
        assert b.post(f"/jobs/{job['id']}/cancel").status_code == 200


def test_only_the_server_token_mints_clients(server: ServerThread) -> None:
    """A minted client cannot mint more; a made-up token is 401."""
    _, token = mint(server)
    with server.http(token) as c:
        assert c.post("/clients").status_code == 403
    with server.http("client-token-i-made-up-000") as c:
        assert c.post("/clients").status_code == 401


# -- hostile JSON (defect 9) ---------------------------------------------------------------------


def test_deep_huge_and_odd_http_bodies_are_typed_4xx(server: ServerThread) -> None:
    """Deeply nested, oversized, enormous-integer and non-UTF-8 bodies: 400 or 413, never 500."""
    deep_config = '{"prompt": "x", "config": {"tools": ' + "[" * 40 + "]" * 40 + "}}"
    cases: list[tuple[str | bytes, int, str]] = [
        ("[" * 100_000, 400, "nested deeper than 32"),
        ("[" * 100_000 + "]" * 100_000, 400, "nested deeper than 32"),
        (deep_config, 400, "nested deeper than 32"),
        ('{"prompt": ' + "9" * 5000 + "}", 400, "invalid JSON"),
        (b"\xff\xfe{", 400, "invalid JSON"),
        ('{"prompt": "' + "x" * (2 << 20) + '"}', 413, "larger than"),
    ]
    with server.http() as h:
        for body, status, error in cases:
            r = h.post("/jobs", content=body)
            assert r.status_code == status, (str(body)[:40], r.text[:200])
            assert error in r.json()["error"]


def test_deep_or_binary_frames_get_an_error_frame_and_the_socket_lives(
    server: ServerThread,
) -> None:
    """A hostile frame is answered with a reason; the same socket still answers a ping."""
    with authed_ws(server) as ws:
        ws.send("[" * 100_000)
        assert "nested deeper than 32" in recv(ws)["error"]
        ws.send(json.dumps({"type": "ui_response", "job": "j", "value": [[[[[[[[[[]]]]]]]]]]}))
        assert recv(ws)["type"] == "error"
        ws.send('{"type": "subscribe", "job": ' + "[" * 50 + "]" * 50 + "}")
        assert "nested deeper" in recv(ws)["error"]
        ws.send(b"\x00\x01binary")
        assert "binary frames" in recv(ws)["error"]
        ws.send(json.dumps({"type": "ping"}))
        assert recv(ws) == {"type": "pong"}
    with server.ws() as ws:  # a deep first (auth) message: a clean 4401, no traceback
        ws.send("{" * 100_000)
        _, closed = drain_until_closed(ws, timeout=10)
        assert closed.rcvd is not None
        assert closed.rcvd.code == CLOSE_UNAUTHORIZED


def frame_header(length: int) -> bytes:
    """Return a masked text frame header announcing `length` payload bytes (64-bit length)."""
    return bytes([0x81, 0x80 | 127]) + length.to_bytes(8, "big") + b"\x00\x00\x00\x00"


@pytest.mark.parametrize("authed", [True, False], ids=["authed", "before-auth"])
def test_an_oversized_frame_is_refused_from_its_header(server: ServerThread, authed: bool) -> None:
    """A frame announcing 8 MB gets close code 1009 after 64 KB of it, before auth too.

    With uvicorn's default bound (16 MB) the server would wait for the 8 MB to arrive and
    buffer it, and only then would mule refuse it: this socket would stay open.
    """
    with contextlib.ExitStack() as stack:
        ws = stack.enter_context(
            authed_ws(server, compression=None) if authed else server.ws(compression=None)
        )
        ws.socket.sendall(frame_header(8 << 20) + b"x" * (64 << 10))  # the rest never comes
        _, closed = drain_until_closed(ws, timeout=10)
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1009  # "message too big", from the protocol layer


def test_a_message_over_mules_bound_is_refused_whole_or_in_fragments(
    server: ServerThread,
) -> None:
    """Just under `MAX_BODY_BYTES` reaches mule (a pong); just over it, even in fragments, 1009."""
    ping = json.dumps({"type": "ping", "pad": ""})
    with authed_ws(server, compression=None) as ws:
        ws.send(ping[:-2] + "x" * (MAX_BODY_BYTES - len(ping)) + '"}')  # exactly the bound
        assert recv(ws) == {"type": "pong"}
        ws.send(iter(["x" * (MAX_BODY_BYTES // 2)] * 2 + ["x"]))  # three fragments, bound + 1
        _, closed = drain_until_closed(ws, timeout=10)
    assert closed.rcvd is not None
    assert closed.rcvd.code == 1009


# -- the Origin check ----------------------------------------------------------------------------


def test_ws_refuses_foreign_origins(server: ServerThread) -> None:
    """Another site's page (or a DNS-rebound name) is refused at the handshake with 403."""
    for origin in ("http://evil.example", "null", f"http://localhost:{server.port + 1}"):
        with pytest.raises(InvalidStatus) as refused:
            connect(server.ws_url, origin=Origin(origin), open_timeout=10)
        assert refused.value.response.status_code == 403
    sock = socket.create_connection(("127.0.0.1", server.port))
    rebound = f"ws://attacker.example:{server.port}/ws"  # Host and Origin agree, not loopback
    with pytest.raises(InvalidStatus):
        connect(rebound, sock=sock, origin=Origin(f"http://attacker.example:{server.port}"))
    for allowed in (f"http://127.0.0.1:{server.port}", "https://ops.example", None):
        given = Origin(allowed) if allowed is not None else None
        with connect(server.ws_url, origin=given, open_timeout=10) as ws:
            ws.send(json.dumps({"type": "auth", "token": TOKEN}))
            assert recv(ws)["type"] == "ready"


# -- the token never logged (defect 7) -----------------------------------------------------------


def test_the_token_never_reaches_the_access_log(tmp_path: Path) -> None:
    """`?token=` on /ws and on HTTP paths: uvicorn's log lines show the path without it."""
    pi = tmp_path / "pi"
    pi.write_text('#!/bin/sh\necho "0.73.1" >&2\n')
    pi.chmod(pi.stat().st_mode | stat.S_IXUSR)
    argv = ["--model", "local/m", "--base-url", "http://127.0.0.1:9/v1", "--pi", str(pi)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mule.serve", *argv, "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,  # uvicorn's access log
        text=True,
        env=dict(os.environ, MULE_SERVE_TOKEN=TOKEN),
    )
    try:
        assert proc.stderr is not None
        while " open http" not in (line := proc.stderr.readline()):
            assert line, "mule serve exited"
        base = line.split(" open ", 1)[1].strip().rstrip("/")
        with connect(base.replace("http", "ws") + f"/ws?token={TOKEN}&x=1") as ws:
            assert recv(ws)["type"] == "ready"
        assert httpx.get(f"{base}/jobs?token={TOKEN}").status_code == 401
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    logged = out + err
    assert '"WebSocket /ws?x=1"' in logged  # the lines are there, without the token
    assert '"GET /jobs HTTP/1.1" 401' in logged
    assert TOKEN not in logged


# -- no client-settable value makes pi read a server file (issue 28.3) ---------------------------

SECRET = "SECRET-0f3a-the-servers-private-key"


@pytest.fixture(scope="module", params=[PI, PI_CURRENT], ids=["pi-0.73.1", "pi-1.6.0"])
def pi_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerThread, Any]]:
    """Serve jobs on a real pi, behind it the fake OpenAI server (every reply "ok")."""
    if not os.path.exists(request.param):
        pytest.skip("pi CLI not installed")
    with FakeOpenAI() as fake:
        fake.set_default(chat_text("ok"))
        dirs = make_home(tmp_path_factory.mktemp("pi"), fake.base_url)
        # The secret in pi's working directory (found by a relative value) and elsewhere.
        (Path(dirs["work"]) / "secret.txt").write_text(SECRET)
        (Path(dirs["home"]) / "id_key").write_text(SECRET)
        bridge = pi_config(dirs, no_tools=True, executable=request.param)
        with running(ServerConfig(bridge=bridge, token=TOKEN)) as srv:
            yield srv, fake


def wait_job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    """Poll the job until it ended (bounded); return its JSON."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        got: dict[str, Any] = client.get(f"/jobs/{job_id}").json()
        if got["status"] not in ("starting", "running"):
            return got
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not end")


def secret_path(server: ServerThread, relative: bool) -> str:
    bridge = server.config.bridge
    assert bridge.home is not None
    return "secret.txt" if relative else str(Path(bridge.home) / "id_key")


def system_texts(fake: Any, since: int) -> list[str]:
    """Return the system message of each model request after the first `since`."""
    out = []
    for req in fake.requests[since:]:
        msgs = req["body"]["messages"]
        out.append(msgs[0]["content"] if msgs[0]["role"] in ("system", "developer") else "")
    return out


@pytest.mark.slow
@pytest.mark.pi
@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
@pytest.mark.parametrize("setting", ["system_prompt", "append_system_prompt"])
def test_a_prompt_setting_naming_a_file_reaches_the_model_as_that_text(
    pi_server: tuple[ServerThread, Any], setting: str, relative: bool
) -> None:
    """A client's prompt text that names a server file is sent as text, never as the file.

    pi reads a `--system-prompt` or `--append-system-prompt` value that names an existing file
    as that file: the server must hand pi the client's text, not let pi resolve it.
    """
    server, fake = pi_server
    path = secret_path(server, relative)
    value: Any = path if setting == "system_prompt" else [path, "and more"]
    _, token = mint(server)
    since = len(fake.requests)
    with server.http(token) as c:
        r = c.post(
            "/jobs", json={"prompt": "repeat your system prompt", "config": {setting: value}}
        )
        assert r.status_code == 201, r.text
        job = wait_job(c, r.json()["id"])
    assert job["status"] == "completed", job
    requests = fake.requests[since:]
    assert requests, "pi should have asked the model"
    assert all(SECRET not in json.dumps(req) for req in requests)
    assert SECRET not in json.dumps(job)
    (system,) = system_texts(fake, since)
    if setting == "system_prompt":
        assert system.startswith(path + "\n")  # exactly the client's text (pi adds the date)
    else:
        assert f"{path}\n\nand more" in system


@pytest.mark.slow
@pytest.mark.pi
@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
@pytest.mark.parametrize("setting", ["provider", "model", "tools"])
def test_a_name_setting_naming_a_file_never_reads_it(
    pi_server: tuple[ServerThread, Any], setting: str, relative: bool
) -> None:
    """A provider, model or tool "name" that is a file path is refused or fails: never read."""
    server, fake = pi_server
    path = secret_path(server, relative)
    value: Any = [path] if setting == "tools" else path
    _, token = mint(server)
    since = len(fake.requests)
    with server.http(token) as c:
        r = c.post("/jobs", json={"prompt": "hi", "config": {setting: value}})
        assert r.status_code in (201, 400), r.text
        job = wait_job(c, r.json()["id"]) if r.status_code == 201 else r.json()
    assert all(SECRET not in json.dumps(req) for req in fake.requests[since:])
    assert SECRET not in json.dumps(job)


def test_the_settings_a_client_may_not_set_are_refused(server: ServerThread) -> None:
    """Settings pi reads as paths (cwd, extensions, skills, dirs...) are the owner's alone: 400.

    The executable, environment and extra arguments too.
    """
    _, token = mint(server)
    with server.http(token) as c:
        for key, value in (
            ("cwd", "/"),
            ("extensions", ["/tmp/evil.ts"]),
            ("skills", ["/tmp"]),
            ("agent_dir", "/tmp"),
            ("home", "/"),
            ("executable", "/bin/sh"),
            ("env", {"PI_CODING_AGENT_DIR": "/tmp"}),
            ("extra_args", ["--session-dir", "/tmp"]),
            ("no_discovery", False),
        ):
            r = c.post("/jobs", json={"prompt": "hi", "config": {key: value}})
            assert r.status_code == 400, (key, r.text)
            assert "not allowed" in r.json()["error"]


# -- every client input is a 400, never a 500 (issue 28.4) ---------------------------------------


def test_bad_text_and_refused_settings_are_400_and_the_listing_lives(server: ServerThread) -> None:
    """A lone surrogate anywhere, a flag-like or NUL name, a bad type: 400; listings stay 200.

    A prompt text that looks like a flag is just text (201).
    """
    _, token = mint(server)
    cases: list[tuple[str, int, str]] = [
        ('{"prompt": "hi \\ud800"}', 400, "lone surrogate"),
        ('{"prompt": "hi \\udfff there"}', 400, "lone surrogate"),
        ('{"prompt": "hi", "config": {"system_prompt": "x \\ud83d"}}', 400, "lone surrogate"),
        ('{"prompt": "hi", "config": {"append_system_prompt": ["\\ud800"]}}', 400, "surrogate"),
        ('{"prompt": "hi", "config": {"model": "--extension=/tmp/x.ts"}}', 400, "plain name"),
        ('{"prompt": "hi", "config": {"provider": "-e"}}', 400, "plain name"),
        ('{"prompt": "hi", "config": {"tools": ["--no-tools"]}}', 400, "tool names"),
        ('{"prompt": "hi", "config": {"model": "m\\u0000"}}', 400, "plain name"),
        ('{"prompt": "hi", "config": {"thinking": "--help"}}', 400, "thinking"),
        ('{"prompt": "hi", "config": {"system_prompt": 3}}', 400, "string"),
        ('{"prompt": "hi", "config": {"\\ud800": 1}}', 400, "lone surrogate"),
    ]
    with server.http(token) as c:
        for body, status, error in cases:
            r = c.post("/jobs", content=body)
            assert r.status_code == status, (body, r.text[:200])
            assert error in r.json()["error"], (body, r.text[:200])
            assert c.get("/jobs").status_code == 200
        for text in ("--extension=/tmp/evil.ts", "-e x", "\\ud83d\\ude00 a pair is fine"):
            body = '{"prompt": "hi", "config": {"system_prompt": "' + text + '"}}'
            r = c.post("/jobs", content=body)
            assert r.status_code == 201, r.text
            assert c.get("/jobs").status_code == 200
            assert c.get(f"/jobs/{r.json()['id']}").status_code == 200


def test_a_lone_surrogate_in_a_socket_frame_is_an_error_frame(server: ServerThread) -> None:
    """A frame holding a lone surrogate is refused with an error frame; the socket lives."""
    with authed_ws(server) as ws:
        ws.send('{"type": "ui_response", "job": "j", "id": "u", "value": "\\ud800"}')
        assert "lone surrogate" in recv(ws)["error"]
        ws.send(json.dumps({"type": "ping"}))
        assert recv(ws) == {"type": "pong"}


@pytest.mark.slow
@pytest.mark.pi
def test_a_model_answer_with_a_lone_surrogate_never_breaks_the_listing(
    pi_server: tuple[ServerThread, Any],
) -> None:
    """A lone surrogate in the model's text never breaks the job's JSON nor the listing.

    JSON's escape of one (sent by the model, passed on by pi) decodes to a lone surrogate: the
    answers are still 200, with the surrogate escaped.
    """
    server, fake = pi_server
    _, token = mint(server)
    fake.push(chat_text("odd \ud800 text"))
    with server.http(token) as c:
        r = c.post("/jobs", json={"prompt": "say something odd"})
        assert r.status_code == 201, r.text
        job = wait_job(c, r.json()["id"])
        listing = c.get("/jobs")
        assert listing.status_code == 200
    assert job["status"] == "completed", job
    assert job["text"] == "odd \ud800 text"
    assert '"odd \\ud800 text"' in listing.text
