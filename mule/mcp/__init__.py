"""MCP servers as mule tools, on the official `mcp` SDK (`pip install 'mule[mcp]'`).

    async with MCPServer.stdio("python", ["-m", "my_server"]) as server:
        tools = await server.tools(prefix="my_")
        outcome = await mule.run(mule.MuleRunInput(..., tools=tools))

Each tool's descriptor is the MCP tool's name, description and input schema (mule's gate
validates the arguments); progress notifications become `update` parts; the run's abort sends
MCP's cancellation; `isError` results are error results; text and image content become Pi
content and `structuredContent` the result's `details`. Replay is `unsafe` unless the host says
otherwise. A server that dies, hangs or sends garbage fails the run with `MuleError(tool)`.
A server is bounded: at most `max_tools` listed tools (`MAX_TOOLS`), results cut to
`max_result_chars` (`MAX_RESULT_CHARS`) with a notice the model sees, and a tool name already
taken (within the server, or by `taken` / an earlier server in `all_tools`) skipped with an
`MCPToolSkipped` warning instead of failing the run.
"""

from mule.pi import needs_extra

with needs_extra("mcp", "mule.mcp"):
    from mule.mcp._errors import MCPServerError, MCPToolSkipped
    from mule.mcp._server import MAX_TOOLS, MCPServer, all_tools
    from mule.mcp._tools import MAX_RESULT_CHARS, tool_result

__all__ = [
    "MAX_RESULT_CHARS",
    "MAX_TOOLS",
    "MCPServer",
    "MCPServerError",
    "MCPToolSkipped",
    "all_tools",
    "tool_result",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish

_publish(__name__, globals(), __all__)
