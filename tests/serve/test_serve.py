"""mule.serve without pi: the slow-client queue policy, wire forms, config and auth.

The HTTP and WebSocket tests run a REAL uvicorn on 127.0.0.1 (in a thread) and talk to it with
httpx and the `websockets` client. Tests that start pi are in test_live.py.

Also tests the private rules `mule.serve._jobs.job_config` and `mule.serve._wire`'s frames
(`encode_event`, `control`, `bridge_event_to_wire`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.effects import MessageUpdate, MuleIdentity
from mule.pi import ZERO_USAGE, AssistantMessage, TextContent, TextDeltaEvent
from mule.pirc import (
    AgentEnd,
    AgentSettled,
    BashExecutionUpdate,
    BridgeConfig,
    BridgeEvent,
    EntryAppended,
    ExtensionUIRequest,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
)
from mule.serve import (
    CLOSE_UNAUTHORIZED,
    ClientQueue,
    JobRequestError,
    ServerConfig,
    is_loopback,
    main,
)
from mule.serve._jobs import job_config
from mule.serve._wire import Frame, bridge_event_to_wire, control, encode_event
from tests.pirc.helpers import pi_available
from tests.serve.fixtures import (
    TOKEN,
    ServerThread,
    TextView,
    authed_ws,
    drain_until_closed,
    is_job_end,
    recv,
    recv_until,
    running,
)

RUN = MuleIdentity("run", "run:1")
TURN = MuleIdentity("turn", "turn:1", RUN)


def bridge_cfg(**kw: Any) -> BridgeConfig:
    base: dict[str, Any] = {"provider": "local", "model": "m", "executable": "/nonexistent/pi"}
    base.update(kw)
    return BridgeConfig(**base)


def server_cfg(**kw: Any) -> ServerConfig:
    return ServerConfig(bridge=bridge_cfg(), token=TOKEN, **kw)


# -- frames ------------------------------------------------------------------------------------


def assistant(text: str) -> AssistantMessage:
    content = (TextContent(text),) if text else ()
    return AssistantMessage(content, "openai-completions", "local", "m", ZERO_USAGE, "stop", 0)


class Stream:
    """Makes real `message_update` frames for messages whose text grows by deltas."""

    def __init__(self) -> None:
        self.seq = 0
        self.text: dict[str, str] = {}

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def delta(self, mid: str, piece: str) -> Frame:
        so_far = self.text[mid] = self.text.get(mid, "") + piece
        msg = MuleIdentity("message", mid, TURN)
        ev = MessageUpdate(
            RUN,
            TURN,
            msg,
            assistant(so_far),
            TextDeltaEvent(content_index=0, delta=piece, partial=assistant(so_far)),
        )
        return encode_event("job-1", self._next(), ev)

    def lifecycle(self, kind: str, **fields: Any) -> Frame:
        return control("job-1", self._next(), kind, **fields)


def delivered(frame: Frame) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(frame.text)
    return data


def test_full_queue_coalesces_deltas_into_one_snapshot() -> None:
    """A full queue of one message's deltas collapses into one snapshot of the whole text."""
    s = Stream()
    q = ClientQueue(capacity=3, max_bytes=1 << 20)
    for piece in ("a", "b", "c", "d", "e"):
        q.offer(s.delta("m1", piece))
    frames = [delivered(f)["event"] for f in iter(q.pop, None)]
    # "d" found a b c queued: they went, and "d" travelled as a snapshot of everything so far
    assert len(frames) == 2
    assert frames[0]["value"]["content"] == [{"type": "text", "text": "abcd"}]
    assert frames[0]["event"]["delta"] == "d"
    assert "value" not in frames[1]
    assert frames[1]["event"]["delta"] == "e"
    assert q.stats.coalesced == 3
    assert q.stats.dropped == 0


