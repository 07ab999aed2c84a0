"""An MCP server's tools in a mule run: stdio server, progress, replay trust, typed failures.

Runs offline: a scripted model calls the tools of examples/mcp_server.py (started as a
subprocess). With a real model, drop `stream=...` and pick one from `mule.pi.models`.
"""

import sys
from pathlib import Path

import anyio

import mule
from mule.mcp import MCPServer
from mule.pi import Model, UserMessage
from mule.pi.scripted import Call, ScriptedModel, reply

SERVER = Path(__file__).with_name("mcp_server.py")


def show(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
    if type(event) is mule.ToolExecutionUpdate:
        print(f"  [{event.call.name}] {event.result.content[0].text}")  # type: ignore[union-attr]
    elif type(event) is mule.ToolExecutionEnd:
        print(f"  [{event.call.name} -> {event.result.content[0].text}]")  # type: ignore[union-attr]
    elif type(event) is mule.MessageUpdate and event.event.type == "text_delta":
        print(event.event.delta, end="", flush=True)


async def main() -> None:
    model = Model(id="demo", name="Scripted demo", api="scripted", provider="demo", base_url="")
    read = Call("c2", "notes_read_note", {"title": "groceries"})
    script = ScriptedModel([
        reply("Let me look. ", Call("c1", "notes_index_notes"), read),
        reply("You need eggs, flour and sugar."),
    ])  # fmt: skip
    async with MCPServer.stdio(sys.executable, [str(SERVER)]) as server:
        # The server says read_note is read-only; trusting that makes it safe to replay.
        tools = await server.tools(prefix="notes_", trust_annotations=True)
        print("tools:", ", ".join(f"{t.descriptor.name} ({t.replay})" for t in tools))
        outcome = await mule.run(
            mule.MuleRunInput(
                model=model,
                system_prompt="You keep notes.",
                messages=(UserMessage("What do I need to buy?", 0),),
                stream=script,
                tools=tools,
            ),
            show,
        )
    print(f"\n{outcome.status}")


anyio.run(main)
