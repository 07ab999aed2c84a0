r"""Schema patterns matched in linear time: JavaScript `RegExp(p, "u")` translated to RE2.

A tool schema's `pattern` and `patternProperties` come from whoever wrote the tool (a host, an
MCP server, an `output_type`), and the text they are matched against comes from the model. A
backtracking engine (Python's `re`, JavaScript's) takes time exponential in the text for
patterns such as `^(a+)+$`, and while it runs nothing else in the process does. RE2 (PyPI's
`google-re2`) matches in time linear in the text, with its compiled program bounded in memory.

Pi compiles a pattern as ECMAScript with the `u` flag; this module translates that syntax to
RE2's, keeping its meaning where RE2 can express it: `.` excludes the four JS line terminators,
`\s` is JS's whitespace set, `\d`/`\w`/`\b` are ASCII (as in both), `\uXXXX`, `\u{X}`, `\cX`,
`\p{Script=X}`, `[^]` and `[]` are rewritten, `$` is the end of the text. What RE2 cannot
match in linear time is refused with a reason (`pattern_problem`), and a schema holding such a
pattern is a `ToolSchemaError`: backreferences (`\1`, `\k<name>`), lookaround (`(?=`, `(?!`,
`(?<=`, `(?<!`), repetition counts above 1000, and programs larger than `MAX_PROGRAM`.

RE2's time is linear in the text, times a constant that grows with the compiled program when
its DFA gives up (a pattern built to have exponentially many DFA states); `MAX_PROGRAM` and the
DFA's memory budget keep that constant bounded (docs/security.md gives measured worst cases).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import re2

MAX_PROGRAM: Final = 200_000  # RE2 instructions: the constant of the linear bound (see below)
_MAX_MEM: Final = 32 << 20  # RE2's budget per pattern: its program and its DFA's state cache

REFUSED: Final = (
    "mule matches schema patterns in linear time (RE2), which cannot express backreferences or "
    "lookaround"
)

# JavaScript's \s: WhiteSpace and LineTerminator (ECMA-262), as RE2 class contents.
_SPACE: Final = (
    r"\x{9}-\x{d}\x{20}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}"
    r"\x{3000}\x{feff}"
)
# Its complement in the code space, for \S inside a class (RE2 has no nested negation).
_NOT_SPACE: Final = (
    r"\x{0}-\x{8}\x{e}-\x{1f}\x{21}-\x{9f}\x{a1}-\x{167f}\x{1681}-\x{1fff}\x{200b}-\x{2027}"
    r"\x{202a}-\x{202e}\x{2030}-\x{205e}\x{2060}-\x{2fff}\x{3001}-\x{fefe}\x{ff00}-\x{10ffff}"
)
_DOT: Final = r"[^\x{a}\x{d}\x{2028}\x{2029}]"  # JS `.`: anything but a line terminator
_CONTROL: Final = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13}
_PASS: Final = frozenset("dDwWbB")  # ASCII in both engines (no `i` flag)
_PROPERTY_KEYS: Final = ("Script=", "sc=", "Script_Extensions=", "scx=", "General_Category=", "gc=")
_HEX: Final = frozenset("0123456789abcdefABCDEF")


class PatternRefused(ValueError):
    """A schema pattern that mule cannot match in linear time (the reason is the message)."""


def _code(point: int) -> str:
    return f"\\x{{{point:x}}}"


def _hex_run(source: str, start: int, count: int) -> int | None:
    text = source[start : start + count]
    return int(text, 16) if len(text) == count and set(text) <= _HEX else None


def _escape(source: str, i: int, in_class: bool) -> tuple[str, int]:
    """Translate the escape at `source[i]` (just after the backslash); return (RE2 text, next i)."""
    if i >= len(source):
        raise PatternRefused("a pattern cannot end with a backslash")
    c = source[i]
    if c in "123456789":
        raise PatternRefused(f"backreference \\{c}: {REFUSED}")
    if c == "k" and source.startswith("<", i + 1):
        raise PatternRefused(f"named backreference \\k<...>: {REFUSED}")
    if c in _PASS and not (in_class and c == "b"):
        return "\\" + c, i + 1
    if c == "b":  # [\b] is a backspace in JS
        return _code(8), i + 1
    if c in "sS":
        if c == "s":
            return (_SPACE if in_class else f"[{_SPACE}]"), i + 1
        return (_NOT_SPACE if in_class else f"[^{_SPACE}]"), i + 1
    if c in _CONTROL:
        return _code(_CONTROL[c]), i + 1
    if c == "0":
        return _code(0), i + 1
    if c == "c" and i + 1 < len(source) and source[i + 1].isascii() and source[i + 1].isalpha():
        return _code(ord(source[i + 1]) % 32), i + 2
    if c == "x" and (point := _hex_run(source, i + 1, 2)) is not None:
        return _code(point), i + 3
    if c == "u":
        return _unicode_escape(source, i)
    if c in "pP" and source.startswith("{", i + 1):
        end = source.find("}", i + 2)
        if end < 0:
            raise PatternRefused("an unterminated \\p{...}")
        name = source[i + 2 : end]
        for key in _PROPERTY_KEYS:
            if name.startswith(key):
                name = name[len(key) :]
        return f"\\{c}{{{name}}}", end + 1
    # An identity escape: the character itself (JS without `u` reads `\z` as `z`, as Pi's
    # fallback compile does), written so RE2 reads it literally too.
    return _code(ord(c)), i + 1


def _unicode_escape(source: str, i: int) -> tuple[str, int]:
    if source.startswith("{", i + 1):
        end = source.find("}", i + 2)
        digits = source[i + 2 : end] if end > 0 else ""
        if digits and len(digits) <= 6 and set(digits) <= _HEX and int(digits, 16) <= 0x10FFFF:
            return _code(int(digits, 16)), end + 1
        raise PatternRefused(f"invalid unicode escape {source[i - 1 : i + 8]!r}")
    point = _hex_run(source, i + 1, 4)
    if point is None:
        return "u", i + 1
    if 0xD800 <= point < 0xDC00 and source.startswith("\\u", i + 5):
        low = _hex_run(source, i + 7, 4)
        if low is not None and 0xDC00 <= low < 0xE000:  # a surrogate pair is one code point
            return _code(0x10000 + ((point - 0xD800) << 10) + (low - 0xDC00)), i + 11
    return _code(point), i + 5


def _group(source: str, i: int) -> tuple[str, int]:
    """Translate a group opening at `source[i] == "("`; return (RE2 text, next i)."""
    if not source.startswith("?", i + 1):
        return "(", i + 1
    for look in ("(?=", "(?!", "(?<=", "(?<!"):
        if source.startswith(look, i):
            raise PatternRefused(f"lookaround {look}...): {REFUSED}")
    if source.startswith("(?:", i):
        return "(?:", i + 3
    if source.startswith("(?<", i):  # a named group; its name is RE2's too
        return "(?P<", i + 3
    # JS modifiers `(?ims-ims:...)`: RE2 spells them the same (only the group form is JS).
    j = i + 2
    while j < len(source) and source[j] in "ims-":
        j += 1
    if j > i + 2 and source.startswith(":", j):
        return source[i : j + 1], j + 1
    raise PatternRefused(f"{source[i : i + 4]!r} is not a JavaScript group")


def translate(source: str) -> str:
    """Return the RE2 syntax of a JavaScript pattern, or raise `PatternRefused`."""
    out: list[str] = []
    i = 0
    in_class = False
    n = len(source)
    while i < n:
        c = source[i]
        if c == "\\":
            text, i = _escape(source, i + 1, in_class)
            out.append(text)
            continue
        if in_class:
            if c == "]":
                in_class = False
                out.append("]")
            elif c == "[":
                out.append(r"\[")
            else:
                out.append(c)
            i += 1
            continue
        if c == "[":
            if source.startswith("[]", i):  # JS: matches nothing
                out.append(r"[^\x{0}-\x{10ffff}]")
                i += 2
            elif source.startswith("[^]", i):  # JS: matches anything
                out.append(r"[\x{0}-\x{10ffff}]")
                i += 3
            else:
                in_class = True
                out.append("[")
                i += 1
                if source.startswith("^", i):  # `[^]` was taken above: no `]` can follow
                    out.append("^")
                    i += 1
            continue
        if c == "(":
            text, i = _group(source, i)
            out.append(text)
            continue
        out.append(_DOT if c == "." else c)
        i += 1
    if in_class:
        raise PatternRefused("an unterminated character class")
    return "".join(out)


@functools.cache
def _options(max_mem: int) -> re2.Options:
    import re2

    options = re2.Options()
    options.log_errors = False  # refusals are reported as typed errors, not on stderr
    options.never_capture = True  # only whether it matches is asked
    options.max_mem = max_mem
    return options


@functools.lru_cache(maxsize=256)
def _compiled(source: str) -> re2._Regexp | PatternRefused:
    import re2

    try:
        # First within RE2's default budget (8 MB), where a huge program fails to compile fast
        # (a 1M-instruction one took 0.5 s to build only to be refused)...
        made = re2.compile(translate(source), _options(8 << 20))
        if made.programsize <= MAX_PROGRAM:
            # ...then with a DFA cache 4x the default, grown only as used: a big program then
            # stays on the DFA (constant time per character) instead of falling back to the
            # NFA (time per character proportional to the program), 5-60x faster on 1 MB.
            made = re2.compile(translate(source), _options(_MAX_MEM))
        if made.programsize > MAX_PROGRAM:
            return PatternRefused(
                f"it compiles to {made.programsize:,} RE2 instructions, more than mule's "
                f"{MAX_PROGRAM:,} (matching time grows with the program)"
            )
        return made
    except PatternRefused as exc:
        return exc
    except re2.error as exc:
        why = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        return PatternRefused(f"RE2 cannot compile it ({why})")
    except (RecursionError, ValueError, TypeError) as exc:
        return PatternRefused(f"RE2 cannot compile it ({exc})")


def pattern_problem(source: str) -> str | None:
    """Return why `source` cannot be matched in linear time, or None when it can."""
    made = _compiled(source)
    return str(made) if isinstance(made, PatternRefused) else None


def search(source: str, text: str) -> bool:
    """Return whether JavaScript pattern `source` matches somewhere in `text`, in linear time.

    Raises `PatternRefused` for a pattern `pattern_problem` refuses.
    """
    made = _compiled(source)
    if isinstance(made, PatternRefused):
        raise made
    if len(text) < _REMEMBER_FROM:
        return _match(made, text)
    return _remembered(source, text)


# One validation asks the same (pattern, value) several times (coercion, the check, the error
# lines): a long value's answer is kept, so its linear cost is paid once.
_REMEMBER_FROM: Final = 256


@functools.lru_cache(maxsize=32)
def _remembered(source: str, text: str) -> bool:
    made = _compiled(source)
    assert not isinstance(made, PatternRefused)
    return _match(made, text)


def _match(made: re2._Regexp, text: str) -> bool:
    try:
        return made.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8, which cannot hold one
        return made.search(text.encode("utf-8", "replace").decode()) is not None


__all__ = [
    "MAX_PROGRAM",
    "PatternRefused",
    "pattern_problem",
    "search",
    "translate",
]