def test_lifecycle_evicts_deltas_then_disconnects_a_hopeless_client() -> None:
    """Lifecycle frames push deltas out; a queue full of lifecycle frames is an overflow."""
    s = Stream()
    reasons: list[str] = []
    q = ClientQueue(capacity=2, max_bytes=1 << 20, on_overflow=reasons.append)
    q.offer(s.delta("m1", "x"))
    q.offer(s.lifecycle("message_end"))
    q.offer(s.lifecycle("turn_end"))  # evicts the delta
    assert [f.kind for f in q._live] == ["message_end", "turn_end"]
    assert q.stats.dropped == 1
    assert not reasons
    q.offer(s.lifecycle("run_end"))  # nothing left to drop
    assert len(reasons) == 1
    assert reasons == [q.overflow]
    assert "client too slow" in reasons[0]
    assert q.pop() is None  # an overflowed client gets nothing more


def test_a_dropped_delta_makes_the_next_update_a_snapshot() -> None:
    """When a delta is dropped outright, the message's next update resynchronises the client."""
    s = Stream()
    q = ClientQueue(capacity=1, max_bytes=1 << 20)
    q.offer(s.lifecycle("tool_execution_end"))
    q.offer(s.delta("m1", "lost"))  # the queue holds only lifecycle: dropped
    assert q.stats.dropped == 1
    assert delivered(q.pop() or s.lifecycle("x"))["type"] == "tool_execution_end"
    q.offer(s.delta("m1", "!"))
    frame = delivered(q.pop() or s.lifecycle("x"))
    assert frame["event"]["value"]["content"] == [{"type": "text", "text": "lost!"}]


def test_byte_budget_counts_like_capacity() -> None:
    """A lifecycle frame that does not fit the byte budget evicts deltas, then overflows."""
    s = Stream()
    start, delta = s.lifecycle("message_start"), s.delta("m1", "y")
    end = s.lifecycle("message_end")
    turn_end = s.lifecycle("turn_end", pad="x" * delta.size)  # bigger than the delta was
    q = ClientQueue(capacity=100, max_bytes=start.size + delta.size + end.size - 1)
    q.offer(start)
    q.offer(delta)
    assert len(q) == 2
    q.offer(end)  # over budget: the delta goes
    assert q.stats.dropped == 1
    assert q.overflow is None
    assert [f.kind for f in q._live] == ["message_start", "message_end"]
    q.offer(turn_end)
    assert q.overflow is not None


