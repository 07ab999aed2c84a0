"""mule's one codec: every value round-trips; streaming and record forms; JS numbers; old records.

Numbers are checked against real node, real pi output is re-serialised byte for byte, and
journal records written before this codec still read the same.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import mule.pi as pi
from mule.effects import (
    MULE_CODEC,
    MessageUpdate,
    MuleEvent,
    MuleIdentity,
    MuleResume,
    MuleRunOutcome,
    MuleToolCheckpoint,
    MuleToolExecutionPart,
    MuleToolResult,
    event_from_record,
    event_from_wire,
    event_to_record,
    event_to_wire,
    from_wire,
    to_json,
    to_wire,
    update_to_wire,
)
from mule.journal import Journal
from mule.pi import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    Message,
    Model,
    TextContent,
    ToolResultMessage,
    UsageCost,
    WireError,
    stringify,
)
from mule.testing import effects_strategies as es

HERE = Path(__file__).parents[1]  # tests/: the shared recordings and golden files
SNAPSHOT_KEYS = ("partial", "message", "error")  # what the streaming form leaves out
RECORDED = HERE / "pirc" / "recorded"
GOLDEN = HERE / "golden"

VALUES: list[tuple[str, Any, Any]] = [
    ("identity", MuleIdentity, es.identities()),
    ("tool_result", MuleToolResult, es.tool_results()),
    ("execution_part", MuleToolExecutionPart, es.tool_execution_parts()),
    ("checkpoint", MuleToolCheckpoint, es.tool_checkpoints()),
    ("resume", MuleResume, es.resumes()),
    ("outcome", MuleRunOutcome, es.outcomes()),
    ("event", MuleEvent, es.mule_events()),
    *[(cls.type, cls, strategy) for cls, strategy in es.EVENT_STRATEGIES.items()],
]


@pytest.mark.parametrize(("name", "type_", "values"), VALUES, ids=[v[0] for v in VALUES])
@given(data=st.data())
def test_every_mule_value_round_trips(name: str, type_: Any, values: Any, data: Any) -> None:
    """from_wire(T, to_wire(x)) == x; to_json is the same JSON as text; the form is plain JSON."""
    value = data.draw(values)
    wire = to_wire(value)
    assert json.loads(json.dumps(wire, allow_nan=False)) == wire
    assert from_wire(type_, wire) == value
    assert json.loads(to_json(value), parse_int=float) == wire  # JS digits of a big float: an int


@given(es.mule_events())
def test_events_round_trip_in_their_full_and_record_forms(event: MuleEvent) -> None:
    """event_to_wire is to_wire; a record reads back as its event (message_update excepted)."""
    wire = event_to_wire(event)
    assert wire == to_wire(event)
    assert wire["type"] == event.type
    assert event_from_wire(wire) == event
    record = event_to_record(event)
    if type(event) is MessageUpdate:
        pi_event = to_wire(event.event)
        assert json.loads(record, parse_int=float) == {
            "type": "message_update",
            "turn": event.turn.value,
            "message": event.message.value,
            "event": {
                k: v for k, v in pi_event.items() if k not in ("partial", "message", "error")
            },
        }
        with pytest.raises(WireError, match="holds no snapshot"):
            event_from_record(record)
    else:
        assert json.loads(record, parse_int=float) == wire
        assert event_from_record(record) == event


@given(es.message_updates())
def test_the_streaming_form_holds_the_delta_and_a_snapshot_only_when_asked(
    event: MessageUpdate,
) -> None:
    """update_to_wire: identities plus the Pi event without snapshots; `snapshot` adds value."""
    full = event_to_wire(event)
    delta = update_to_wire(event)
    assert delta == {
        "type": "message_update",
        "run": full["run"],
        "turn": full["turn"],
        "message": full["message"],
        "event": {k: v for k, v in full["event"].items() if k not in SNAPSHOT_KEYS},
    }
    snap = update_to_wire(event, snapshot=True)
    assert snap == {**delta, "value": full["value"]}


@pytest.mark.parametrize(
    "text", ["{", "[1, 2", '"x"', "{}", '{"type": "nope"}', "[" * 100_000 + "]" * 100_000]
)
def test_a_damaged_record_is_a_wire_error(text: str) -> None:
    """Bad JSON, a non-event, an unknown type, nesting too deep: WireError, never a crash."""
    with pytest.raises(WireError):
        event_from_record(text)


def test_pi_codec_is_not_changed_by_mule_and_extensions_copy() -> None:
    """Pi's codec refuses mule's values; extending returns a new codec and leaves the old one."""
    result = MuleToolResult(content=(TextContent("x"),))
    assert to_wire(result) == {"content": [{"type": "text", "text": "x"}], "isError": False}
    with pytest.raises(TypeError, match="not a value of this codec"):
        pi.to_wire(result)
    with pytest.raises(WireError):
        pi.from_wire(MuleToolResult, {"content": []})

    @attrs.frozen
    class Extra:
        run: MuleIdentity
        note: str | None = None
        type = "extra"

    bigger = MULE_CODEC.extend(tagged={"type": (Extra,)}, nulls=True)
    ident = MuleIdentity("run", "run:0")
    assert bigger.to_wire(Extra(ident)) == {
        "type": "extra",
        "run": {"kind": "run", "value": "run:0"},
        "note": None,
    }
    assert bigger.from_wire(Extra, bigger.to_wire(Extra(ident, "n"))) == Extra(ident, "n")
    assert bigger.to_wire(result) == to_wire(result)
    with pytest.raises(TypeError):
        MULE_CODEC.to_wire(Extra(ident))
    with pytest.raises(ValueError, match="already in this codec"):
        MULE_CODEC.extend((MuleToolResult,))


# -- numbers as JavaScript writes them ---------------------------------------------------------

_NODE_ECHO = """
const rl = require("readline").createInterface({ input: process.stdin });
rl.on("line", (hex) => {
  process.stdout.write(JSON.stringify(Buffer.from(hex, "hex").readDoubleBE(0)) + "\\n");
});
"""


@pytest.fixture(scope="module")
def node_stringify() -> Iterator[Any]:
    """JSON.stringify of a float by a real node process (one process for the whole module)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is missing (run ./dev setup)")
    proc = subprocess.Popen(
        [node, "-e", _NODE_ECHO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None

    def ask(x: float) -> str:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write(struct.pack(">d", x).hex() + "\n")
        proc.stdin.flush()
        return proc.stdout.readline().rstrip("\n")

    yield ask
    proc.stdin.close()
    proc.wait(timeout=10)
    proc.stdout.close()


EDGE_FLOATS = [
    0.0,
    -0.0,
    1.0,
    -3.0,
    0.1,
    0.5,
    123.456,
    3.6e-05,
    1e-06,
    9.99e-07,
    1e-07,
    1.5e-07,
    5e-324,
    2.0**52 + 0.5,
    2.0**53,
    2.0**53 + 2,
    2.0**60,
    1e16,
    1.2345e20,
    1e21,
    1.5e22,
    1.7976931348623157e308,
]


@given(st.floats(allow_nan=False, allow_infinity=False))
@example(0.000036)
@example(2.0**60)
@example(9007199254740994.0)
def test_numbers_are_written_as_javascript_writes_them(node_stringify: Any, x: float) -> None:
    """Number text equals node's JSON.stringify (free JSON and typed fields), and reads back."""
    text = stringify(x)
    # From 1e16 mule keeps Python's exponent form (JS's digits would read back in Python as an
    # int of another value); node reads it as the same double.
    assert text == (node_stringify(x) if abs(x) < 1e16 else repr(x))
    assert json.loads(text) == x
    rest = '"output":0,"cacheRead":0,"cacheWrite":0,"total":0'
    assert pi.to_json(UsageCost(input=x)) == f'{{"input":{text},{rest}}}'


def test_edge_numbers_match_node(node_stringify: Any) -> None:
    """Zeros, the 1e-6 and 1e21 notation switches, 2**53 and beyond, subnormals, the maximum."""
    for x in EDGE_FLOATS:
        for y in (x, -x):
            js = node_stringify(y) if abs(y) < 1e16 else repr(y)
            assert stringify(y) == js, y
            assert stringify({"x": [y]}) == f'{{"x":[{js}]}}', y


# A JSON string token: quotes outside strings only ever open or close one.
_STRING_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"')


@given(st.text(), st.floats(allow_nan=False, allow_infinity=False))
@example(",", 0.0)  # '","' also spans the compact separators: counting substrings miscounts it
@example('":"', 1.0)
@example("1e-05", 2.5e-08)
def test_strings_that_look_like_numbers_are_left_alone(s: str, x: float) -> None:
    """Only number tokens are rewritten: a string holding '1e-05' keeps its exact text."""
    data = {"s": s, "x": x, "k" + s: [s, "1e-05", "2.0", 2.5e-08]}
    text = stringify(data)
    assert json.loads(text, parse_int=float) == data  # JS's digits of a big float read as an int
    # Every string token, in order, is written as Python writes that string: none became a number.
    strings = ["s", s, "x", "k" + s, s, "1e-05", "2.0"]
    expected = [json.dumps(v, ensure_ascii=False) for v in strings]
    assert _STRING_TOKEN.findall(text) == expected
    # And what lies between them holds only the two numbers and JSON punctuation.
    rest = _STRING_TOKEN.sub("", text)
    assert rest == f"{{:,:{stringify(x)},:[,,,{stringify(2.5e-08)}]}}"


def test_costs_and_models_are_written_with_integral_numbers() -> None:
    """The issue's case: a zero cost is 0 (pi's form), not 0.0."""
    assert to_json(UsageCost()) == '{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}'
    model = Model(id="m", name="M", api="a", provider="p", base_url="", context_window=8)
    text = to_json(model)
    assert '"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0}' in text
    assert ".0" not in text


# -- real pi output --------------------------------------------------------------------------

# Keys pi's openai-completions provider leaves on tool-call blocks while a call streams; mule's
# ToolCall keeps them in `extras`, so a streaming partial re-serialises with them.
PI_STREAMING_KEYS = ("partialArgs", "streamIndex")


def _pi_lines() -> list[Any]:
    return [
        pytest.param(line.rstrip("\n"), id=f"{path.stem}:{i}")
        for path in sorted(RECORDED.glob("*.jsonl"))
        for i, line in enumerate(path.read_text().splitlines(keepends=True))
    ]


def _pi_values(record: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """Yield (type, JSON) of every Pi value in one record of pi's RPC output."""
    for key in ("message", "assistantMessageEvent"):
        if isinstance(record.get(key), dict):
            yield (
                (AssistantMessageEvent if key == "assistantMessageEvent" else Message),
                record[key],
            )
    for key in ("messages", "toolResults"):
        for m in record.get(key, ()):
            yield Message, m


@pytest.mark.parametrize("line", _pi_lines())
def test_pi_output_re_serialises_byte_for_byte(line: str) -> None:
    """Every message and stream event pi wrote comes back from mule as the same bytes."""
    record = json.loads(line)
    assert stringify(record) == line  # the reference: pi's own text of each nested value
    for type_, wire in _pi_values(record):
        mine = pi.to_json(pi.from_wire(type_, wire))
        assert mine == stringify(wire)
        assert MULE_CODEC.to_json(MULE_CODEC.from_wire(type_, wire)) == mine


def test_recorded_pi_output_covers_costs_usage_and_partial_tool_calls() -> None:
    """The transcripts hold what the fix is about: zero costs, and partial tool calls."""
    text = "".join(p.read_text() for p in RECORDED.glob("*.jsonl"))
    assert '"cost":{"input":0,' in text
    assert all(f'"{key}"' in text for key in PI_STREAMING_KEYS)
    assert '"toolcall_delta"' in text


def _canonical(text: str) -> str:
    # Keys sorted; number tokens keep their form (json.loads keeps 0 an int, 0.5 a float).
    return stringify(_sorted(json.loads(text)))


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _golden() -> list[Any]:
    cases = []
    for name, key, type_ in (
        ("messages.json", "message", Message),
        ("models.json", "model", Model),
        ("contexts.json", "context", Context),
    ):
        for row in json.loads((GOLDEN / name).read_text()):
            cases.append(pytest.param(type_, row[key], id=f"{name}:{row['name']}"))
    for row in json.loads((GOLDEN / "streams.json").read_text()):
        for i, event in enumerate(row["events"]):
            cases.append(pytest.param(AssistantMessageEvent, event, id=f"{row['name']}[{i}]"))
    return cases


@pytest.mark.parametrize(("type_", "wire"), _golden())
def test_golden_values_keep_pis_number_tokens(type_: Any, wire: Any) -> None:
    """Re-serialised golden JSON has Pi's exact number text (key order is the writer's own)."""
    assert _canonical(pi.to_json(pi.from_wire(type_, wire))) == _canonical(stringify(wire))


# -- journal records written before this codec ------------------------------------------------

V1 = json.loads((HERE / "recorded" / "journal_v1.json").read_text())


def _v1_journal(path: Path, *, cut: bool) -> Journal:
    journal = Journal(path)
    journal.close()
    with sqlite3.connect(path) as db:
        run = V1["run"]
        db.execute(
            "INSERT INTO runs(run_id, base, status, segments, pid, host, created_ms, updated_ms)"
            " VALUES (?, ?, ?, ?, 1, 'elsewhere', 0, 0)",
            (run["run_id"], run["base"], "failed" if cut else run["status"], run["segments"]),
        )
        rows = [r for r in V1["events"] if not cut or r[1] <= V1["cut_after"]]
        db.executemany(
            "INSERT INTO events(run_id, segment, seq, type, body) VALUES (?, ?, ?, ?, ?)",
            [(run["run_id"], *r) for r in rows],
        )
    return Journal(path)


def test_old_records_hold_what_the_new_form_changed() -> None:
    """The fixture is in the old form: Python floats (0.0, 3.6e-05) and spaced base JSON."""
    bodies = "".join(r[3] for r in V1["events"])
    assert '"total":0.0' in bodies
    assert "e-05" in bodies
    assert V1["run"]["base"].startswith('[{"role": "user"')


def test_a_journal_written_before_the_codec_reads_the_same(tmp_path: Path) -> None:
    """Old files: the same transcript, events and (cut after a tool's end) the same resume."""
    with _v1_journal(tmp_path / "full.db", cut=False) as journal:
        expected = tuple(from_wire(Message, m) for m in V1["transcript"])
        assert journal.transcript("r1") == expected
        events = list(journal.events("r1"))
        assert [e[2] for e in events] == [json.loads(r[3]) for r in V1["events"]]
        updates = [d for _, _, d in events if d["type"] == "message_update"]
        assert updates[1]["event"] == {"type": "text_delta", "contentIndex": 0, "delta": "let "}
    with _v1_journal(tmp_path / "cut.db", cut=True) as journal:
        messages, resume = journal.recover("r1")
        old = V1["recovered"]
        assert messages == tuple(from_wire(Message, m) for m in old["messages"])
        assert resume == from_wire(MuleResume, old["resume"])
        assert resume is not None
        assert [t.state for t in resume.tools] == ["completed"]


def test_new_records_use_javascript_numbers_and_compact_json(tmp_path: Path) -> None:
    """Written now: costs as pi writes them, the base compact; both read back."""
    tool = ToolResultMessage("c1", "ls", (TextContent("a"),), False, 5)
    with Journal(tmp_path / "j.db") as journal:
        journal.begin("r", [tool])
        with sqlite3.connect(tmp_path / "j.db") as db:
            (base,) = db.execute("SELECT base FROM runs").fetchone()
        assert base == stringify([to_wire(tool)])
        assert journal.transcript("r") == (tool,)
        message = AssistantMessage((), "a", "p", "m", pi.Usage(cost=UsageCost(0.000036)), "stop", 1)
        assert '"cost":{"input":0.000036,"output":0,' in to_json(message)
