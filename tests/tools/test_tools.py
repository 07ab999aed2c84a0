"""mule.tools: confinement, paging, truncation, binary refusal, bash, confirmation."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.effects import MuleEvent, MuleToolResult, ToolExecutionEnd
from mule.pi import Model, TextContent, ToolCall, UserMessage
from mule.pi.scripted import Call, ScriptedModel, reply
from mule.promise import AbortController, AbortSignal, MuleRunInput, MuleToolPrepared, run
from mule.tools import (
    MAX_OUTPUT_BYTES,
    TOOL_NAMES,
    Workspace,
    bash_tool,
    coding_tools,
    grep_files,
    list_dir,
    read_file,
    run_command,
)

MODEL = Model("scripted", "scripted", "scripted", "test", "local:")


def text(result: MuleToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (root / "sub").mkdir()
    (root / "sub" / "code.py").write_text(
        "def hello():\n    return 'hi'\n\nclass Thing:\n    pass\n"
    )
    (tmp_path / "secret.txt").write_text("outside\n")
    return Workspace.at(root)


# -- confinement ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt"])
def test_read_refuses_paths_outside_the_root(ws: Workspace, path: str) -> None:
    """A relative path climbing out of the root is an is_error result naming the confinement."""
    result = read_file(ws, path)
    assert result.is_error
    assert "outside the working directory" in text(result)


def test_absolute_paths_outside_are_refused_and_inside_allowed(ws: Workspace) -> None:
    """Absolute paths are judged by where they lead, not how they are spelled."""
    outside = read_file(ws, str(ws.root.parent / "secret.txt"))
    inside = read_file(ws, str(ws.root / "notes.txt"))
    assert outside.is_error
    assert not inside.is_error
    assert text(inside).startswith("alpha\nbeta")


def test_symlink_out_of_the_root_is_refused_by_every_tool(ws: Workspace) -> None:
    """A link leading outside is refused by read and ls, and grep does not follow it."""
    (ws.root / "link.txt").symlink_to(ws.root.parent / "secret.txt")
    (ws.root / "linkdir").symlink_to(ws.root.parent)
    assert read_file(ws, "link.txt").is_error
    assert list_dir(ws, "linkdir").is_error
    found = grep_files(ws, "outside")
    assert not found.is_error
    assert text(found) == "No matches found"


def test_unconfined_workspace_reaches_outside(ws: Workspace) -> None:
    """With confinement off, paths outside the root are readable."""
    free = Workspace.at(ws.root, confined=False)
    assert text(read_file(free, "../secret.txt")) == "outside"


def test_unknown_user_home_is_refused_not_a_crash() -> None:
    """`~nobody-here` is a refused path, not an exception."""
    ws = Workspace(Path("/tmp/mule-cli-confine-root"), True)
    assert "unknown user" in ws.resolve("~no-such-user-0").failure()


@given(st.text(min_size=1, max_size=30))
def test_resolve_never_leaves_a_confined_root(name: str) -> None:
    """Whatever the path text, a confined workspace resolves inside its root or refuses."""
    root = Path("/tmp/mule-cli-confine-root")
    ws = Workspace(root, True)
    resolved = ws.resolve(name)
    value = resolved.value_or(None)
    if value is not None:
        assert value.is_relative_to(root)


# -- read -------------------------------------------------------------------------------------


def test_read_pages_with_offset_and_limit_and_says_how_to_continue(ws: Workspace) -> None:
    """offset/limit select lines; a cut page ends with where to continue."""
    (ws.root / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    page = text(read_file(ws, "long.txt", offset=10, limit=3))
    assert page.startswith("line 10\nline 11\nline 12\n")
    assert "Showing lines 10-12 of 100" in page
    assert "offset=13" in page
    assert text(read_file(ws, "long.txt", offset=99)) == "line 99\nline 100"


def test_read_cuts_at_the_byte_limit_with_a_note(ws: Workspace) -> None:
    """A file larger than the output budget is cut honestly, on a line boundary."""
    line = "x" * 999
    (ws.root / "big.txt").write_text((line + "\n") * 200)
    result = text(read_file(ws, "big.txt"))
    body, _, note = result.rpartition("\n\n")
    assert len(body.encode()) <= MAX_OUTPUT_BYTES
    assert all(row == line for row in body.splitlines())
    assert "output limit" in note
    assert "of 200" in note


def test_read_refuses_binary_files(ws: Workspace) -> None:
    """A file with NUL bytes (or invalid UTF-8) is refused, not decoded into garbage."""
    (ws.root / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (ws.root / "latin1.txt").write_bytes("caf\xe9 ol\xe9\n".encode("latin-1") * 10)
    for name in ("blob.bin", "latin1.txt"):
        result = read_file(ws, name)
        assert result.is_error
        assert "binary" in text(result)


def test_read_errors_are_results(ws: Workspace) -> None:
    """Missing files, directories and bad offsets are is_error results."""
    assert "No such file" in text(read_file(ws, "nope.txt"))
    assert "is a directory" in text(read_file(ws, "sub"))
    past = read_file(ws, "notes.txt", offset=50)
    assert past.is_error
    assert "past the end" in text(past)
    assert read_file(ws, "notes.txt", offset=0).is_error


# -- ls ---------------------------------------------------------------------------------------


def test_ls_sorts_marks_directories_and_limits(ws: Workspace) -> None:
    """Entries are sorted, directories end with a slash, and a limit cut is noted."""
    assert text(list_dir(ws)) == "notes.txt\nsub/"
    for i in range(5):
        (ws.root / f"f{i}").write_text("")
    limited = text(list_dir(ws, ".", limit=2))
    assert limited.startswith("f0\nf1\n\n[2 of 7 entries shown")
    assert list_dir(ws, "notes.txt").is_error


# -- grep -------------------------------------------------------------------------------------


def test_grep_reports_file_line_and_text(ws: Workspace) -> None:
    """Matches come as path:line: text, relative to the root."""
    result = grep_files(ws, r"^(def|class) \w+")
    assert text(result) == "sub/code.py:1: def hello():\nsub/code.py:4: class Thing:"
    assert result.details == {"matches": 2, "files": 1}


def test_grep_options_and_bounds(ws: Workspace) -> None:
    """Case, literal, glob, context and the match limit all apply; a limit cut is noted."""
    assert text(grep_files(ws, "ALPHA", ignore_case=True)) == "notes.txt:1: alpha"
    assert text(grep_files(ws, "a.", literal=True)) == "No matches found"
    assert "code.py" not in text(grep_files(ws, "a", glob="*.txt"))
    ctx = text(grep_files(ws, "beta", context=1))
    assert ctx == "notes.txt-1- alpha\nnotes.txt:2: beta\nnotes.txt-3- gamma"
    (ws.root / "many.txt").write_text("hit\n" * 50)
    capped = text(grep_files(ws, "hit", limit=5))
    assert capped.count("many.txt:") == 5
    assert "stopped at 5 matches" in capped


def test_grep_bad_regex_and_binary_files(ws: Workspace) -> None:
    """An invalid regex is an is_error result; binary files are skipped."""
    bad = grep_files(ws, "(unclosed")
    assert bad.is_error
    assert "Invalid regular expression" in text(bad)
    (ws.root / "blob.bin").write_bytes(b"alpha\x00\x01")
    assert "blob.bin" not in text(grep_files(ws, "alpha"))


# -- bash -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_bash_runs_in_the_root_and_reports_exit_codes(ws: Workspace) -> None:
    """Commands run in the root; a non-zero exit is an is_error result with the code."""
    ok = await run_command(ws, "pwd; echo err >&2", 10)
    assert not ok.is_error
    assert text(ok) == f"{ws.root}\nerr\n"
    bad = await run_command(ws, "echo partial; exit 3", 10)
    assert bad.is_error
    assert "partial" in text(bad)
    assert "[command exited with code 3]" in text(bad)


@pytest.mark.anyio
async def test_bash_keeps_the_tail_and_says_what_it_cut(ws: Workspace) -> None:
    """Long output keeps its last bytes, with a note saying how much was dropped."""
    result = await run_command(ws, "seq 1 20000", 10, max_bytes=100)
    out = text(result)
    total = sum(len(f"{i}\n") for i in range(1, 20001))
    assert out.startswith(f"[output truncated: the first {total - 100} of {total} bytes")
    assert out.endswith("19999\n20000\n")


@pytest.mark.anyio
async def test_bash_timeout_kills_the_process_group(ws: Workspace) -> None:
    """A command past its timeout is killed (children too) and reported as an error."""
    began = time.monotonic()
    result = await run_command(ws, "echo started; sleep 30 & sleep 30", 0.3)
    assert time.monotonic() - began < 5
    assert result.is_error
    assert "started" in text(result)
    assert "timed out after 0.3 s" in text(result)


async def _run_bash(ws: Workspace, answer: bool, asked: list[str]) -> list[MuleEvent]:
    async def confirm(command: str) -> bool:
        asked.append(command)
        return answer

    model = ScriptedModel([reply(Call("c1", "bash", {"command": "touch made.txt"})), reply("done")])
    events: list[MuleEvent] = []

    async def listen(event: MuleEvent, _signal: AbortSignal) -> None:
        events.append(event)

    inp = MuleRunInput(
        model=MODEL,
        system_prompt="",
        messages=(UserMessage("go", 0),),
        stream=model,
        tools=(bash_tool(ws, confirm),),
    )
    await run(inp, listen)
    return events


@pytest.mark.anyio
async def test_bash_declined_is_an_error_result_and_nothing_runs(ws: Workspace) -> None:
    """A declined confirmation gives the model an is_error result; the command never runs."""
    asked: list[str] = []
    events = await _run_bash(ws, False, asked)
    assert asked == ["touch made.txt"]
    end = next(e for e in events if isinstance(e, ToolExecutionEnd))
    assert end.result.is_error
    assert "declined" in text(end.result)
    assert not (ws.root / "made.txt").exists()


@pytest.mark.anyio
async def test_bash_approved_runs(ws: Workspace) -> None:
    """An approved command runs in the root."""
    asked: list[str] = []
    events = await _run_bash(ws, True, asked)
    end = next(e for e in events if isinstance(e, ToolExecutionEnd))
    assert not end.result.is_error
    assert (ws.root / "made.txt").exists()


def test_tool_set_replay_and_unknown_names(ws: Workspace) -> None:
    """read/ls/grep are replay-safe, bash is not; unknown names are refused."""
    tools = coding_tools(ws, TOOL_NAMES)
    assert {t.descriptor.name: t.replay for t in tools} == {
        "read": "safe",
        "ls": "safe",
        "grep": "safe",
        "bash": "unsafe",
    }
    with pytest.raises(ValueError, match="unknown tool"):
        coding_tools(ws, ("read", "write"))


@pytest.mark.anyio
async def test_unexpected_tool_exceptions_become_error_results(ws: Workspace) -> None:
    """An OSError inside a tool (a file name too long to stat) is an is_error result."""
    signal = AbortController().signal
    (read,) = coding_tools(ws, ("read",))
    prepared = await read.prepare(ToolCall("1", "read", {"path": "a" * 5000}), signal)
    assert isinstance(prepared, MuleToolPrepared)
    parts = [p async for p in prepared.execute(signal)]
    assert [p.type for p in parts] == ["result"]
    assert parts[0].result.is_error
    assert text(parts[0].result).startswith("OSError: ")
    assert "too long" in text(parts[0].result)
