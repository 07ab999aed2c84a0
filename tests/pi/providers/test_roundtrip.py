"""What a provider's decoder commits can always be read back (issue 17, defect 6).

Each vendor's standard reply is decoded with one value in one chunk replaced (every string in
turn becomes a number, a lone surrogate, an object; every number a string): the stream must end
in exactly one terminal, and the message it carries must survive the wire codec (encodable as
UTF-8, decoded back equal), as the journal and the server need.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from mule.pi import PI_CODEC, AssistantMessage, AssistantMessageEvent, DoneEvent, ErrorEvent
from mule.pi.providers import ProviderError
from mule.testing.vendor_streams import VENDORS, Recording, frames, standard

Path = tuple[str | int, ...]


def leaves(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Yield every (path, scalar) of a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    else:
        yield path, value


def replaced(value: Any, path: Path, new: Any) -> Any:
    """Return a copy of `value` with the scalar at `path` replaced by `new`."""
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = replaced(value[path[0]], path[1:], new)  # type: ignore[index]
    return copy


def decode(recording: Recording, pairs: list[tuple[str, str]]) -> list[AssistantMessageEvent]:
    """Feed decoded SSE pairs to a fresh parser as the transport does."""
    parser = recording.parser()
    out: list[AssistantMessageEvent] = [parser.start()]
    try:
        for event, data in pairs:
            out += parser.feed(event, data)
            if parser.ended:
                break
        out += parser.finish()
    except ProviderError as exc:
        out += parser.fail(exc, aborted=False)
    return out


def committed(events: list[AssistantMessageEvent]) -> AssistantMessage:
    """Return the one terminal's message, checking there is exactly one, at the end."""
    ends = [e for e in events if isinstance(e, DoneEvent | ErrorEvent)]
    assert len(ends) == 1
    assert events[-1] is ends[0]
    end = ends[0]
    return end.message if isinstance(end, DoneEvent) else end.error


def assert_reads_back(message: AssistantMessage) -> None:
    text = PI_CODEC.to_json(message)
    text.encode("utf-8")  # SQLite and HTTP write UTF-8: a raw lone surrogate cannot be
    assert PI_CODEC.from_json(AssistantMessage, text) == message


def variants(scalar: Any) -> list[Any]:
    if isinstance(scalar, str):
        return [3, 1.5, None, True, "\ud83d", {"x": "\udfff"}, [scalar]]
    return [str(scalar), "\ud800", -(2**70), 1e300]


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_single_value_change_commits_a_readable_message(vendor: str) -> None:
    recording = standard(vendor, 4)
    pairs = frames(recording.body)
    tried = 0
    for i, (event, data) in enumerate(pairs):
        try:
            chunk = json.loads(data)
        except ValueError:
            continue  # [DONE]
        for path, scalar in leaves(chunk):
            for new in variants(scalar):
                changed = [
                    *pairs[:i],
                    (event, json.dumps(replaced(chunk, path, new))),
                    *pairs[i + 1 :],
                ]
                assert_reads_back(committed(decode(recording, changed)))
                tried += 1
    assert tried > 100


@pytest.mark.parametrize("vendor", VENDORS)
def test_truncated_and_garbage_chunks_commit_a_readable_message(vendor: str) -> None:
    recording = standard(vendor, 4)
    pairs = frames(recording.body)
    for i, (event, data) in enumerate(pairs):
        for bad in (data[: len(data) // 2], "[" * 10_000, "{" + '"a":' * 200 + "1", "\ud83d", ""):
            changed = [*pairs[:i], (event, bad), *pairs[i + 1 :]]
            assert_reads_back(committed(decode(recording, changed)))
