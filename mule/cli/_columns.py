"""Plain aligned columns for `mule models` and `mule journal list`: nothing a user copies is cut.

Columns are joined by two spaces and lines never end in spaces (as Pi's `--list-models` prints).
When a row is wider than the terminal, its first cell (the id) keeps its own line and the other
cells follow on the next line, indented to their columns: ids stay whole at 80 columns, and
piped output (no width) is one line per row, ready for grep and cut.
"""

from __future__ import annotations

from collections.abc import Sequence

GAP = "  "


def _join(cells: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    parts = [
        cell.rjust(width) if align_right else cell.ljust(width)
        for cell, width, align_right in zip(cells, widths, right, strict=True)
    ]
    return GAP.join(parts).rstrip()


def columns(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    width: int | None = None,
    right: Sequence[bool] | None = None,
) -> list[str]:
    """Return the lines of a table; `width` None means unbounded (a pipe or a file).

    >>> columns(["id", "n"], [["a", "1"], ["bbb", "22"]], right=[False, True])
    ['id    n', 'a     1', 'bbb  22']
    >>> columns(["id", "n"], [["short", "1"], ["a-very-long-id", "2"]], width=12)
    ['id     n', 'short  1', 'a-very-long-id', '       2']
    """
    aligns = list(right) if right is not None else [False] * len(header)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    rest = sum(widths[1:]) + len(GAP) * (len(widths) - 1)
    first = widths[0]
    if width is not None and first + rest > width:
        fits = [len(r[0]) for r in rows if len(r[0]) + rest <= width]
        first = max(len(header[0]), *fits) if fits else len(header[0])
    widths[0] = first
    lines = [_join(header, widths, aligns)]
    for row in rows:
        if len(row[0]) > first:  # the id whole on its own line; its values under their columns
            lines.append(row[0])
            lines.append(_join(["", *row[1:]], widths, aligns))
        else:
            lines.append(_join(row, widths, aligns))
    return lines


__all__ = ["columns"]
