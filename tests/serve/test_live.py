"""mule.serve end to end, with the REAL pi CLI behind it.

A real uvicorn, real WebSocket clients, pi, and the fake OpenAI server behind pi, all on
127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mule.serve import ClientQueue, JobManager, ServerConfig, ServerJob
from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, tool_call
from tests.pirc.helpers import HERE, assert_reaped, config, make_home, pi_available
from tests.serve.fixtures import (
    TOKEN,
    Frame,
    TextView,
    authed_ws,
    drain_until_closed,
    events,
    is_job_end,
    recv_until,
    running,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.pi,
    pytest.mark.skipif(not pi_available(), reason="pi CLI not installed"),
]

EXT = str(HERE / "ui_ext.ts")
TEXT = "The quick brown fox jumps over the lazy dog, streamed token by token."


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def dirs(fake: FakeOpenAI, tmp_path: Path) -> Iterator[dict[str, str]]:
    fake.reset()
    yield make_home(tmp_path, fake.base_url)
    fake.set_default(None)


def server_config(dirs: dict[str, str], **kw: Any) -> ServerConfig:
    bridge = config(dirs, tools=("ask_user", "big_output"), extensions=(EXT,))
    return ServerConfig(bridge=bridge, token=TOKEN, **kw)


def subscribe(ws: Any, job: str) -> None:
    ws.send(json.dumps({"type": "subscribe", "job": job}))


def event_is(kind: str, sub: str | None = None) -> Any:
    def match(f: Frame) -> bool:
        if f.get("type") != "event" or f["event"]["type"] != kind:
            return False
        return sub is None or f["event"].get("event", {}).get("type") == sub

    return match


def assistant_texts(frames: list[Frame]) -> tuple[list[str], list[str]]:
    """Return (streamed, final) text of each assistant message, in order."""
    view = TextView()
    order: list[str] = []
    for ev in events(frames):
        view.apply(ev)
        if ev["type"] == "message_start" and ev["value"]["role"] == "assistant":
            order.append(ev["message"]["value"])
    return [view.streamed(m) for m in order], [view.final.get(m, "") for m in order]


def lifecycle_seqs(frames: list[Frame]) -> list[int]:
    return [
        f["seq"]
        for f in frames
        if "seq" in f and f.get("event", {}).get("type") not in ("message_update", None)
    ]


def test_one_job_streams_to_two_clients_and_a_late_joiner(
    fake: FakeOpenAI, dirs: dict[str, str]
) -> None:
    """Two clients see the whole stream; one joining mid-message gets lifecycle + partial."""
    fake.push(chat_text(TEXT, pieces=40, delay_ms=15))
    with running(server_config(dirs)) as srv, srv.http() as h:
        with authed_ws(srv) as a, authed_ws(srv) as b:
            r = h.post("/jobs", json={"prompt": "tell me"})
            assert r.status_code == 201
            job = r.json()["id"]
            subscribe(a, job)
            subscribe(b, job)
            with authed_ws(srv) as gone:  # a client that leaves at once disturbs nobody
                subscribe(gone, job)
            fa = recv_until(a, event_is("message_update", "text_delta"))
            with authed_ws(srv) as c:  # joins while the answer streams
                subscribe(c, job)
                fc = recv_until(c, is_job_end)
            fa += recv_until(a, is_job_end)
            fb = recv_until(b, is_job_end)
        for frames in (fa, fb, fc):
            assert assistant_texts(frames) == ([TEXT], [TEXT])
            kinds = [e["type"] for e in events(frames)]
            assert kinds[0] == "run_start"
            assert kinds[-1] == "run_end"
            assert frames[-1]["status"] == "completed"
            assert frames[-1]["result"]["text"] == TEXT
        assert lifecycle_seqs(fa) == lifecycle_seqs(fb) == lifecycle_seqs(fc)
        ack = next(f for f in fc if f["type"] == "subscribed")
        assert ack["replayed"] >= 4  # job_status, run_start, turn_start, the user message...
        snapshots = [e for e in events(fc) if e["type"] == "message_update" and "value" in e]
        assert snapshots, "the late joiner should get the partial answer as a snapshot"
        assert TEXT.startswith(snapshots[0]["value"]["content"][0]["text"])
        got = h.get(f"/jobs/{job}").json()
        assert (got["status"], got["result"]["outcome"]) == ("completed", "completed")
        assert got["result"]["text"] == TEXT
        assert got["result"]["message"]["stopReason"] == "stop"
        assert got["returncode"] == 0
        assert_reaped(got["pid"])
        assert "tell me" in json.dumps(fake.requests[-1]["body"])


def test_extension_dialogs_are_answered_over_the_socket(
    fake: FakeOpenAI, dirs: dict[str, str]
) -> None:
    """A confirm and a select reach every client; the first valid answer resumes the tool."""
    fake.push(chat_stream(calls=[tool_call("c1", "ask_user", {"question": "ok?"})]))
    fake.push(chat_text("asked"))
    with running(server_config(dirs)) as srv, srv.http() as h:
        with authed_ws(srv) as a, authed_ws(srv) as b:
            job = h.post("/jobs", json={"prompt": "ask me"}).json()["id"]
            subscribe(a, job)
            subscribe(b, job)
            confirm = recv_until(a, event_is("extension_ui_request"))[-1]["event"]
            assert (confirm["method"], confirm["expectsAnswer"]) == ("confirm", True)
            assert confirm["data"]["title"] == "Confirm?"
            assert recv_until(b, event_is("extension_ui_request"))[-1]["event"] == confirm
            assert h.get(f"/jobs/{job}").json()["pendingUi"] == [confirm["id"]]

            def answer(ws: Any, req: dict[str, Any], **fields: Any) -> None:
                ws.send(json.dumps({"type": "ui_response", "job": job, "id": req["id"], **fields}))

            answer(a, confirm, value="yes")  # a confirm needs confirmed=
            err = recv_until(a, lambda f: f["type"] == "error")[-1]
            assert "confirmed" in err["error"]
            answer(a, confirm, confirmed=True)
            resolved = recv_until(b, lambda f: f["type"] == "ui_resolved")[-1]
            assert (resolved["id"], resolved["answer"]) == (confirm["id"], {"confirmed": True})
            answer(b, confirm, confirmed=False)  # too late: a answered first
            assert "no open dialog" in recv_until(b, lambda f: f["type"] == "error")[-1]["error"]

            select = recv_until(a, event_is("extension_ui_request"))[-1]["event"]
            assert (select["method"], select["data"]["options"]) == ("select", ["red", "green"])
            answer(a, select, value="purple")
            assert "not one of" in recv_until(a, lambda f: f["type"] == "error")[-1]["error"]
            answer(a, select, value="green")
            end = recv_until(a, is_job_end)[-1]
            recv_until(b, is_job_end)
        assert end["status"] == "completed"
        assert end["result"]["text"] == "asked"
        tool_results = [m for m in end["result"]["messages"] if m["role"] == "toolResult"]
        assert tool_results[0]["content"][0]["text"] == "confirmed=true pick=green"
        assert h.get(f"/jobs/{job}").json()["pendingUi"] == []


def test_cancel_and_delete_stop_and_reap_pi(fake: FakeOpenAI, dirs: dict[str, str]) -> None:
    """POST cancel ends a streaming job as cancelled; DELETE also forgets it; no zombie pi."""
    fake.set_default(chat_stream(text="this never finishes", pieces=3, then="stall"))
    with running(server_config(dirs)) as srv, srv.http() as h, authed_ws(srv) as ws:
        job = h.post("/jobs", json={"prompt": "go"}).json()["id"]
        subscribe(ws, job)
        recv_until(ws, event_is("message_update", "text_delta"))
        r = h.post(f"/jobs/{job}/cancel")
        assert r.status_code == 200
        got = r.json()
        assert got["status"] == "cancelled"
        assert got["result"]["outcome"] == "cancelled"
        assert got["result"]["message"]["stopReason"] == "aborted"
        assert_reaped(got["pid"])
        end = recv_until(ws, is_job_end)[-1]
        assert end["status"] == "cancelled"
        assert h.post(f"/jobs/{job}/cancel").json()["status"] == "cancelled"  # idempotent

        other = h.post("/jobs", json={"prompt": "again"}).json()["id"]
        subscribe(ws, other)
        recv_until(ws, event_is("message_start"))
        r = h.delete(f"/jobs/{other}")
        assert r.status_code == 200
        assert r.json()["status"] == "cancelled"
        assert_reaped(r.json()["pid"])
        assert h.get(f"/jobs/{other}").status_code == 404
        assert [j["id"] for j in h.get("/jobs").json()["jobs"]] == [job]


def test_a_client_that_never_reads_is_cut_off_without_slowing_the_job(
    fake: FakeOpenAI, dirs: dict[str, str]
) -> None:
    """A stuck client: the job and a normal client go on; the stuck one gets close 4008."""
    # ~4 MB of tool output (it appears in four events) fills the socket buffers of the stuck
    # client; the ~35 lifecycle events of the next turn's eight small tool calls then overflow
    # its queue of 16.
    big = tool_call("c1", "big_output", {"size": 1_000_000})
    small = [tool_call(f"s{i}", "big_output", {"size": 10}) for i in range(8)]
    fake.push(chat_stream(text="x" * 400, pieces=100, calls=[big]))
    fake.push(chat_stream(calls=small))
    fake.push(chat_text("done " * 100, pieces=100))
    with running(server_config(dirs, client_queue=16, close_timeout=30)) as srv, srv.http() as h:
        # no compression, a tiny receive buffer: what the server sends really piles up
        with (
            authed_ws(srv, rcvbuf=4096, compression=None) as stuck,
            authed_ws(srv, compression=None) as ok,
        ):
            job = h.post("/jobs", json={"prompt": "big"}).json()["id"]
            subscribe(stuck, job)
            subscribe(ok, job)
            frames = recv_until(ok, is_job_end)
            assert frames[-1]["status"] == "completed"
            assert assistant_texts(frames)[0] == ["x" * 400, "", "done " * 100]
            got = h.get(f"/jobs/{job}").json()
            assert got["slowDisconnects"] == 1
            assert got["clients"] == 1
            seen, closed = drain_until_closed(stuck)
        assert closed.rcvd is not None
        assert closed.rcvd.code == 4008
        assert closed.rcvd.reason.startswith("client too slow")
        assert not any(is_job_end(f) for f in seen)  # it was cut off before the end


@pytest.mark.anyio
async def test_job_manager_runs_cancels_and_reaps_on_this_loop(
    fake: FakeOpenAI, dirs: dict[str, str]
) -> None:
    """The job manager (no HTTP) on asyncio and trio: a job, a cancel, a shutdown mid-job."""
    fake.push(chat_text("managed", pieces=5))
    async with JobManager(server_config(dirs)) as manager:
        job = manager.start("hi")
        q = ClientQueue(capacity=64, max_bytes=1 << 20)
        q.push_front(job.attach(q))
        kinds: list[str] = []
        with anyio.fail_after(30):
            while (f := await q.next()) is not None:
                data = json.loads(f.text)
                kinds.append(data["event"]["type"] if data["type"] == "event" else data["type"])
                if data["type"] == "job_end":
                    break
        assert kinds[0] == "job_status"
        assert kinds[-2:] == ["run_end", "job_end"]
        assert job.status == "completed"
        assert job.result is not None
        assert job.result.text == "managed"
        assert_reaped(job.pid)

        fake.set_default(chat_stream(text="stuck", then="stall"))
        stuck = manager.start("again")
        await until_running(stuck)
        await manager.cancel(stuck, wait=30)
        assert stuck.status == "cancelled"
        assert_reaped(stuck.pid)
        last = manager.start("left running at shutdown")
        await until_running(last)
    assert last.status == "cancelled"
    assert last.finished
    assert_reaped(last.pid)


async def until_running(job: ServerJob) -> None:
    q = ClientQueue(capacity=64, max_bytes=1 << 20)
    q.push_front(job.attach(q))
    with anyio.fail_after(30):
        while (f := await q.next()) is not None and f.kind != "job_status":
            pass
    job.detach(q)


def test_another_clients_dialog_cannot_be_seen_or_answered(
    fake: FakeOpenAI, dirs: dict[str, str]
) -> None:
    """Issue 17 defect 5: B neither lists nor answers A's open dialog; unsubscribed A cannot."""
    fake.push(chat_stream(calls=[tool_call("c1", "ask_user", {"question": "ok?"})]))
    fake.push(chat_text("asked"))
    with running(server_config(dirs)) as srv, srv.http() as h:
        (a_id, a_token), (_, b_token) = (
            tuple(h.post("/clients").json().values()) for _ in range(2)
        )
        with srv.http(a_token) as a, srv.http(b_token) as b:
            job = a.post("/jobs", json={"prompt": "ask me"}).json()["id"]
            with srv.ws(query_token=a_token) as aws, srv.ws(query_token=b_token) as bws:
                recv_until(aws, lambda f: f["type"] == "ready")
                recv_until(bws, lambda f: f["type"] == "ready")
                subscribe(aws, job)
                confirm = recv_until(aws, event_is("extension_ui_request"))[-1]["event"]
                assert b.get("/jobs").json()["jobs"] == []
                answer = {"type": "ui_response", "job": job, "id": confirm["id"]}
                bws.send(json.dumps({**answer, "confirmed": True}))
                assert "no job" in recv_until(bws, lambda f: f["type"] == "error")[-1]["error"]
                assert a.get(f"/jobs/{job}").json()["pendingUi"] == [confirm["id"]]
                aws.send(json.dumps({"type": "unsubscribe", "job": job}))
                aws.send(json.dumps({**answer, "confirmed": True}))
                err = recv_until(aws, lambda f: f["type"] == "error")[-1]["error"]
                assert "subscribe to" in err
                subscribe(aws, job)
                aws.send(json.dumps({**answer, "confirmed": True}))
                recv_until(aws, lambda f: f["type"] == "ui_resolved")
                assert b.post(f"/jobs/{job}/cancel").status_code == 404
                assert a.post(f"/jobs/{job}/cancel").status_code == 200
        assert a_id.startswith("client-")
