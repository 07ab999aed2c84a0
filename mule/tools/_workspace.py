"""Where the coding tools work: a root directory, paths confined to it, and what counts as text."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, final

from attrs import frozen
from returns.result import Failure, Result, Success

MAX_OUTPUT_BYTES: Final = 50 * 1024
"""The most text any coding tool returns to the model (the rest is cut, with a note)."""
BINARY_SNIFF_BYTES: Final = 8192
SKIPPED_DIRS: Final = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".tox",
        ".hypothesis",
    }
)
"""Directories that hold tooling or dependencies rather than a project's own files."""


@final
@frozen
class Workspace:
    """Where the tools work: paths resolve against `root`, and stay inside it when `confined`.

    Attributes:
        root: The absolute directory relative paths resolve against (`Workspace.at` resolves
            symlinks).
        confined: Refuse paths that resolve outside `root` (symlinks included).

    """

    root: Path
    confined: bool = True

    @classmethod
    def at(cls, root: str | os.PathLike[str], *, confined: bool = True) -> Workspace:
        """Return a workspace rooted at `root` (made absolute, symlinks resolved)."""
        return cls(Path(root).resolve(), confined)

    def resolve(self, path: str) -> Result[Path, str]:
        """Return the absolute path for a tool's `path` argument, or why it is refused.

        Symlinks are resolved first, so a link pointing out of the root is refused too.
        """
        if "\x00" in path:
            return Failure("Path contains a NUL character")
        try:
            given = Path(path).expanduser()
        except RuntimeError:  # `~name` for a user this machine does not know
            return Failure(f"Path {path!r} names an unknown user's home directory")
        target = (self.root / given).resolve()
        if self.confined and not target.is_relative_to(self.root):
            return Failure(
                f"Path {path!r} is outside the working directory {str(self.root)!r}; "
                "the tools are confined to it"
            )
        return Success(target)

    def show(self, path: Path) -> str:
        """Return `path` relative to the root when inside it (how results name files)."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return str(path)
        return rel.as_posix() or "."


WorkspaceLike = Workspace | str | os.PathLike[str]
"""A `Workspace`, or a directory to confine a new one to."""


def as_workspace(where: WorkspaceLike) -> Workspace:
    """Return `where` itself if it is a `Workspace`, else a confined workspace rooted there."""
    return where if isinstance(where, Workspace) else Workspace.at(where)


def is_binary(path: Path) -> bool:
    """Return whether a file looks binary: a NUL byte, or invalid UTF-8, near its start."""
    with path.open("rb") as f:
        head = f.read(BINARY_SNIFF_BYTES)
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the sniff window is not evidence of binary data.
        return exc.start < len(head) - 3
    return False


__all__ = [
    "MAX_OUTPUT_BYTES",
    "SKIPPED_DIRS",
    "Workspace",
    "WorkspaceLike",
    "as_workspace",
    "is_binary",
]
