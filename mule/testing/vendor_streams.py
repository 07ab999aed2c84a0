"""Recorded vendor stream bodies: the bytes each fake vendor server sends for one reply.

For I/O-free work on the providers' parsers (property tests, `bench/provider_parse.py`): each
`Recording` holds a model for the vendor's api and the response body exactly as the matching
fake in `mule.testing` frames it (Anthropic's `event:`/`data:` pairs, Gemini's CRLF-ended
`data:` lines, OpenAI's `data:` lines ending in `[DONE]`, the Responses API's named events).
`replay(recording, pieces)` decodes the body as the transport does, in the given pieces.

`standard(vendor, deltas)` is one reply of a thinking block, a text block and a tool call whose
arguments stream in fragments, with usage and the finish; every id in it is given, so two
parses of it produce the same events.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Final, final

from attrs import frozen

from mule.pi import AssistantMessageEvent, Model
from mule.pi.providers import (
    AnthropicParser,
    CompletionsParser,
    GoogleParser,
    ProviderError,
    ResponsesParser,
    SseDecoder,
    StreamParser,
)
from mule.testing import fake_anthropic as fa
from mule.testing import fake_google as fg
from mule.testing import fake_openai as fo
from mule.testing._openai_server import sse_body

VENDORS: Final = ("anthropic", "google", "openai-completions", "openai-responses")

_APIS: Final[dict[str, tuple[str, str, Callable[[Model], StreamParser]]]] = {
    "anthropic": ("anthropic-messages", "anthropic", AnthropicParser),
    "google": ("google-generative-ai", "google", GoogleParser),
    "openai-completions": ("openai-completions", "openai", CompletionsParser),
    "openai-responses": ("openai-responses", "openai", ResponsesParser),
}


@final
@frozen
class Recording:
    """One vendor reply: the model it is for and its body bytes.

    Attributes:
        vendor: The vendor's wire protocol: `"anthropic"`, `"google"`,
            `"openai-completions"` or `"openai-responses"`.
        model: The model the reply is parsed for (its api and provider match the vendor).
        body: The streamed response body, as the vendor sent it.

    """

    vendor: str
    model: Model
    body: bytes

    def parser(self) -> StreamParser:
        """Return a fresh parser for this vendor."""
        return _APIS[self.vendor][2](self.model)


def model_for(vendor: str) -> Model:
    """Return a model on the vendor's api (priced, so usage has a cost)."""
    api, provider, _ = _APIS[vendor]
    return Model(id="recorded", name="recorded", api=api, provider=provider, base_url="http://x")


def frames(body: bytes) -> list[tuple[str, str]]:
    """Decode a whole body into the `(event, data)` pairs the parser is fed."""
    decoder = SseDecoder()
    return [*decoder.feed(body), *decoder.close()]


def replay(
    recording: Recording, pieces: Iterable[bytes] | None = None
) -> list[AssistantMessageEvent]:
    """Decode the body (whole, or in `pieces`) and parse it as the transport does.

    A `ProviderError` ends the list with the parser's terminal error event, as on the wire.
    """
    parser = recording.parser()
    decoder = SseDecoder()
    out: list[AssistantMessageEvent] = [parser.start()]
    try:
        for piece in [recording.body] if pieces is None else pieces:
            for event, data in decoder.feed(piece):
                out += parser.feed(event, data)
                if parser.ended:
                    return out + parser.finish()
        for event, data in decoder.close():
            out += parser.feed(event, data)
        return out + parser.finish()
    except ProviderError as exc:
        return out + parser.fail(exc, aborted=False)


# -- the standard reply, per vendor ---------------------------------------------------------

_WORDS: Final = ("the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dög ")


def _pieces(n: int) -> list[str]:
    return [_WORDS[i % len(_WORDS)] for i in range(max(1, n))]


def _arguments(n: int) -> tuple[dict[str, Any], list[str]]:
    args = {"path": "/tmp/" + "ü" * max(1, n), "lines": list(range(10)), "all": True}
    raw = json.dumps(args, ensure_ascii=False)
    size = max(1, len(raw) // max(1, n))
    return args, [raw[i : i + size] for i in range(0, len(raw), size)]


def _anthropic(deltas: int) -> bytes:
    _, fragments = _arguments(deltas // 4)
    events = fa.message(
        fa.thinking_block(0, *_pieces(deltas // 4), signature="c2lnbmF0dXJl"),
        fa.text_block(1, *_pieces(deltas)),
        fa.tool_block(2, "toolu_1", "read", *fragments),
        stop_reason="tool_use",
        input_tokens=100,
        output_tokens=50,
        cache_read=20,
    )
    return b"".join(fa.frame(name, data) for name, data in events)


def _google(deltas: int) -> bytes:
    args, _ = _arguments(deltas // 4)
    chunks = [fg.chunk(fg.text(p, thought=True)) for p in _pieces(deltas // 4)]
    chunks += [fg.chunk(fg.text(p)) for p in _pieces(deltas)]
    chunks.append(fg.chunk(fg.call("read", args, call_id="c1", signature="AAAA")))
    chunks.append(fg.chunk(finish="STOP", usage_metadata=fg.usage(100, 50, thoughts=10)))
    return b"".join(fg.frame(c) for c in chunks)


def _openai(script: dict[str, Any]) -> bytes:
    body = b"".join(sse_body(script))
    return body + b"data: [DONE]\n\n" if script.get("then") == "done" else body


def _completions(deltas: int) -> bytes:
    args, _ = _arguments(deltas // 4)
    return _openai(
        fo.chat_stream(
            reasoning="".join(_pieces(deltas // 4)),
            text="".join(_pieces(deltas)),
            pieces=deltas,
            calls=[fo.tool_call("call_1", "read", args, pieces=deltas // 4)],
            usage=fo.chat_usage(100, 50, cached=20),
        )
    )


def _responses(deltas: int) -> bytes:
    args, _ = _arguments(deltas // 4)
    return _openai(
        fo.responses_stream(
            summary=["".join(_pieces(deltas // 8)), "".join(_pieces(deltas // 8))],
            encrypted="gAAAA",
            text="".join(_pieces(deltas)),
            pieces=deltas,
            calls=[fo.function_call_item("call_1", "fc_1", "read", args, pieces=deltas // 4)],
            usage=fo.responses_usage(100, 50, cached=20),
        )
    )


_BODIES: Final[dict[str, Callable[[int], bytes]]] = {
    "anthropic": _anthropic,
    "google": _google,
    "openai-completions": _completions,
    "openai-responses": _responses,
}


def standard(vendor: str, deltas: int = 40) -> Recording:
    """Return the standard reply for `vendor`, with about `deltas` text deltas."""
    return Recording(vendor, model_for(vendor), _BODIES[vendor](deltas))


__all__ = ["VENDORS", "Recording", "frames", "model_for", "replay", "standard"]
