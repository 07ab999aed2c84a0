"""`mule run --mcp/--mcp-url/--otel` for real: the SDK's MCP server and a local OTLP receiver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, openai_error, tool_call
from tests.mcp.conftest import SERVER, HttpServer, start_http, stop

pytestmark = pytest.mark.slow


class Receiver:
    """An OTLP/HTTP (protobuf) endpoint on 127.0.0.1 that keeps what it is sent."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.metrics: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    receiver.traces(body)
                    answer = ExportTraceServiceResponse().SerializeToString()
                else:
                    receiver.metric(body)
                    answer = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attrs = {a.key: _value(a.value) for a in span.attributes}
                    self.spans.append(
                        {
                            "name": span.name,
                            "trace": span.trace_id.hex(),
                            "id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(),
                            "attributes": attrs,
                            "links": [link.trace_id.hex() for link in span.links],
                            "service": service.get("service.name"),
                        }
                    )

    def metric(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                self.metrics.extend(m.name for m in scope.metrics)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(v: Any) -> object:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    server = start_http(tmp_path / "marker.txt")
    yield server
    stop(server.process)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    keep = {k: v for k, v in keep.items() if not k.startswith("OTEL_")}
    agent = tmp_path / "agent"
    agent.mkdir()
    return {**keep, "PI_CODING_AGENT_DIR": str(agent), "COLUMNS": "200", "NO_COLOR": "1"}


def mule(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mule.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        input="",
        timeout=120,
    )


def run_args(fake: FakeOpenAI, prompt: str, *extra: str) -> list[str]:
    return [
        "run",
        prompt,
        "--model",
        "local/gpt-fake",
        "--base-url",
        fake.base_url,
        "--tools",
        "",
        "--json",
        *extra,
    ]


def ends(stdout: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stdout.splitlines()]
    return [e for e in lines if e["type"] == "tool_execution_end"]


def test_mcp_stdio_server_tools_in_a_run(
    fake: FakeOpenAI, env: dict[str, str], tmp_path: Path
) -> None:
    fake.push(chat_stream(calls=[tool_call("call_1", "add", {"a": 20, "b": 22})]))
    fake.push(chat_text("42."))
    done = mule(run_args(fake, "add", "--mcp", f"{sys.executable} {SERVER} stdio"), env, tmp_path)
    assert done.returncode == 0, done.stderr
    (end,) = ends(done.stdout)
    assert end["result"]["details"] == {"total": 42, "terms": [20, 22]}
    tools = {t["function"]["name"] for t in fake.requests[0]["body"]["tools"]}
    assert {"add", "echo", "count", "slow"} <= tools
    assert "add" in fake.requests[0]["body"]["messages"][0]["content"]  # the system prompt


def test_mcp_url_and_a_clash_and_a_dead_server(
    fake: FakeOpenAI, env: dict[str, str], tmp_path: Path, http_server: HttpServer
) -> None:
    fake.push(chat_stream(calls=[tool_call("call_1", "echo", {"text": "over http"})]))
    fake.push(chat_text("ok"))
    done = mule(run_args(fake, "echo", "--mcp-url", http_server.url), env, tmp_path)
    assert done.returncode == 0, done.stderr
    (end,) = ends(done.stdout)
    assert end["result"]["content"][0]["text"] == "over http"

    twice = ["--mcp-url", http_server.url, "--mcp-url", http_server.url]
    clash = mule(run_args(fake, "x", *twice), env, tmp_path)
    assert clash.returncode == 2
    assert "two tools are called" in clash.stderr

    dead = mule(run_args(fake, "x", "--mcp", f"{sys.executable} {SERVER} crash"), env, tmp_path)
    assert dead.returncode == 2
    assert "boom: cannot start" in dead.stderr


def test_otel_exports_the_run_over_otlp(
    fake: FakeOpenAI, env: dict[str, str], tmp_path: Path, receiver: Receiver
) -> None:
    env = {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "mule-test"}
    journal = str(tmp_path / "runs.db")
    fake.push(chat_stream(calls=[tool_call("call_1", "echo", {"text": "hi"})]))
    fake.push(openai_error(400, "Bad request: the test says no"))
    mcp = ["--mcp", f"{sys.executable} {SERVER} stdio"]
    first = mule(
        run_args(fake, "go", *mcp, "--otel", "--journal", journal, "--provider-retries", "0"),
        env,
        tmp_path,
    )
    assert first.returncode == 1, first.stderr
    names = sorted(s["name"] for s in receiver.spans)
    assert names == ["chat gpt-fake", "chat gpt-fake", "execute_tool echo", "invoke_agent"]
    run = next(s for s in receiver.spans if s["name"] == "invoke_agent")
    assert run["service"] == "mule-test"
    assert run["attributes"]["mule.outcome"] == "failed"
    run_id = run["attributes"]["gen_ai.conversation.id"]
    tool = next(s for s in receiver.spans if s["name"] == "execute_tool echo")
    chats = [s for s in receiver.spans if s["name"] == "chat gpt-fake"]
    assert tool["parent"] in {c["id"] for c in chats}
    assert {c["parent"] for c in chats} == {run["id"]}
    assert "gen_ai.client.operation.duration" in receiver.metrics
    assert "gen_ai.client.token.usage" in receiver.metrics

    # Resuming the run from the journal links its trace to the first one.
    fake.push(chat_text("done"))
    resume = ["--otel", "--journal", journal, "--resume", run_id]
    second = mule(
        [
            "run",
            "--model",
            "local/gpt-fake",
            "--base-url",
            fake.base_url,
            "--tools",
            "",
            *mcp,
            *resume,
        ],
        env,
        tmp_path,
    )
    assert second.returncode == 0, second.stderr
    runs = [s for s in receiver.spans if s["name"] == "invoke_agent"]
    assert len(runs) == 2
    assert runs[1]["links"] == [run["trace"]]
    assert runs[1]["attributes"]["mule.outcome"] == "completed"


def test_otel_with_an_unsupported_protocol_is_a_usage_error(
    fake: FakeOpenAI, env: dict[str, str], tmp_path: Path
) -> None:
    env = {**env, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    done = mule(run_args(fake, "x", "--otel"), env, tmp_path)
    assert done.returncode == 2
    assert "http/protobuf" in done.stderr
