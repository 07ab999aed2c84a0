"""The Starlette app: token-authenticated job endpoints, the `/ws` stream and the browser page."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

from attrs import field, frozen
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from mule.pi import needs_extra, stringify
from mule.pirc import BridgeConfig
from mule.serve._agents import AgentProfile, check_agents
from mule.serve._auth import (
    MAX_BODY_BYTES,
    OWNER,
    BodyTooLarge,
    ClientJsonError,
    Principals,
    ScrubQueryToken,
    client_json,
    is_loopback,
)
from mule.serve._connection import websocket_endpoint
from mule.serve._env import TOKEN_ENV
from mule.serve._jobs import JobManager, JobRequestError, ServerJob, TooManyJobs

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger("mule.serve")

STATIC: Final = Path(__file__).parent / "static"
DEFAULT_PORT: Final = 8765
_CSP: Final = (
    "default-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'"
)


def _check_host(instance: ServerConfig, attribute: object, host: str) -> None:
    if not is_loopback(host) and not instance.allow_remote:
        raise ValueError(
            f"refusing to bind to non-loopback address {host!r}; pass allow_remote=True "
            "(--allow-remote) if every client on that network may try the token"
        )


def _check_token(instance: ServerConfig, attribute: object, token: str) -> None:
    if len(token) < 16:
        raise ValueError("the server token must have at least 16 characters")


def _check_allow(instance: ServerConfig, attribute: object, names: tuple[str, ...]) -> None:
    if TOKEN_ENV in names:
        raise ValueError(f"env_allow must not name {TOKEN_ENV}: the token never reaches pi")


@final
@frozen(kw_only=True)
class ServerConfig:
    """How to serve: the bridge config every job starts from, the token, the bind and limits.

    `client_queue` / `client_queue_bytes` bound each WebSocket client's unsent frames (see
    "Slow clients" in the serve guide); `bridge_buffer` is the job's own subscription to its
    bridge. `/ws` accepts browsers from the page's own loopback origin, plus `allowed_origins`.
    Each job's pi gets a minimal environment: `env_allow` names the variables of ours it may
    see besides the base set and its provider's key.

    Attributes:
        bridge: The pi config every job starts from (a job's request may override parts).
        token: The server's bearer token, at least 16 characters; its holder owns every job.
            Never passed to pi, never in `repr`.
        allow_remote: Allow `host` to be a non-loopback address (default False: refused).
        host: The address to bind (default `127.0.0.1`).
        port: The TCP port to bind (default 8765).
        max_jobs: Jobs that may run at once; one more is refused with 429 (default 4).
        keep_jobs: Ended jobs kept for `GET /jobs` and replay; older ones are forgotten
            (default 100).
        client_queue: Each WebSocket client's unsent frames, at most (default 256).
        client_queue_bytes: Each WebSocket client's unsent bytes, at most (default 16 MB).
        bridge_buffer: Each job's subscription to its bridge, in events (default 1000).
        auth_timeout: Seconds a `/ws` client without `?token=` has to send its auth message
            (default 10).
        close_timeout: Seconds the server waits for a too-slow client's close frame to go
            out before dropping the socket (default 10).
        cancel_wait: Seconds `POST /jobs/{id}/cancel` and `DELETE /jobs/{id}` wait for the
            job to end before answering 202 (default 15).
        env_allow: Names of our environment variables a job's pi may also see (never the
            server token's variable).
        allowed_origins: Browser origins `/ws` accepts besides the page's own loopback one.
        agents: Named agent profiles clients pick with `"agent": NAME` (see `AgentProfile`):
            each is `bridge` with the profile's settings, and lets clients override only what
            it names.
        default_agent: The agent a job without `"agent"` runs; None: `bridge` itself, with
            every setting of `OVERRIDABLE` open to clients.

    """

    bridge: BridgeConfig
    token: str = field(repr=False, validator=_check_token)
    allow_remote: bool = False
    host: str = field(default="127.0.0.1", validator=_check_host)
    port: int = DEFAULT_PORT
    max_jobs: int = 4
    keep_jobs: int = 100
    client_queue: int = 256
    client_queue_bytes: int = 16 * 1024 * 1024
    bridge_buffer: int = 1000
    auth_timeout: float = 10.0
    close_timeout: float = 10.0
    cancel_wait: float = 15.0
    env_allow: tuple[str, ...] = field(default=(), validator=_check_allow)
    allowed_origins: tuple[str, ...] = ()
    agents: Mapping[str, AgentProfile] = field(factory=dict)
    default_agent: str | None = None

    def __attrs_post_init__(self) -> None:
        check_agents(self.bridge, self.agents, self.default_agent)


@final
class _Json(JSONResponse):
    """JSON written as the WebSocket frames are: a lone surrogate is escaped.

    A model's text can hold one (pi passes on JSON's escape): escaped, it is never an encoding
    error that turns a listing into a 500.
    """

    def render(self, content: Any) -> bytes:
        return stringify(content).encode("utf-8")


def _unauthorized() -> Response:
    return _Json({"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": "Bearer"})


def _bearer(request: Request) -> str:
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return given.strip() if scheme.lower() == "bearer" else ""


def _error(message: str, status: int) -> Response:
    return _Json({"error": message}, status_code=status)


async def _body(request: Request) -> Any:
    """Read a bounded JSON body; raise `ClientJsonError` (`BodyTooLarge` past the limit)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise BodyTooLarge(f"body larger than {MAX_BODY_BYTES} bytes")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise BodyTooLarge(f"body larger than {MAX_BODY_BYTES} bytes")
    return client_json(bytes(data))


