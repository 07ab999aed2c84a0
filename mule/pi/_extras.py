"""One clear error for a missing optional extra: `with needs_extra("server", "mule.serve"): ...`.

Every module that imports a third-party package outside mule's core dependencies does so
inside `needs_extra`, so a missing package reads "mule.serve needs the 'server' extra: pip
install 'mule[server]' (missing: starlette)" instead of a bare `ModuleNotFoundError` raised
from deep inside an import chain.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import final


@final
class MissingExtraError(ImportError):
    """A feature needs an optional extra that is not installed.

    An `ImportError`, so code that already catches one keeps working.

    Attributes:
        extra: The extra to install (`pip install 'mule[EXTRA]'`).
        missing: The module that could not be found.
        what: The feature that needs it (`mule.serve`, `OTLP export`...).

    """

    def __init__(self, extra: str, missing: str, what: str) -> None:
        self.extra = extra
        self.missing = missing
        self.what = what
        super().__init__(
            f"{what} needs the {extra!r} extra: pip install 'mule[{extra}]' (missing: {missing})",
            name=missing,
        )


@contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """Turn a third-party `ModuleNotFoundError` raised inside into a `MissingExtraError`.

    A missing module of mule's own is a bug, not a missing extra: it propagates unchanged.

    >>> with needs_extra("providers", "a demo"):
    ...     import json
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        name = exc.name or ""
        if not name or name == "mule" or name.startswith("mule."):
            raise
        raise MissingExtraError(extra, name.split(".")[0], what) from exc


__all__ = ["MissingExtraError", "needs_extra"]
