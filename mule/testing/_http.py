"""What every fake vendor server needs of HTTP/1.1: one request read whole, with h11."""

from __future__ import annotations

import anyio
from anyio.abc import SocketStream

from mule.pi import needs_extra

with needs_extra("testing", "mule.testing's fake servers"):
    import h11


async def read_request(
    conn: h11.Connection, stream: SocketStream
) -> tuple[h11.Request, bytes] | None:
    """Read the next request on `conn` (its head and whole body), or None if the client left.

    A malformed request, a closed connection or a client gone mid-request all give None.
    """
    request: h11.Request | None = None
    body = bytearray()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            return None
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive(65536)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                data = b""
            conn.receive_data(data)
            if not data and request is None:
                return None
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            return request, bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None


__all__ = ["read_request"]
