"""Who a request is, what it may see, and what the server accepts from a client before parsing.

* Principals. The server token is the `owner` principal. It may mint client credentials
  (`POST /clients`); each minted token is a principal of its own. A job belongs to the principal
  that started it, plus those it granted (`POST /jobs/{id}/grant`). Any other principal is told
  the job does not exist.
* Client JSON (HTTP bodies, WebSocket frames) is bounded in size and depth and is decoded
  without recursion errors; every refusal is a `ClientJsonError` with its reason.
* `/ws` checks the browser's `Origin`: absent (not a browser), the page's own origin on a
  loopback host (or the bound host), or one the host lists.
* `?token=` is taken out of the request before anything can log the URL.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Final, final
from urllib.parse import parse_qsl, urlencode, urlsplit

OWNER: Final = "owner"
MAX_CLIENTS: Final = 1000
MAX_BODY_BYTES: Final = 1024 * 1024
MAX_DEPTH: Final = 32
QUERY_TOKEN_KEY: Final = "mule.query_token"
# A JSON escape of a UTF-16 surrogate: the only way a lone one gets into a decoded document.
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")


class ClientJsonError(ValueError):
    """A client's JSON that the server refuses: too big, too deep, or not JSON."""


class BodyTooLarge(ClientJsonError):
    """A body over `MAX_BODY_BYTES` (answered with 413)."""


def _deeper_than(value: object, limit: int) -> bool:
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[object] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _lone_surrogate(value: object) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def client_json(text: str | bytes) -> Any:
    """Decode a client's JSON document; raise `ClientJsonError` saying why it is refused.

    Text must be Unicode: a lone surrogate (JSON's escape of one half of a UTF-16 pair, which no
    UTF-8 writer can encode) is refused too.
    """
    if len(text) > MAX_BODY_BYTES:
        raise BodyTooLarge(f"JSON larger than {MAX_BODY_BYTES} bytes")
    try:
        value = json.loads(text)
    except RecursionError:
        raise ClientJsonError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # not JSON, not UTF-8, an integer of too many digits
        raise ClientJsonError(f"invalid JSON: {exc}") from None
    if _deeper_than(value, MAX_DEPTH):
        raise ClientJsonError(f"JSON nested deeper than {MAX_DEPTH} levels")
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if (_SURROGATE_ESCAPE.search(raw) or b"\xed" in raw) and _lone_surrogate(value):
        raise ClientJsonError("JSON holds a lone surrogate (not valid Unicode text)")
    return value


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@final
class Principals:
    """The server token and the client tokens minted from it, by digest (never kept in clear)."""

    def __init__(self, token: str) -> None:
        self._by_digest: dict[bytes, str] = {_digest(token): OWNER}

    def who(self, token: object) -> str | None:
        """Return the principal a bearer token authenticates, or None."""
        if not isinstance(token, str) or not token:
            return None
        return self._by_digest.get(_digest(token))  # a digest lookup: no timing on the secret

    def mint(self) -> tuple[str, str]:
        """Return a new (client id, token); raise `OverflowError` past `MAX_CLIENTS`."""
        if len(self._by_digest) > MAX_CLIENTS:
            raise OverflowError(f"at most {MAX_CLIENTS} clients")
        client = "client-" + secrets.token_hex(6)
        token = secrets.token_urlsafe(32)
        self._by_digest[_digest(token)] = client
        return client, token

    def known(self, client: str) -> bool:
        """Whether `client` names a principal."""
        return client in self._by_digest.values()


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def origin_ok(
    origin: str | None, host_header: str | None, bound: str, allowed: Iterable[str]
) -> bool:
    """Whether a WebSocket's `Origin` may connect (see the module docstring)."""
    if origin is None:
        return True  # not a browser: the token alone decides
    if origin in allowed:
        return True
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or host_header is None:
        return False
    if parts.netloc.lower() != host_header.lower():
        return False
    name = parts.hostname or ""
    return is_loopback(name) or name == bound.strip("[]")


ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


@final
class ScrubQueryToken:
    """ASGI middleware: move `?token=` out of the query string, so no access log prints it.

    The scope is changed in place: the server's own log lines read the same dict.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        query = scope.get("query_string", b"")
        if scope["type"] in ("http", "websocket") and b"token" in query:
            pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
            kept = [(k, v) for k, v in pairs if k != "token"]
            if len(kept) != len(pairs):
                scope[QUERY_TOKEN_KEY] = next(v for k, v in pairs if k == "token")
                scope["query_string"] = urlencode(kept).encode("latin-1")
        await self.app(scope, receive, send)


__all__ = [
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "OWNER",
    "BodyTooLarge",
    "ClientJsonError",
    "Principals",
    "ScrubQueryToken",
    "client_json",
    "is_loopback",
    "origin_ok",
]
