"""The response-so-far of a streaming assistant message, with immutable snapshots (O(1) per delta).

Providers and scripted streams append deltas to a `PartialBuilder`; every event carries a
snapshot that records only how many fragments each block had. Text is joined, and tool-call
arguments parsed, only when somebody reads a snapshot's `partial`.

A snapshot is one small object: the builder keeps a layout of its blocks (kind, fragments,
fragment count, metadata), rebuilt only when the blocks change in a way a streamed delta of the
last block does not (a block opens, metadata arrives, an earlier block grows). The last block's
count is the snapshot's own, so a delta's snapshot costs O(1), whatever the number of blocks.
"""

from __future__ import annotations

from typing import Any, Literal

from attrs import evolve

from mule.pi._content import AssistantContent, TextContent, ThinkingContent, ToolCall
from mule.pi._json import JsonObject
from mule.pi._messages import ZERO_USAGE, AssistantMessage, StopReason, Usage
from mule.pi._partial_json import parse_streaming_json, parse_tool_call_arguments

BlockKind = Literal["text", "thinking", "toolCall"]


class _Fragments:
    """Append-only fragments of one block's text, with the last join cached."""

    __slots__ = ("_joined", "_joined_n", "_parsed", "_parsed_n", "parts")

    def __init__(self, first: str = "") -> None:
        self.parts: list[str] = [first] if first else []
        self._joined = first
        self._joined_n = len(self.parts)
        self._parsed: JsonObject | None = None
        self._parsed_n = -1

    def upto(self, n: int) -> str:
        if n == self._joined_n:
            return self._joined
        if n > self._joined_n:
            text = self._joined + "".join(self.parts[self._joined_n : n])
            self._joined, self._joined_n = text, n
            return text
        return "".join(self.parts[:n])

    def arguments_upto(self, n: int) -> JsonObject:
        if n != self._parsed_n or self._parsed is None:
            self._parsed, self._parsed_n = parse_streaming_json(self.upto(n)), n
        return self._parsed


# One block as a snapshot saw it: kind, fragments, fragment count, and immutable metadata.
_Entry = tuple[BlockKind, _Fragments, int, tuple[object, ...]]


class PartialSnapshot:
    """An immutable view of the response at one event; materialised at most once.

    `layout` is the builder's blocks as of the event, the last one's fragment count aside:
    that is `last`, so a delta of the last block shares the layout of the snapshot before it.
    """

    __slots__ = ("_head", "_last", "_layout", "_message")

    def __init__(self, head: AssistantMessage, layout: tuple[_Entry, ...], last: int) -> None:
        self._head = head
        self._layout = layout
        self._last = last
        self._message: AssistantMessage | None = None

    def _content(self) -> tuple[AssistantContent, ...]:
        """Return each block as this snapshot saw it (the last one's count its own)."""
        layout = self._layout
        if not layout:
            return ()
        kind, frags, _, meta = layout[-1]
        return (*map(_block, layout[:-1]), _block((kind, frags, self._last, meta)))

    def materialize(self) -> AssistantMessage:
        """Return the partial assistant message this snapshot stands for."""
        if self._message is None:
            # (no block yet, as at `start`: the head is the message, its content empty)
            self._message = (
                evolve(self._head, content=self._content()) if self._layout else self._head
            )
        return self._message


def _block(entry: _Entry) -> AssistantContent:
    kind, frags, n, meta = entry
    if kind == "text":
        return TextContent(frags.upto(n), *meta)  # type: ignore[arg-type]
    if kind == "thinking":
        return ThinkingContent(frags.upto(n), *meta)  # type: ignore[arg-type]
    call_id, name, thought_signature, final_args, error = meta
    args = final_args if final_args is not None else frags.arguments_upto(n)
    return ToolCall(call_id, name, args, thought_signature, None, error)  # type: ignore[arg-type]


