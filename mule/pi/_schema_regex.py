r"""The one place where a schema's `pattern` / `patternProperties` source becomes a test.

pi-schema compiles a pattern as an ECMAScript regex with the `u` flag (without it when the
source is invalid with it) and tests it with `RegExp.test`, an unanchored search. Every keyword
of mule's validator that matches a pattern goes through `compile_pattern`, which matches with
`_pattern` (the JavaScript syntax translated to RE2, linear in the text). A pattern RE2 cannot
match in linear time (a backreference, lookaround) raises `PatternError`, which the gate turns
into a `ToolSchemaError`: a deliberate difference from Pi, whose engine backtracks.

`is_js_regex` answers the `regex` format (is a string a valid ECMAScript regex?) through a
translation to Python's `re`, which also accepts what RE2 refuses: `.` excludes JS's line
terminators, `\d`, `\w`, `\b` are ASCII, `\s` is JS's whitespace set, `$` is the end of the text,
named groups and `\u{X}` are rewritten; inline flags and `(?P` groups are refused, as in JS.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Final

_SPACE: Final = (
    "\\t\\n\\v\\f\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
_CLASSES: Final = {
    "d": ("0-9", "[0-9]", "[^0-9]"),
    "w": ("A-Za-z0-9_", "[A-Za-z0-9_]", "[^A-Za-z0-9_]"),
    "s": (_SPACE, f"[{_SPACE}]", f"[^{_SPACE}]"),
}
_DOT: Final = "[^\\n\\r\\u2028\\u2029]"


class PatternError(ValueError):
    """A schema pattern that cannot be compiled."""


def _translate(source: str) -> str:
    out: list[str] = []
    i, in_class = 0, False
    while i < len(source):
        ch = source[i]
        if ch == "\\":
            if i + 1 >= len(source):
                raise PatternError("\\ at end of pattern")
            nxt = source[i + 1]
            lower = nxt.lower()
            if lower in _CLASSES:
                inside, positive, negative = _CLASSES[lower]
                if in_class:
                    if nxt.isupper():
                        raise PatternError(f"\\{nxt} inside a class is not supported")
                    out.append(inside)
                else:
                    out.append(negative if nxt.isupper() else positive)
            elif nxt == "u" and source.startswith("{", i + 2):
                end = source.find("}", i + 3)
                if end < 0:
                    raise PatternError("unterminated \\u{")
                out.append(f"\\U{int(source[i + 3 : end], 16):08x}")
                i = end + 1
                continue
            elif nxt == "k" and source.startswith("<", i + 2):
                end = source.find(">", i + 3)
                out.append(f"(?P={source[i + 3 : end]})")
                i = end + 1
                continue
            elif nxt == "/":
                out.append("/")
            else:
                out.append(source[i : i + 2])
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            out.append(ch)
        elif ch == "[":
            in_class = True
            if source.startswith("[^]", i):
                out.append("[\\s\\S]")
                in_class = False
                i += 3
                continue
            out.append(ch)
        elif ch == ".":
            out.append(_DOT)
        elif ch == "$":
            out.append("\\Z")
        elif ch == "(" and source.startswith("(?", i):
            kind = source[i + 2 : i + 3]
            if kind == "<" and source[i + 3 : i + 4] not in ("=", "!"):
                out.append("(?P<")
                i += 3
                continue
            if kind not in (":", "=", "!", "<"):  # JS has no inline flags, no (?P...)
                raise PatternError(f"Invalid regular expression: /{source}/: Invalid group")
            out.append(ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def compile_pattern(source: str) -> Callable[[str], bool]:
    """Return `RegExp(source, "u").test` as a Python function, or raise `PatternError`."""
    from mule.pi._pattern import pattern_problem, search

    why = pattern_problem(source)
    if why is not None:
        raise PatternError(f"pattern {source!r} is not a regular expression mule can use: {why}")
    return lambda text: search(source, text)


@functools.lru_cache(maxsize=256)
def is_js_regex(source: str) -> bool:
    """Return whether `source` compiles as an ECMAScript regex (the `regex` format)."""
    try:
        re.compile(_translate(source), re.ASCII)
    except (re.error, PatternError, ValueError, OverflowError, RecursionError, IndexError):
        return False
    return True


__all__ = ["PatternError", "compile_pattern", "is_js_regex"]
