"""pi's streaming assistant message rebuilt from its deltas (pi >= 0.84 writes no partial).

Since pi 0.84 a `message_update` carries only its `assistantMessageEvent` (without `partial`)
and the usage so far; the response so far is the client's to build, from the assistant's
`message_start` to its `message_end` (which stays authoritative). `DeltaAssembly` appends
each delta to a `mule.pi.PartialBuilder` and hands out its snapshots (O(1) for a delta of the
last block), so an update costs the same however long the answer grows, and text is joined
only when someone reads a snapshot.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, final

from mule.pi import (
    AssistantMessage,
    PartialBuilder,
    PartialSnapshot,
    ToolCall,
    Usage,
    WireError,
    decode,
)


@final
class DeltaAssembly:
    """One assistant message of pi's, from `message_start` on, built from its deltas.

    Attributes:
        builder: The response so far.
        blocks: pi's content index -> the builder's, for every block opened.
        last_usage: The usage (raw JSON) of the last update applied.

    """

    __slots__ = ("blocks", "builder", "last_usage")

    def __init__(self, start: AssistantMessage) -> None:
        builder = self.builder = PartialBuilder(
            api=start.api,
            provider=start.provider,
            model=start.model,
            timestamp=start.timestamp,
            usage=start.usage,
        )
        builder.set_response(response_id=start.response_id, response_model=start.response_model)
        self.blocks: dict[int, int] = {}
        self.last_usage: object = None  # the raw usage last applied

    def usage(self, raw: object) -> None:
        """Apply a `message_update`'s top-level usage (decoded only when it changed)."""
        if raw is None or raw == self.last_usage:
            self.last_usage = raw
            return
        self.last_usage = raw
        with contextlib.suppress(WireError):  # a malformed usage keeps the last one
            self.builder.set_usage(decode(Usage, raw))

    def block(self, index: int, kind: str) -> int:
        """Return the builder's index of pi's block `index`, opening a `kind` block if new."""
        mine = self.blocks.get(index)
        if mine is None:
            builder = self.builder
            if kind == "text":
                mine = builder.open_text()
            elif kind == "thinking":
                mine = builder.open_thinking()
            else:
                mine = builder.open_tool_call("", "")
            self.blocks[index] = mine
        return mine

    def apply(self, event: Mapping[str, Any]) -> PartialSnapshot:
        """Apply one `assistantMessageEvent` (not a `*_delta`: see `append`); return a snapshot."""
        builder = self.builder
        kind = event.get("type")
        index = event.get("contentIndex")
        if type(index) is not int:
            index = 0
        match kind:
            case "text_start" | "thinking_start":
                self.block(index, kind[:-6])
            case "toolcall_start":
                mine = self.block(index, "toolCall")
                call_id, name = event.get("id"), event.get("toolName")
                builder.set_tool_call(
                    mine,
                    call_id=call_id if isinstance(call_id, str) else None,
                    name=name if isinstance(name, str) else None,
                )
            case "text_end" | "thinking_end":
                mine = self.block(index, kind[:-4])
                content = event.get("content")
                if isinstance(content, str) and builder.text(mine) != content:
                    builder.replace_text(mine, content)
            case "toolcall_end":
                mine = self.block(index, "toolCall")
                try:
                    call = decode(ToolCall, event.get("toolCall"))
                except WireError:
                    pass
                else:
                    builder.set_tool_call(mine, call_id=call.id, name=call.name)
                    builder.close_tool_call(mine, call.arguments)
        return builder.snapshot()

    def append(self, index: int, kind: str, delta: str) -> PartialSnapshot:
        """Append a `*_delta`'s text to pi's block `index`; return a snapshot."""
        builder = self.builder
        mine = self.blocks.get(index)
        if mine is None:
            mine = self.block(index, kind)
        builder.append(mine, delta)
        return builder.snapshot()


__all__ = ["DeltaAssembly"]
