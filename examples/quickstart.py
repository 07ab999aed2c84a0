"""Promise-style quick start: a model that calls a typed Python tool, streamed live.

Runs offline with a scripted model. For a real one, leave out `stream=...` and pick a model,
`mule.pi.models.get_model("openai", "gpt-4o-mini")`, with OPENAI_API_KEY set. This file is
the README's quick start, word for word (tests/test_examples.py checks it).
"""

import anyio

import mule
from mule.pi import Model, UserMessage
from mule.pi.scripted import Call, ScriptedModel, Text, reply


@mule.tool(replay="safe")
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


async def main() -> None:
    """Run one agent loop, printing the answer as it streams and every tool result."""
    model = Model(id="demo", name="Scripted demo", api="scripted", provider="demo", base_url="")
    script = ScriptedModel(
        [
            reply(
                Text.of("Let me count. ", 3), Call("c1", "word_count", {"text": "an honest loop"})
            ),
            reply(Text.of("It has 3 words.", 4)),
        ]
    )
    inp = mule.MuleRunInput(
        model=model,
        system_prompt="You count words.",
        messages=(UserMessage("How many words in 'an honest loop'?"),),
        stream=script,  # omit for a real model (see below)
        tools=[word_count],
    )
    async with mule.stream(inp) as run:
        async for event in run:
            if event.type == "message_update" and event.event.type == "text_delta":
                print(event.event.delta, end="", flush=True)
            elif event.type == "tool_execution_end":
                text = "".join(getattr(block, "text", "") for block in event.result.content)
                print(f"\n[{event.call.name} returned {text}]")
    print(f"\n{run.outcome.status} - {len(run.outcome.messages)} new messages")


anyio.run(main)