Handler = Callable[[Request, str], Awaitable[Response]]


def create_app(config: ServerConfig) -> Starlette:
    """Return the server's Starlette app; its lifespan owns the jobs (all reaped at shutdown)."""
    manager = JobManager(config)
    principals = Principals(config.token)

    def authed(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def wrapped(request: Request) -> Response:
            who = principals.who(_bearer(request))
            if who is None:
                return _unauthorized()
            try:
                return await handler(request, who)
            except BodyTooLarge as exc:
                return _error(str(exc), 413)
            except ClientJsonError as exc:
                return _error(str(exc), 400)

        return wrapped

    def find(request: Request, who: str) -> ServerJob | None:
        return manager.get(str(request.path_params["job_id"]), who)

    async def list_jobs(request: Request, who: str) -> Response:
        return _Json({"jobs": [j.summary() for j in manager.jobs(who)]})

    async def start_job(request: Request, who: str) -> Response:
        body = await _body(request)
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
            return _error('expected {"prompt": "...", "config": {}}', 400)
        overrides = body.get("config") or {}
        if not isinstance(overrides, dict):
            return _error("config must be an object", 400)
        agent = body.get("agent")
        if agent is not None and not isinstance(agent, str):
            return _error("agent must be a string (an agent's name)", 400)
        try:
            job = manager.start(body["prompt"], overrides, owner=who, agent=agent)
        except TooManyJobs as exc:
            return _error(str(exc), 429)
        except JobRequestError as exc:
            return _error(str(exc), 400)
        return _Json(job.to_json(), status_code=201)

    async def list_agents(request: Request, who: str) -> Response:
        agents = [p.to_json(name) for name, p in config.agents.items()]
        return _Json({"agents": agents, "default": config.default_agent})

    async def get_job(request: Request, who: str) -> Response:
        job = find(request, who)
        if job is None:
            return _error("no such job", 404)
        return _Json(job.to_json())

    async def cancel_job(request: Request, who: str) -> Response:
        job = find(request, who)
        if job is None:
            return _error("no such job", 404)
        await manager.cancel(job, wait=config.cancel_wait)
        return _Json(job.to_json(), status_code=200 if job.finished else 202)

    async def delete_job(request: Request, who: str) -> Response:
        job = find(request, who)
        if job is None:
            return _error("no such job", 404)
        removed = await manager.remove(job, wait=config.cancel_wait)
        return _Json(job.to_json(), status_code=200 if removed else 202)

    async def grant_job(request: Request, who: str) -> Response:
        job = find(request, who)
        if job is None:
            return _error("no such job", 404)
        if job.owner != who:
            return _error("only the job's creator can grant it", 403)
        body = await _body(request)
        client = body.get("client") if isinstance(body, dict) else None
        if not isinstance(client, str) or not principals.known(client):
            return _error('expected {"client": CLIENT_ID} naming a known client', 400)
        job.granted.add(client)
        manager.jobs_changed()
        return _Json({"job": job.id, "granted": sorted(job.granted)})

    async def new_client(request: Request, who: str) -> Response:
        if who != OWNER:
            return _error("only the server token can create clients", 403)
        try:
            client, token = principals.mint()
        except OverflowError as exc:
            return _error(str(exc), 429)
        return _Json({"client": client, "token": token}, status_code=201)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Content-Security-Policy": _CSP})

    async def ws(websocket: WebSocket) -> None:
        await websocket_endpoint(websocket, manager, config, principals)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager:
            yield

    app = Starlette(
        routes=[
            Route("/", index),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
            Route("/jobs", authed(list_jobs), methods=["GET"]),
            Route("/jobs", authed(start_job), methods=["POST"]),
            Route("/jobs/{job_id}", authed(get_job), methods=["GET"]),
            Route("/jobs/{job_id}", authed(delete_job), methods=["DELETE"]),
            Route("/jobs/{job_id}/cancel", authed(cancel_job), methods=["POST"]),
            Route("/jobs/{job_id}/grant", authed(grant_job), methods=["POST"]),
            Route("/clients", authed(new_client), methods=["POST"]),
            Route("/agents", authed(list_agents), methods=["GET"]),
            WebSocketRoute("/ws", ws),
        ],
        lifespan=lifespan,
        middleware=[Middleware(ScrubQueryToken)],
    )
    app.state.manager = manager
    app.state.config = config
    return app


def bind_socket(host: str, port: int) -> socket.socket:
    """Open a listening TCP socket (port 0 picks a free one)."""
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(addr)
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket, token: str | None = None) -> str:
    """Return the page's URL for a bound socket (the token goes in the fragment, never sent)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"#token={token}" if token else "")


def uvicorn_config(app: Starlette, log_level: str = "info") -> uvicorn.Config:
    """Return the uvicorn settings `serve` runs `app` with (the tests' server uses them too).

    A WebSocket message larger than mule accepts (`MAX_BODY_BYTES`) is refused by the protocol
    layer, from its frame header: close code 1009, before its payload is read (uvicorn's
    default would buffer up to 16 MB for mule to refuse at 1 MB).
    """
    with needs_extra("server", "mule serve"):
        import uvicorn

    return uvicorn.Config(
        app,
        ws="websockets-sansio",
        ws_max_size=MAX_BODY_BYTES,
        lifespan="on",
        log_level=log_level,
        timeout_graceful_shutdown=30,
    )


def serve(config: ServerConfig, sock: socket.socket | None = None) -> None:
    """Serve until interrupted (uvicorn, asyncio) on `sock`, else on `config.host:port`."""
    with needs_extra("server", "mule serve"):
        import uvicorn

    if not is_loopback(config.host) and not config.allow_remote:
        raise ValueError(f"refusing to bind to non-loopback address {config.host!r}")
    sock = sock or bind_socket(config.host, config.port)
    uvicorn.Server(uvicorn_config(create_app(config))).run(sockets=[sock])


__all__ = [
    "DEFAULT_PORT",
    "TOKEN_ENV",
    "ServerConfig",
    "bind_socket",
    "create_app",
    "is_loopback",
    "serve",
    "url_of",
    "uvicorn_config",
]
