"""Promise-style quick start: a model that calls a typed Python tool, streamed live.

Runs offline with a scripted model. For a real one, replace `stream=...` by nothing and pick a
model from `mule.pi.models.get_model("openai", "gpt-4o-mini")` with OPENAI_API_KEY set.
"""

import anyio

import mule
from mule.pi import Model, UserMessage
from mule.pi.scripted import Call, ScriptedModel, Text, reply


@mule.tool(replay="safe")
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


def show(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
    """Print the answer as it streams, and every tool call."""
    if event.type == "message_update" and event.event.type == "text_delta":
        print(event.event.delta, end="", flush=True)
    elif event.type == "tool_execution_end":
        text = "".join(getattr(block, "text", "") for block in event.result.content)
        print(f"\n[{event.call.name} returned {text}]")
    elif event.type == "run_end":
        print(f"\n[run {event.outcome}]")


async def main() -> None:
    """Run one agent loop and print its outcome."""
    model = Model(id="demo", name="Scripted demo", api="scripted", provider="demo", base_url="")
    script = ScriptedModel(
        [
            reply(
                Text.of("Let me count. ", 3), Call("c1", "word_count", {"text": "an honest loop"})
            ),
            reply(Text.of("It has 3 words.", 4)),
        ]
    )
    outcome = await mule.run(
        mule.MuleRunInput(
            model=model,
            system_prompt="You count words.",
            messages=(UserMessage("How many words in 'an honest loop'?"),),
            stream=script,
            tools=[word_count],
        ),
        show,
    )
    print(outcome.status, "-", len(outcome.messages), "new messages")


if __name__ == "__main__":
    anyio.run(main)
