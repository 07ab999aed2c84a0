"""mule.mcp against real MCP servers (the SDK's): stdio and streamable HTTP, asyncio and trio."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

import mule
from mule.mcp import MCPServer, MCPServerError
from mule.pi import ImageContent, Model, TextContent, UserMessage
from mule.pi.scripted import Call, ScriptedModel, reply
from tests.mcp.conftest import RAW, SERVER, HttpServer

# On trio, the SDK's HTTP client leaves httpx2's SSE generators to the garbage collector after a
# streamed (progress) response; trio then closes them itself, with a ResourceWarning. Not ours.
_SDK_SSE_GENERATORS = (
    r"ignore:Exception ignored in. <async_generator object "
    r"(EventSource.__aiter__|Response.aiter_|PoolByteStream.__aiter__)"
    r":pytest.PytestUnraisableExceptionWarning"
)
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.filterwarnings(_SDK_SSE_GENERATORS),
    pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)2\.:ResourceWarning"),
]
MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")


def stdio(
    marker: Path, *args: str, connect_timeout: float = 30.0, call_timeout: float = 300.0
) -> MCPServer:
    return MCPServer.stdio(
        sys.executable,
        [SERVER, *(args or ("stdio",))],
        env={"MULE_TEST_MARKER": str(marker)},
        connect_timeout=connect_timeout,
        call_timeout=call_timeout,
    )


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest, marker: Path) -> MCPServer:
    """Return a fresh client of the test server, over each transport."""
    if request.param == "stdio":
        return stdio(marker)
    http: HttpServer = request.getfixturevalue("http_server")
    return MCPServer.http(http.url)


def server_marker(server: MCPServer, request: pytest.FixtureRequest, marker: Path) -> Path:
    if "http" in server.name:
        http: HttpServer = request.getfixturevalue("http_server")
        return http.marker
    return marker


def noted(marker: Path, line: str) -> int:
    """Return how often the server noted `line`."""
    return marker.read_text().splitlines().count(line) if marker.exists() else 0


async def until_noted(marker: Path, line: str, more_than: int = 0) -> None:
    """Wait (10 s at most) until the server noted `line` more than `more_than` times."""
    with anyio.fail_after(10):
        for _ in range(1000):  # polling a file: no event to wait on
            if noted(marker, line) > more_than:
                return
            await anyio.sleep(0.02)


def run_input(tools: Sequence[mule.MuleTool], *calls: Call) -> mule.MuleRunInput:
    return mule.MuleRunInput(
        model=MODEL,
        system_prompt="s",
        messages=(UserMessage("go", 0),),
        stream=ScriptedModel([reply(*calls), reply("done")]),
        tools=tools,
    )


class Events:
    def __init__(self) -> None:
        self.events: list[mule.MuleEvent] = []

    def __call__(self, event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        self.events.append(event)

    def updates(self, call_id: str) -> list[mule.MuleToolResult]:
        return [
            e.result
            for e in self.events
            if type(e) is mule.ToolExecutionUpdate and e.call.id == call_id
        ]

    def results(self) -> list[mule.MuleToolResult]:
        """Return the final results in call order (parallel calls end in any order)."""
        ends = [e for e in self.events if type(e) is mule.ToolExecutionEnd]
        return [e.result for e in sorted(ends, key=lambda e: e.call.id)]


async def test_tools_and_a_run_that_calls_them(server: MCPServer) -> None:
    """Descriptors, replay, and one turn calling six tools at once over a real session.

    Text becomes Pi content, structuredContent the details, progress `update` parts, `isError`
    an error result, an image an image block; the gate rejects bad arguments before the server
    is asked. (One test: each server start costs seconds on a loaded machine.)
    """
    events = Events()
    async with server:
        tools = {t.descriptor.name: t for t in await server.tools(prefix="t_")}
        assert server.name == "mule-test"  # the server's own name, once connected
        trusted = {t.descriptor.name: t.replay for t in await server.tools(trust_annotations=True)}
        chosen = {t.descriptor.name: t.replay for t in await server.tools(replay={"count": "safe"})}
        with pytest.raises(ValueError, match="nope"):
            await server.tools(replay={"nope": "safe"})
        outcome = await mule.run(
            run_input(
                list(tools.values()),
                Call("c1", "t_add", {"a": 2, "b": 40}),
                Call("c2", "t_echo", {"text": "hi"}),
                Call("c3", "t_count", {"steps": 3}),
                Call("c4", "t_fail", {"why": "no disk"}),
                Call("c5", "t_picture"),
                Call("c6", "t_add", {"a": "x"}),
            ),
            events,
        )
    add = tools["t_add"].descriptor
    assert add.description == "Add two integers."
    assert add.parameters["required"] == ["a", "b"]
    assert add.parameters["properties"] == {
        "a": {"title": "A", "type": "integer"},
        "b": {"title": "B", "type": "integer", "description": "the second term"},
    }
    assert {t.replay for t in tools.values()} == {"unsafe"}
    assert (trusted["add"], trusted["echo"], trusted["slow"]) == ("safe", "safe", "unsafe")
    assert (chosen["count"], chosen["add"]) == ("safe", "unsafe")

    assert outcome.status == "completed"
    added, echoed, counted, failed, picture, invalid = events.results()
    assert added.details == {"total": 42, "terms": [2, 40]}
    assert not added.is_error
    assert '"total": 42' in added.content[0].text  # type: ignore[union-attr]
    assert echoed.content == (TextContent("hi"),)
    assert echoed.details == {"result": "hi"}

    updates = events.updates("c3")
    assert [u.content for u in updates] == [(TextContent(f"step {i}"),) for i in (1, 2, 3)]
    assert updates[-1].details == {"progress": 3.0, "total": 3.0, "message": "step 3"}
    assert counted.content == (TextContent("counted to 3"),)

    assert failed.is_error
    assert "no disk" in failed.content[0].text  # type: ignore[union-attr]
    assert not picture.is_error
    assert picture.content[0] == TextContent("a red pixel")
    image = picture.content[1]
    assert isinstance(image, ImageContent)
    assert image.mime_type == "image/png"
    assert invalid.is_error
    assert "Validation failed for tool" in invalid.content[0].text  # type: ignore[union-attr]


async def test_abort_mid_call_sends_mcp_cancellation(
    server: MCPServer, request: pytest.FixtureRequest, marker: Path
) -> None:
    controller = mule.AbortController()
    where = server_marker(server, request, marker)

    started_before = noted(where, "slow started")
    cancelled_before = noted(where, "slow cancelled")

    async def stop_when_the_server_works() -> None:
        await until_noted(where, "slow started", started_before)
        controller.abort(mule.AbortError("the user pressed stop"))

    async with server:
        tools = await server.tools()
        began = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_when_the_server_works)
            with pytest.raises(mule.AbortError, match="pressed stop"):
                await mule.run(
                    run_input(tools, Call("c1", "slow", {"seconds": 30})), None, controller.signal
                )
        assert time.monotonic() - began < 10
        await until_noted(where, "slow cancelled", cancelled_before)  # MCP's cancel got there
        # The session survives a cancelled call.
        events = Events()
        await mule.run(run_input(tools, Call("c2", "echo", {"text": "still here"})), events)
    assert events.results()[0].content == (TextContent("still here"),)


async def test_a_slow_server_times_out(marker: Path) -> None:
    server = stdio(marker, call_timeout=1.0)
    async with server:
        tools = await server.tools()
        started = time.monotonic()
        with pytest.raises(mule.MuleRunFailed) as failed:
            await mule.run(run_input(tools, Call("c1", "slow", {"seconds": 30})))
        assert time.monotonic() - started < 8
        await until_noted(marker, "slow cancelled")  # the SDK cancels what it stopped waiting for
    assert failed.value.phase == "tool"
    assert "MCP server 'mule-test' did not answer tools/call slow within 1 s" in str(failed.value)
    assert isinstance(failed.value.cause, MCPServerError)


async def test_a_stdio_server_killed_mid_call(marker: Path) -> None:
    server = stdio(marker)
    async with server:
        tools = await server.tools()
        with pytest.raises(mule.MuleRunFailed) as failed:
            await mule.run(run_input(tools, Call("c1", "die", {"code": 3})))
        # The dead server fails later calls the same way, at once.
        with pytest.raises(mule.MuleRunFailed) as again:
            await mule.run(run_input(tools, Call("c2", "echo", {"text": "x"})))
    err = failed.value.cause
    assert isinstance(err, MCPServerError)
    assert failed.value.phase == "tool"
    assert err.server == "mule-test"
    assert "fatal: the test asked me to die" in err.stderr
    assert "fatal: the test asked me to die" in failed.value.error.message
    assert again.value.phase == "tool"


async def test_an_http_server_killed_mid_call(own_http_server: HttpServer) -> None:
    server = MCPServer.http(own_http_server.url, name="remote")

    def listener(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        if type(event) is mule.ToolExecutionStart:
            own_http_server.process.kill()  # mid-call: the open request dies with it

    async with server:
        tools = await server.tools()
        started = time.monotonic()
        with pytest.raises(mule.MuleRunFailed) as failed:
            await mule.run(run_input(tools, Call("c1", "slow", {"seconds": 30})), listener)
        assert time.monotonic() - started < 20
    assert failed.value.phase == "tool"
    assert "MCP server 'remote'" in failed.value.error.message
    assert isinstance(failed.value.cause, MCPServerError)


async def test_a_server_that_sends_garbage() -> None:
    server = MCPServer.stdio(sys.executable, [RAW, "garbage"], name="raw")
    async with server:
        tools = await server.tools()
        started = time.monotonic()
        with pytest.raises(mule.MuleRunFailed) as failed:
            await mule.run(run_input(tools, Call("c1", "garble")))
        assert time.monotonic() - started < 8
    message = failed.value.error.message
    assert "MCP server 'raw' sent a message that is not MCP" in message
    assert "raw: writing garbage" in message  # its stderr


async def test_a_server_that_answers_with_the_wrong_shape() -> None:
    server = MCPServer.stdio(sys.executable, [RAW, "invalid"], name="raw")
    async with server:
        tools = await server.tools()
        with pytest.raises(mule.MuleRunFailed) as failed:
            await mule.run(run_input(tools, Call("c1", "garble")))
    assert failed.value.phase == "tool"
    assert "MCP server 'raw'" in failed.value.error.message


async def test_a_server_that_hangs_at_start(marker: Path) -> None:
    started = time.monotonic()
    with pytest.raises(MCPServerError) as failed:
        async with stdio(marker, "hang", connect_timeout=1.0):
            pass
    assert time.monotonic() - started < 10
    assert "did not finish connecting within 1 s" in str(failed.value)
    assert "hanging" in failed.value.stderr


async def test_a_server_that_crashes_at_start(marker: Path) -> None:
    with pytest.raises(MCPServerError) as failed:
        async with stdio(marker, "crash"):
            pass
    assert "boom: cannot start" in failed.value.stderr


async def test_a_command_that_does_not_exist() -> None:
    with pytest.raises(MCPServerError, match="no-such-mcp-server"):
        async with MCPServer.stdio("/nonexistent/no-such-mcp-server"):
            pass


async def test_tools_of_a_closed_server_fail_the_run(marker: Path) -> None:
    server = stdio(marker)
    async with server:
        tools = await server.tools()
    with pytest.raises(mule.MuleRunFailed, match="is closed"):
        await mule.run(run_input(tools, Call("c1", "echo", {"text": "x"})))


async def test_cancelling_the_host_while_connecting_leaves_nothing_behind(marker: Path) -> None:
    started = time.monotonic()
    with anyio.move_on_after(0.5):
        async with stdio(marker, "hang", connect_timeout=30.0):
            pytest.fail("connected to a server that never answers")
    assert time.monotonic() - started < 10
