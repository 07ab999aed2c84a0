"""A hostile MCP server cannot flood, stall or break a run (issue 30.3): real SDK servers, stdio.

Its results reach the model cut to `max_result_chars` with a notice; listing more than
`max_tools` tools is an `MCPServerError`; a duplicate tool name, within one server or across
servers, is skipped with an `MCPToolSkipped` warning instead of failing the run.
"""

from __future__ import annotations

import sys

import pytest

import mule
from mule.mcp import (
    MAX_RESULT_CHARS,
    MAX_TOOLS,
    MCPServer,
    MCPServerError,
    MCPToolSkipped,
    all_tools,
)
from mule.pi import TextContent
from mule.pi.scripted import Call
from tests.mcp.conftest import HERE
from tests.mcp.test_mcp import _SDK_SSE_GENERATORS, Events, run_input

HOSTILE = str(HERE / "hostile_server.py")
pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.filterwarnings(_SDK_SSE_GENERATORS)]


def hostile(*args: str, **kwargs: int) -> MCPServer:
    return MCPServer.stdio(sys.executable, [HOSTILE, *args], **kwargs)  # type: ignore[arg-type]


async def test_a_large_result_reaches_the_model_cut_with_a_notice() -> None:
    events = Events()
    size = 3_000_000
    async with hostile("big", str(size)) as server:
        tools = await server.tools()
        outcome = await mule.run(run_input(tools, Call("c1", "big", {})), events)
    assert outcome.status == "completed"
    (result,) = events.results()
    shown, notice = result.content
    assert shown == TextContent("x" * MAX_RESULT_CHARS)
    assert isinstance(notice, TextContent)
    assert f"it had {size:,} characters" in notice.text
    assert f"the first {MAX_RESULT_CHARS:,} are shown" in notice.text
    assert result.details == {
        "mule": f"structuredContent left out: larger than {MAX_RESULT_CHARS:,} characters"
    }
    # What the model is sent next is the cut result, not the server's 3 MB.
    sent = outcome.messages[-2]
    assert sum(len(getattr(b, "text", "")) for b in sent.content) < MAX_RESULT_CHARS + 200


async def test_the_result_bound_is_configurable() -> None:
    async with hostile("big", "5000", max_result_chars=100) as server:
        tools = await server.tools()
        events = Events()
        await mule.run(run_input(tools, Call("c1", "big", {})), events)
    (result,) = events.results()
    assert result.content[0] == TextContent("x" * 100)
    assert "the first 100 are shown" in result.content[1].text  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="max_result_chars must be a positive integer"):
        hostile("big", "1", max_result_chars=0)


async def test_a_server_listing_too_many_tools_is_refused() -> None:
    async with hostile("many", "10000") as server:
        with pytest.raises(MCPServerError, match=f"listed more than {MAX_TOOLS} tools"):
            await server.tools()
    async with hostile("many", "20", max_tools=20) as server:
        assert len(await server.tools()) == 20


async def test_a_duplicate_name_within_a_server_is_skipped_not_fatal() -> None:
    events = Events()
    async with hostile("dupes") as server:
        with pytest.warns(MCPToolSkipped, match="'twin' skipped"):
            tools = await server.tools()
        assert [(t.descriptor.name, t.descriptor.description) for t in tools] == [
            ("twin", "first"),
            ("other", "other"),
        ]
        outcome = await mule.run(run_input(tools, Call("c1", "twin", {})), events)
    assert outcome.status == "completed"
    (result,) = events.results()
    assert result.content == (TextContent("twin of dupes"),)


async def test_a_duplicate_name_across_servers_is_skipped_not_fatal() -> None:
    events = Events()
    async with hostile("dupes") as first, hostile("big", "10") as second:
        with pytest.warns(MCPToolSkipped) as caught:
            tools = await all_tools(first, second, taken=["other"])
        outcome = await mule.run(run_input(tools, Call("c1", "twin", {})), events)
    skipped = sorted(str(w.message) for w in caught)
    assert skipped == [
        "MCP server 'hostile': tool 'other' skipped, the name is taken",
        "MCP server 'hostile': tool 'twin' skipped, the name is taken",
        "MCP server 'hostile': tool 'twin' skipped, the name is taken",
    ]
    assert [t.descriptor.name for t in tools] == ["twin", "big"]
    assert outcome.status == "completed"
    assert events.results()[0].content == (TextContent("twin of dupes"),)
