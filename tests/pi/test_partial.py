"""A `PartialBuilder` snapshot shows the response exactly as it stood when it was taken.

The builder shares one layout among snapshots and rebuilds it only when its blocks change in a
way a delta of the last block does not; a stale layout would show a later (or earlier) state.
Each snapshot is checked, after every later change, against the message built eagerly from the
builder's public `head` and `block()` at the moment the snapshot was taken.
"""

from __future__ import annotations

from attrs import evolve
from hypothesis import given, settings
from hypothesis import strategies as st

from mule.pi import AssistantMessage, PartialBuilder, Usage

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("open"), st.sampled_from(["text", "thinking", "toolCall"])),
        st.tuples(st.just("append"), st.integers(0, 5), st.sampled_from(["a", "{", '"x":1', "}"])),
        st.tuples(st.just("replace"), st.integers(0, 5), st.sampled_from(["", "new"])),
        st.tuples(st.just("signature"), st.integers(0, 5), st.sampled_from([None, "sig"])),
        st.tuples(st.just("redacted"), st.integers(0, 5)),
        st.tuples(st.just("tool"), st.integers(0, 5), st.sampled_from(["id2", "name2"])),
        st.tuples(st.just("close"), st.integers(0, 5)),
        st.tuples(st.just("usage"), st.integers(1, 9)),
    ),
    max_size=40,
)


def _apply(b: PartialBuilder, op: tuple[object, ...]) -> None:
    """Apply one operation, if it fits the builder's blocks (otherwise nothing)."""
    name = op[0]
    if name == "open":
        kind = op[1]
        if kind == "text":
            b.open_text()
        elif kind == "thinking":
            b.open_thinking()
        else:
            b.open_tool_call("id", "name")
        return
    if name == "usage":
        b.set_usage(Usage(input=int(op[1])))  # type: ignore[call-overload]
        return
    i = op[1]
    assert isinstance(i, int)
    if i >= len(b):
        return
    kind = b.kind(i)
    if name == "append":
        b.append(i, str(op[2]))
    elif name == "replace":
        b.replace_text(i, str(op[2]))
    elif name == "signature" and kind != "toolCall":
        b.set_signature(i, op[2])  # type: ignore[arg-type]
    elif name == "redacted" and kind == "thinking":
        b.set_redacted(i, True)
    elif name == "tool" and kind == "toolCall":
        if op[2] == "id2":
            b.set_tool_call(i, call_id="id2")
        else:
            b.set_tool_call(i, name="name2")
    elif name == "close" and kind == "toolCall":
        b.close_tool_call(i)


def _eager(b: PartialBuilder) -> AssistantMessage:
    return evolve(b.head, content=tuple(b.block(i) for i in range(len(b))))


@settings(max_examples=300)
@given(_OPS, st.sets(st.integers(0, 40)))
def test_every_snapshot_shows_its_moment(ops: list[tuple[object, ...]], early: set[int]) -> None:
    b = PartialBuilder(api="a", provider="p", model="m", timestamp=0)
    taken = []
    for n, op in enumerate(ops):
        _apply(b, op)
        snapshot = b.snapshot()
        if n in early:  # some are read at once (materialised, then cached), the rest at the end
            assert snapshot.materialize() == _eager(b)
        taken.append((snapshot, _eager(b)))
    for snapshot, want in taken:
        assert snapshot.materialize() == want


def test_a_delta_of_the_last_block_leaves_the_snapshot_before_it() -> None:
    """Two snapshots around a delta share the layout; each still shows its own moment."""
    b = PartialBuilder(api="a", provider="p", model="m", timestamp=0)
    b.open_thinking("t")
    i = b.open_text()
    before = _eager(b)
    first = b.snapshot()
    b.append(i, "x")
    second = b.snapshot()
    assert second.materialize() == _eager(b)
    assert first.materialize() == before != second.materialize()
