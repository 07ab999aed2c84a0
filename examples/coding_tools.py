"""The coding tools outside the CLI: a model lists a directory and reads a file in it.

Runs offline with a scripted model on a throw-away directory. For a real model, drop `stream=...`
and pick one with `mule.pi.models.get_model("openai", "gpt-4o-mini")` (OPENAI_API_KEY set).
"""

import tempfile
from pathlib import Path

import anyio

import mule
from mule.pi import Model, UserMessage
from mule.pi.scripted import Call, ScriptedModel, reply
from mule.tools import Workspace, coding_tools


def show(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
    """Print every tool call and what it returned."""
    if event.type == "tool_execution_end":
        text = "".join(getattr(block, "text", "") for block in event.result.content)
        print(f"[{event.call.name} {dict(event.call.arguments)}]\n{text}")


async def main() -> None:
    """Run one agent loop over a small directory with the read-only coding tools."""
    with tempfile.TemporaryDirectory() as where:
        root = Path(where)
        (root / "notes.txt").write_text("mules are sure-footed\n")
        (root / "src").mkdir()
        script = ScriptedModel(
            [
                reply(Call("c1", "ls", {})),
                reply(Call("c2", "read", {"path": "notes.txt"})),
                reply("The notes say mules are sure-footed."),
            ]
        )
        outcome = await mule.run(
            mule.MuleRunInput(
                model=Model(
                    id="demo", name="Scripted", api="scripted", provider="demo", base_url=""
                ),
                system_prompt="Answer from the files in the working directory.",
                messages=(UserMessage("What do the notes say?", 0),),
                stream=script,
                tools=coding_tools(Workspace.at(root)),  # read, ls, grep; confined to root
            ),
            show,
        )
        print(outcome.status, "-", outcome.text)


if __name__ == "__main__":
    anyio.run(main)
