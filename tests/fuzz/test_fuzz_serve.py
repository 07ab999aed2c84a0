"""Fuzz the server's HTTP bodies and WebSocket frames (issue 17.2), against a real uvicorn.

Invariant: whatever an authenticated client sends, the server answers with a typed, JSON
reply (HTTP 2xx/4xx with an `error`, never 5xx; on /ws an `error` or a normal frame, never a
close), within a deadline per example, and the same socket keeps serving. Self-contained: the
jobs it may start fail at once (no pi executable). About 20 s in CI; `./dev fuzz` may raise
`max_examples` through hypothesis's profiles.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import ClientConnection

from mule.pirc import BridgeConfig
from mule.serve import ServerConfig
from tests.serve.fixtures import TOKEN, ServerThread, authed_ws, recv, running

pytestmark = pytest.mark.slow

FUZZ = settings(
    max_examples=1000,
    deadline=5000,  # per example: a hang fails the example, not the suite
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
KINDS = ["subscribe", "unsubscribe", "ui_response", "ping", "auth", "frobnicate", "", None]
KEYS = ["type", "job", "id", "value", "confirmed", "cancelled", "replay", "prompt", "config"]


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """Mostly plausible client messages with hostile values; sometimes anything at all."""
    if draw(st.booleans()):
        return draw(json_values)
    msg: dict[str, Any] = {"type": draw(st.sampled_from(KINDS))}
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=5)):
        msg[key] = draw(json_values)
    return msg


@st.composite
def deep(draw: st.DrawFn) -> str:
    """Return a document nested 1 to 5000 levels, closed or not, in an object or a list."""
    n = draw(st.integers(1, 5000))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    body = opener * n + draw(st.sampled_from(["1", "", '"x"'])) + closer * draw(st.integers(0, n))
    if draw(st.booleans()):
        return '{"type": "subscribe", "job": ' + body + "}"
    return body


# Text as a hostile client writes it: lone surrogates (sent as JSON escapes), NULs, flag-like
# words, paths.
hostile_text = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=()), max_size=20),
    st.sampled_from(
        ["-e", "--extension=/tmp/x.ts", "--help", "/etc/passwd", "../secret", "a\x00b", "", " "]
    ),
    st.builds(
        lambda a, b: a + b,
        st.sampled_from(["hi ", "", "-"]),
        st.sampled_from(["\ud800", "\udfff", "\ud83d"]),
    ),
)
CONFIG_KEYS = [
    "provider",
    "model",
    "thinking",
    "tools",
    "no_tools",
    "system_prompt",
    "append_system_prompt",
    "cwd",
    "extensions",
    "executable",
]


@st.composite
def job_bodies(draw: st.DrawFn) -> str:
    """Return a `POST /jobs` body with hostile text in the prompt and the settings."""
    config: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(CONFIG_KEYS), max_size=3)):
        one = hostile_text | json_values
        config[key] = draw(st.lists(hostile_text, max_size=3) | one)
    body: dict[str, Any] = {"prompt": draw(hostile_text | json_values)}
    with_config: bool = draw(st.booleans())
    if config or with_config:
        body["config"] = config
    return json.dumps(body)  # ASCII: a lone surrogate travels as its JSON escape


texts = st.one_of(
    job_bodies(),
    messages().map(json.dumps),
    deep(),
    st.text(max_size=200),
    st.builds(lambda d: '{"prompt": ' + "9" * d + "}", st.integers(4000, 6000)),
)
bodies = st.one_of(texts.map(str.encode), st.binary(max_size=300))


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    bridge = BridgeConfig(provider="local", model="m", executable="/nonexistent/pi")
    with running(ServerConfig(bridge=bridge, token=TOKEN, max_jobs=2, keep_jobs=5)) as srv:
        yield srv


@pytest.fixture(scope="module")
def http(server: ServerThread) -> Iterator[httpx.Client]:
    with server.http() as client:
        yield client


@pytest.fixture(scope="module")
def ws(server: ServerThread) -> Iterator[ClientConnection]:
    with authed_ws(server) as conn:
        yield conn


PATHS = ["/jobs", "/jobs/job-x/grant", "/clients", "/jobs/job-x/cancel"]


@FUZZ
@given(body=bodies, path=st.sampled_from(PATHS))
def test_http_bodies_get_typed_answers(http: httpx.Client, body: bytes, path: str) -> None:
    """Every body gets JSON back with a 2xx or 4xx status, never a 5xx; listings stay 200."""
    r = http.post(path, content=body)
    assert r.status_code < 500, (body[:80], r.text[:200])
    data = r.json()
    if r.status_code >= 400:
        assert isinstance(data.get("error"), str)
    listing = http.get("/jobs")
    assert listing.status_code == 200, listing.text[:200]
    for job in listing.json()["jobs"]:
        assert http.get(f"/jobs/{job['id']}").status_code == 200


@FUZZ
@given(text=texts)
def test_ws_frames_get_a_reply_and_the_socket_lives(ws: ClientConnection, text: str) -> None:
    """Every text frame is answered (or ignored as a valid message); a ping still gets pong."""
    ws.send(text)
    ws.send(json.dumps({"type": "ping"}))
    while (frame := recv(ws, timeout=5)) != {"type": "pong"}:
        assert frame["type"] in (
            "error",
            "subscribed",
            "unsubscribed",
            "event",
            "job_end",
            "job_status",
            "pong",
            "ui_resolved",
        ), frame
        if frame["type"] == "error":
            assert isinstance(frame["error"], str)
