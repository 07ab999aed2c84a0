"""A tiny MCP server, written with the official SDK, that examples/mcp_tools.py talks to."""

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")
NOTES: dict[str, str] = {"groceries": "eggs, flour, sugar"}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note(title: str) -> str:
    """Read a note by its title."""
    return NOTES.get(title, f"no note called {title!r}")


@server.tool()
async def index_notes(ctx: Context) -> str:
    """Rebuild the search index, reporting progress."""
    for i, title in enumerate(NOTES, 1):
        await ctx.report_progress(i, len(NOTES), f"indexed {title}")
        await anyio.sleep(0.01)
    return f"indexed {len(NOTES)} notes"


if __name__ == "__main__":
    server.run("stdio")