@st.composite
def scripts(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Interleavings of message lifecycles, deltas and client reads."""
    ops: list[tuple[str, str]] = []
    for m in range(draw(st.integers(1, 4))):
        mid = f"m{m}"
        ops.append(("start", mid))
        for piece in draw(st.lists(st.text("abc", min_size=1, max_size=3), max_size=12)):
            ops.append(("delta", piece))
            ops.extend(("read", "") for _ in range(draw(st.integers(0, 2))))
        ops.append(("end", mid))
        ops.extend(("read", "") for _ in range(draw(st.integers(0, 3))))
    return ops


@given(script=scripts(), capacity=st.integers(1, 6))
def test_policy_never_loses_lifecycle_and_text_is_always_a_prefix(
    script: list[tuple[str, str]], capacity: int
) -> None:
    """Lifecycle arrives whole and in order (or the client is cut off); rebuilt text is a prefix.

    Whatever the reads, the text a client rebuilds from deltas and snapshots is always a prefix
    of the truth, and whole at each message's end when nothing was dropped outright.
    """
    s = Stream()
    q = ClientQueue(capacity=capacity, max_bytes=1 << 20)
    view = TextView()
    offered: list[int] = []
    got: list[int] = []
    ends: list[tuple[str, str]] = []  # (streamed, truth) when each end frame was read
    current = ""

    def read() -> bool:
        f = q.pop()
        if f is None:
            return False
        data = delivered(f)
        if data["type"] == "event":
            view.apply(data["event"])
        else:
            got.append(data["seq"])
            if data["type"] == "end":
                ends.append((view.streamed(data["mid"]), s.text.get(data["mid"], "")))
        for mid, text in s.text.items():
            assert text.startswith(view.streamed(mid))
        return True

    for op, arg in script:
        if op == "start":
            current = arg
            f = s.lifecycle("start", mid=arg)
        elif op == "delta":
            f = s.delta(current, arg)
        elif op == "end":
            f = s.lifecycle("end", mid=arg)
        else:
            read()
            continue
        if not f.droppable:
            offered.append(f.seq)
        q.offer(f)
    while read():
        pass
    if q.overflow is None:
        assert got == offered
    else:
        assert got == offered[: len(got)]
    if q.stats.dropped == 0 and q.overflow is None:
        assert all(streamed == truth for streamed, truth in ends)


# -- wire ------------------------------------------------------------------------------------


def test_bridge_events_have_a_camel_case_json_form() -> None:
    """Pass-through events become JSON with camelCase keys; UI requests say if they wait."""
    ev = ExtensionUIRequest(
        run=RUN, id="u1", method="select", data={"title": "Pick", "options": ["a", "b"]}
    )
    assert bridge_event_to_wire(ev) == {
        "type": "extension_ui_request",
        "run": {"kind": "run", "value": "run:1"},
        "id": "u1",
        "method": "select",
        "data": {"title": "Pick", "options": ["a", "b"]},
        "expectsAnswer": True,
    }


def test_every_pass_through_event_has_a_json_form() -> None:
    """Pi 1.6.0's new events encode too (typed, camelCase), whether forwarded or not."""
    events: list[BridgeEvent] = [
        AgentSettled(run=RUN, aborted=True),
        EntryAppended(run=None, entry={"type": "context_edit", "id": "e1"}),
        BashExecutionUpdate(run=None, id="b1", delta="out\n"),
        SummarizationRetryScheduled(
            run=RUN, attempt=1, max_attempts=3, delay_ms=20, error_message="503"
        ),
        SummarizationRetryAttemptStart(run=RUN, source="compaction", reason="threshold"),
        SummarizationRetryFinished(run=RUN),
        AgentEnd(run=RUN, messages=(), will_retry=True),
    ]
    wires = [bridge_event_to_wire(ev) for ev in events]
    assert [w["type"] for w in wires] == [ev.type for ev in events]
    assert wires[0]["aborted"] is True
    assert wires[2] == {"type": "bash_execution_update", "run": None, "id": "b1", "delta": "out\n"}
    assert wires[3]["maxAttempts"] == 3
    assert wires[6]["willRetry"] is True


def test_message_update_streams_compact_and_snapshots_in_full() -> None:
    """A streamed update has the delta but no partial; its snapshot adds the full value."""
    s = Stream()
    s.delta("m1", "hello ")
    frame = s.delta("m1", "world")
    compact = delivered(frame)["event"]
    assert compact["event"] == {"type": "text_delta", "contentIndex": 0, "delta": "world"}
    assert "value" not in compact
    assert "partial" not in json.dumps(compact)
    snap = delivered(frame.snapshot())["event"]
    assert snap["value"]["content"] == [{"type": "text", "text": "hello world"}]
    assert frame.snapshot().seq == frame.seq


# -- config ----------------------------------------------------------------------------------


def test_non_loopback_bind_is_refused_unless_allowed() -> None:
    """The server binds loopback only, unless allow_remote is set explicitly."""
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("example.org")
    with pytest.raises(ValueError, match="non-loopback"):
        server_cfg(host="0.0.0.0")
    assert server_cfg(host="0.0.0.0", allow_remote=True).host == "0.0.0.0"
    with pytest.raises(ValueError, match="16 characters"):
        ServerConfig(bridge=bridge_cfg(), token="short")


def test_main_refuses_a_public_bind(capsys: pytest.CaptureFixture[str]) -> None:
    """`mule serve --host 0.0.0.0` exits 2 with a message, without binding."""
    assert main(["--model", "local/m", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "non-loopback" in capsys.readouterr().err


def test_job_overrides_are_limited_and_validated() -> None:
    """Clients may change the model, thinking and tools, never the executable or environment."""
    base = bridge_cfg()
    cfg = job_config(base, {"model": "other", "tools": ["read"], "thinking": "low"})
    assert (
        job_config(base, {"model": "anthropic/claude-3.5@v1:0"}).model
        == "anthropic/claude-3.5@v1:0"
    )
    assert (cfg.model, cfg.tools, cfg.thinking, cfg.executable) == (
        "other",
        ("read",),
        "low",
        base.executable,
    )
    bads: list[dict[str, Any]] = [
        {"executable": "/bin/sh"},
        {"env": {}},
        {"tools": "read"},
        {"thinking": "max"},
        {"model": "--extension=/tmp/evil.ts"},
        {"provider": "-e"},
        {"model": "m x"},
        {"tools": ["read", "--no-tools"]},
        {"tools": ["read,bash"]},
    ]
    for bad in bads:
        with pytest.raises(JobRequestError):
            job_config(base, bad)


# -- HTTP and WebSocket against a real uvicorn -----------------------------------------------


@pytest.fixture(scope="module")
def server() -> Any:
    with running(server_cfg(auth_timeout=0.5)) as srv:
        yield srv


def test_http_needs_the_bearer_token(server: ServerThread) -> None:
    """No token or a wrong one is 401 with WWW-Authenticate; the right one is served."""
    with server.http(token=None) as anon, server.http(token="wrong" * 5) as wrong:
        for client in (anon, wrong):
            r = client.get("/jobs")
            assert r.status_code == 401
            assert r.headers["www-authenticate"] == "Bearer"
            assert client.post("/jobs", json={"prompt": "x"}).status_code == 401
    with server.http() as h:
        assert h.get("/jobs").status_code == 200
        assert h.get("/jobs/job-nope").status_code == 404
        assert h.post("/jobs/job-nope/cancel").status_code == 404
        assert h.delete("/jobs/job-nope").status_code == 404


def test_bad_job_requests_are_400(server: ServerThread) -> None:
    """Bodies that are not JSON, lack a prompt, or override fixed settings are rejected."""
    with server.http() as h:
        assert h.post("/jobs", content=b"{").status_code == 400
        assert h.post("/jobs", json={"text": "x"}).status_code == 400
        assert h.post("/jobs", json={"prompt": " "}).status_code == 400
        r = h.post("/jobs", json={"prompt": "x", "config": {"executable": "/bin/sh"}})
        assert r.status_code == 400
        assert "not allowed" in r.json()["error"]


def test_page_and_script_need_no_token(server: ServerThread) -> None:
    """The static page is public (it holds no secret) and sets a restrictive CSP."""
    with server.http(token=None) as anon:
        page = anon.get("/")
        assert page.status_code == 200
        assert "/static/app.js" in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert anon.get("/static/app.js").status_code == 200


def test_ws_rejects_bad_tokens_with_4401(server: ServerThread) -> None:
    """A wrong query token, a wrong first message, or none in time: close 4401."""
    with server.ws(query_token="wrong") as ws:
        _, closed = drain_until_closed(ws, timeout=10)
        assert closed.rcvd.code == CLOSE_UNAUTHORIZED
    with server.ws() as ws:
        ws.send(json.dumps({"type": "auth", "token": "nope"}))
        _, closed = drain_until_closed(ws, timeout=10)
        assert closed.rcvd.code == CLOSE_UNAUTHORIZED
    with server.ws() as ws:
        ws.send(json.dumps({"type": "subscribe", "job": "x"}))  # not an auth message
        _, closed = drain_until_closed(ws, timeout=10)
        assert closed.rcvd.code == CLOSE_UNAUTHORIZED
    with server.ws() as ws:  # silent: auth_timeout is 0.5 s here
        _, closed = drain_until_closed(ws, timeout=10)
        assert closed.rcvd.code == CLOSE_UNAUTHORIZED
        assert closed.rcvd.reason == "unauthorized"


def test_ws_accepts_query_or_first_message_token(server: ServerThread) -> None:
    """The right token in the query or in a first auth message gets `ready`; errors are frames."""
    with server.ws(query_token=TOKEN) as ws:
        assert recv(ws)["type"] == "ready"
        ws.send("not json")
        assert recv(ws)["error"].startswith("invalid JSON")
        ws.send(json.dumps({"type": "subscribe", "job": "job-missing"}))
        err = recv(ws)
        assert (err["type"], err["request"]) == ("error", "subscribe")
        ws.send(json.dumps({"type": "ping"}))
        assert recv(ws) == {"type": "pong"}
    with authed_ws(server) as ws:
        ws.send(json.dumps({"type": "frobnicate"}))
        assert "unknown message type" in recv(ws)["error"]


def test_a_job_whose_pi_cannot_start_fails_with_a_reason(server: ServerThread) -> None:
    """A missing pi executable: the job ends failed, subscribers get job_end with the error."""
    with server.http() as h, authed_ws(server) as ws:
        r = h.post("/jobs", json={"prompt": "hello"})
        assert r.status_code == 201
        job = r.json()["id"]
        ws.send(json.dumps({"type": "subscribe", "job": job}))
        end = recv_until(ws, is_job_end)[-1]
        assert end["status"] == "failed"
        assert "could not start pi" in end["error"]
        got = h.get(f"/jobs/{job}").json()
        assert (got["status"], got["result"], got["pid"]) == ("failed", None, None)
        listed = h.get("/jobs").json()["jobs"]
        assert job in [j["id"] for j in listed]
        # a late subscriber is replayed the job's end
        ws.send(json.dumps({"type": "subscribe", "job": job, "replay": True}))
        ack = recv(ws)
        assert (ack["type"], ack["status"], ack["replayed"]) == ("subscribed", "failed", 1)
        assert is_job_end(recv(ws))
        assert h.delete(f"/jobs/{job}").status_code == 200
        assert h.get(f"/jobs/{job}").status_code == 404


@pytest.mark.slow
@pytest.mark.pi
@pytest.mark.skipif(not pi_available(), reason="pi CLI not installed")
def test_python_m_serves_until_sigterm(tmp_path: Path) -> None:
    """`python -m mule.serve` prints the URL, serves with the token, stops on SIGTERM."""
    env = dict(os.environ, MULE_SERVE_TOKEN=TOKEN)
    argv = ["--model", "local/m", "--base-url", "http://127.0.0.1:9/v1", "--port", "0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mule.serve", *argv],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert re.match(r"mule serve: pi \d+\.\d+\.\d+ \(", first), first  # checked at start-up
        line = proc.stderr.readline()
        assert line.startswith("mule serve: open http://127.0.0.1:"), line
        assert "token" not in line  # it came from the environment: not echoed
        base = line.split("open ", 1)[1].strip().rstrip("/")
        r = httpx.get(f"{base}/jobs", headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200
        assert r.json() == {"jobs": []}
        assert httpx.get(f"{base}/jobs").status_code == 401
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        # uvicorn shuts down gracefully, then re-raises the signal it caught
        assert proc.returncode in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.anyio
async def test_client_queue_wakes_its_sender() -> None:
    """`next()` waits for a frame, returns it, and returns None once the queue is closed."""
    s = Stream()
    q = ClientQueue(capacity=4, max_bytes=1 << 20)
    got: list[Frame | None] = []

    async def consume() -> None:
        while (f := await q.next()) is not None:
            got.append(f)
        got.append(None)

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.sleep(0.01)
        first = s.lifecycle("a")
        q.offer(first)
        await anyio.sleep(0.01)
        assert got == [first]
        q.close()
    assert got == [first, None]


def test_the_job_list_is_pushed_over_the_socket(server: ServerThread) -> None:
    """After `ready` a `jobs` frame; each start, status change and removal pushes a new one."""
    with authed_ws(server) as ws, server.http() as h:
        first = recv(ws, jobs=True)
        assert first["type"] == "jobs"
        known = {j["id"] for j in first["jobs"]}
        job = h.post("/jobs", json={"prompt": "listed"}).json()["id"]

        def listed(status: str) -> Any:
            return lambda f: (
                f["type"] == "jobs"
                and any(j["id"] == job and j["status"] == status for j in f["jobs"])
            )

        recv_until(ws, listed("failed"), jobs=True)  # no pi: started, then failed
        assert h.delete(f"/jobs/{job}").status_code == 200
        gone = recv_until(ws, lambda f: f["type"] == "jobs", jobs=True)[-1]
        assert {j["id"] for j in gone["jobs"]} == known - {job}