class PartialBuilder:
    """Accumulates one streaming assistant message for a provider or a scripted stream."""

    __slots__ = ("_frags", "_head", "_kinds", "_last_parts", "_layout", "_meta")

    def __init__(
        self,
        *,
        api: str,
        provider: str,
        model: str,
        timestamp: int,
        usage: Usage = ZERO_USAGE,
    ) -> None:
        self._head = AssistantMessage(
            content=(),
            api=api,
            provider=provider,
            model=model,
            usage=usage,
            stop_reason="pending",  # until the provider says why it stopped
            timestamp=timestamp,
        )
        self._kinds: list[BlockKind] = []
        self._frags: list[_Fragments] = []
        self._meta: list[tuple[object, ...]] = []
        # What snapshots share: the blocks' layout (None: stale) and the last block's parts.
        self._layout: tuple[_Entry, ...] | None = ()
        self._last_parts: list[str] = []

    # -- message-level fields -------------------------------------------------------------
    @property
    def head(self) -> AssistantMessage:
        """The message-level fields so far (content empty)."""
        return self._head

    def set_usage(self, usage: Usage) -> None:
        """Record the usage reported so far."""
        self._head = evolve(self._head, usage=usage)

    def set_stop(
        self,
        stop_reason: StopReason,
        raw_stop_reason: str | None = None,
        error_message: str | None = None,
    ) -> None:
        """Record the provider's stop reason as it arrives (later partials carry it).

        `raw_stop_reason` is the provider's own word for it; `error_message` says why a
        failing reason fails. None leaves a field as it was.
        """
        changes: dict[str, Any] = {"stop_reason": stop_reason}
        if raw_stop_reason is not None:
            changes["raw_stop_reason"] = raw_stop_reason
        if error_message is not None:
            changes["error_message"] = error_message
        self._head = evolve(self._head, **changes)

    def set_error_message(self, error_message: str | None) -> None:
        """Set (or, with None, drop) the message's error text."""
        self._head = evolve(self._head, error_message=error_message)

    def set_response(
        self, *, response_id: str | None = None, response_model: str | None = None
    ) -> None:
        """Record the provider's response id and, when it differs, the served model."""
        head = self._head
        if response_id is not None:
            head = evolve(head, response_id=response_id)
        if response_model is not None and response_model != head.model:
            head = evolve(head, response_model=response_model)
        self._head = head

    # -- blocks ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._kinds)

    def kind(self, index: int) -> BlockKind:
        """Return the kind of the block at `index`."""
        return self._kinds[index]

    def _open(self, kind: BlockKind, meta: tuple[object, ...], text: str = "") -> int:
        frags = _Fragments(text)
        self._kinds.append(kind)
        self._frags.append(frags)
        self._meta.append(meta)
        self._layout = None
        self._last_parts = frags.parts
        return len(self._kinds) - 1

    def open_text(self, text: str = "", signature: str | None = None) -> int:
        """Open a text block and return its content index."""
        return self._open("text", (signature,), text)

    def open_thinking(
        self, text: str = "", signature: str | None = None, redacted: bool | None = None
    ) -> int:
        """Open a thinking block and return its content index."""
        return self._open("thinking", (signature, redacted), text)

    def open_tool_call(self, call_id: str, name: str, thought_signature: str | None = None) -> int:
        """Open a tool-call block and return its content index."""
        return self._open("toolCall", (call_id, name, thought_signature, None, None))

    def append(self, index: int, delta: str) -> None:
        """Append a text, thinking or raw-argument fragment to a block."""
        parts = self._frags[index].parts
        parts.append(delta)
        if parts is not self._last_parts:  # an earlier block grew: its count is the layout's
            self._layout = None

    def text(self, index: int) -> str:
        """Return the full text (or raw argument JSON) of a block so far."""
        frags = self._frags[index]
        return frags.upto(len(frags.parts))

    def replace_text(self, index: int, text: str) -> None:
        """Replace a block's text wholesale (earlier snapshots keep what they saw)."""
        frags = self._frags[index] = _Fragments(text)
        if index == len(self._frags) - 1:
            self._last_parts = frags.parts
        self._layout = None

    def set_signature(self, index: int, signature: str | None) -> None:
        """Set a text or thinking block's signature."""
        meta = self._meta[index]
        self._meta[index] = (signature, *meta[1:])
        self._layout = None

    def set_redacted(self, index: int, redacted: bool) -> None:
        """Mark a thinking block redacted."""
        signature, _ = self._meta[index]
        self._meta[index] = (signature, redacted)
        self._layout = None

    def set_tool_call(
        self,
        index: int,
        *,
        call_id: str | None = None,
        name: str | None = None,
        thought_signature: str | None = None,
    ) -> None:
        """Fill in a tool call's id, name or thought signature as they arrive."""
        old_id, old_name, old_sig, final, error = self._meta[index]
        self._meta[index] = (
            old_id if call_id is None else call_id,
            old_name if name is None else name,
            old_sig if thought_signature is None else thought_signature,
            final,
            error,
        )
        self._layout = None

    def close_tool_call(self, index: int, arguments: JsonObject | None = None) -> ToolCall:
        """Fix a tool call's final arguments (parsed from its fragments unless given).

        Complete text that is no JSON object leaves the arguments empty and says why in the
        call's `arguments_error` (Pi 1.6.0); the tool's validation then fails with it.
        """
        call_id, name, sig, _, _ = self._meta[index]
        error: str | None = None
        if arguments is None:
            args, error = parse_tool_call_arguments(self.text(index))
        else:
            args = arguments
        self._meta[index] = (call_id, name, sig, args, error)
        self._layout = None
        return ToolCall(call_id, name, args, sig, None, error)  # type: ignore[arg-type]

    def block(self, index: int) -> AssistantContent:
        """Return one block as it stands now."""
        frags = self._frags[index]
        return _block((self._kinds[index], frags, len(frags.parts), self._meta[index]))

    def snapshot(self) -> PartialSnapshot:
        """Take an immutable snapshot of the response so far (O(1) after a delta)."""
        layout = self._layout
        if layout is None:  # the three lists grow together (`_open`)
            kinds, metas = self._kinds, self._meta
            layout = self._layout = tuple(
                [
                    (kinds[i], frags, len(frags.parts), metas[i])
                    for i, frags in enumerate(self._frags)
                ]
            )
        return PartialSnapshot(self._head, layout, len(self._last_parts))

    def message(
        self,
        stop_reason: StopReason,
        *,
        error_message: str | None = None,
        timestamp: int | None = None,
        duration_ms: int | None = None,
    ) -> AssistantMessage:
        """Materialise the message with its final stop reason (and how long it took)."""
        # One evolve of the head (what `snapshot().materialize()` and the changes would be).
        content = self.snapshot()._content()
        if error_message is None and timestamp is None and duration_ms is None:
            return evolve(self._head, content=content, stop_reason=stop_reason)
        changes: dict[str, Any] = {"content": content, "stop_reason": stop_reason}
        if error_message is not None:
            changes["error_message"] = error_message
        if timestamp is not None:
            changes["timestamp"] = timestamp
        if duration_ms is not None:
            changes["duration_ms"] = duration_ms
        return evolve(self._head, **changes)


__all__ = ["PartialBuilder", "PartialSnapshot"]
