"""A bytecode cache for the methods attrs generates for mule's own classes.

attrs writes each class's `__init__`, `__eq__`, `__hash__` and `__repr__` as Python source and
compiles it when the class is defined; for mule's hundred-odd classes that compiling was about
a quarter of `import mule`. Python caches a module's bytecode in `__pycache__`; this does the
same for attrs' generated code: while `mule` is imported, each script attrs compiles for a class
of mule's is looked up by its exact text (a changed class is a different text, so a stale entry
is never used), and the code is written to `mule/__pycache__` once the import is done. Only the
compiling is skipped: attrs still builds every class, runs the code and fills `linecache`.

When mule is the first to import attrs, the code of attrs' own classes (its validators,
`Attribute`, ...), defined while `import attr` runs, is kept the same way (`_WhenAttrsLoads`).
`mule._publish` compiles the annotation texts it resolves through `cached_compile`, which
uses the same table while the block runs (keyed by its own filename, `<annotation>`).

Like Python's own bytecode it is not written under `sys.dont_write_bytecode`, and a directory
that cannot be written is no error. The one number that differs from process to process in
attrs' scripts, the per-class salt of `__hash__` (a string hash), is left out of the key: a
class keeps the salt of the process that first compiled it, which is as random.
"""

from __future__ import annotations

import marshal
import os
import re
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_DIR = os.path.join(os.path.dirname(__file__), "__pycache__")
_FILE = os.path.join(_DIR, f"attrs-code.{sys.implementation.cache_tag}.bin")
_OURS = (
    "<attrs generated "  # attrs' filename for a class's script: "<attrs generated methods mule."
)
_SALT = re.compile(r"(hash\(\(\n\s*)-?\d+,")


def _header() -> bytes:
    # The key is the script's exact text, so only the interpreter's bytecode format matters.
    return f"mule attrs code\n{sys.version}\n".encode()


def _load() -> dict[str, types.CodeType]:
    try:
        with open(_FILE, "rb") as f:
            data = f.read()
        header = _header()
        if not data.startswith(header):
            return {}
        table = marshal.loads(data[len(header) :])
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    return table if isinstance(table, dict) else {}


def _save(table: dict[str, types.CodeType]) -> None:
    if sys.dont_write_bytecode:
        return
    import tempfile  # only when there is something to write

    try:
        os.makedirs(_DIR, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=_DIR, prefix=".attrs-code.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_header() + marshal.dumps(table))
            os.chmod(tmp, os.stat(__file__).st_mode & 0o666)  # as Python's .pyc: the source's
            os.replace(tmp, _FILE)  # atomic: a concurrent import reads the old or the new file
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a read-only install: compile as attrs does


class _Table:
    """The code of one `import mule`: last time's (`known`) and what this one used."""

    __slots__ = ("compiled", "known", "used")

    def __init__(self, known: dict[str, types.CodeType]) -> None:
        self.known = known
        self.used: dict[str, types.CodeType] = {}
        self.compiled = 0

    def code(self, key: str, source: str, filename: str, mode: str) -> types.CodeType:
        code = self.known.get(key)
        if code is None:
            code = compile(source, filename, mode)
            self.compiled += 1
        self.used[key] = code
        return code


_active: _Table | None = None  # while `cached_attrs_code` runs


def cached_compile(source: str, filename: str, mode: str) -> types.CodeType:
    """`compile(source, filename, mode)`, reusing last import's code while mule is imported."""
    table = _active
    if table is None:
        return compile(source, filename, mode)
    return table.code(f"{filename}\n{mode}\n{source}", source, filename, mode)


class _WhenAttrsLoads:
    """A meta path finder that hands `attr._make` to `install` once it is loaded.

    attrs defines 28 classes of its own (its validators, `Attribute`, ...) while `import attr`
    runs; when mule is the first to import attrs, their code comes from the table too. Finding
    nothing itself, it only watches `attr`'s imports go by.
    """

    def __init__(self, install: Callable[[types.ModuleType], None]) -> None:
        self.install = install

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        make = sys.modules.get("attr._make") if fullname.startswith("attr.") else None
        if make is not None:
            self.install(make)


@contextmanager
def cached_attrs_code() -> Iterator[None]:
    """While the block runs, reuse the compiled code of mule's attrs classes (see the module)."""
    global _active
    table = _Table(_load())
    patched: list[tuple[types.ModuleType, Callable[..., Any]]] = []

    def install(make: types.ModuleType) -> None:
        original: Callable[..., Any] | None = getattr(make, "_compile_and_eval", None)
        if patched or original is None:  # done, or not defined yet (or a future attrs)
            return

        def compile_and_eval(
            script: str,
            globs: dict[str, Any] | None,
            locs: Any = None,
            filename: str = "",
        ) -> None:
            if not filename.startswith(_OURS) or not (" mule." in filename or " attr." in filename):
                original(script, globs, locs, filename)
                return
            key = filename + "\n" + _SALT.sub(r"\g<1>0,", script)
            eval(table.code(key, script, filename, "exec"), globs, locs)

        make._compile_and_eval = compile_and_eval  # type: ignore[attr-defined]
        patched.append((make, original))

    first = "attr" not in sys.modules  # then attrs' own classes are defined in the block
    watch = _WhenAttrsLoads(install)
    if first:
        sys.meta_path.insert(0, watch)
    try:
        try:
            from attr import _make
        except ImportError:  # pragma: no cover - attrs without the module: nothing to cache
            pass
        else:
            install(_make)
        _active = table
        yield
    finally:
        if first:
            sys.meta_path.remove(watch)
        for make, original in patched:
            make._compile_and_eval = original  # type: ignore[attr-defined]
        _active = None
    if not first:  # attrs came before mule: keep its classes' code for a process where not
        for key, code in table.known.items():
            if key.startswith(_OURS) and " attr." in key.partition("\n")[0]:
                table.used.setdefault(key, code)
    if patched and (table.compiled or table.used.keys() != table.known.keys()):
        _save(table.used)


__all__ = ["cached_attrs_code", "cached_compile"]
