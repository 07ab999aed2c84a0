"""A streaming server for pi RPC jobs: HTTP to start and cancel, `/ws` to watch and answer.

`create_app(config)` returns the Starlette app; `serve(config)` runs it under uvicorn on
127.0.0.1; `main(argv)` is `mule serve`. See docs/serve.md.
"""

from mule.pi import needs_extra

with needs_extra("server", "mule.serve"):
    from mule.serve._agents import OVERRIDABLE, AgentProfile
    from mule.serve._app import (
        DEFAULT_PORT,
        TOKEN_ENV,
        ServerConfig,
        create_app,
        is_loopback,
        serve,
    )
    from mule.serve._cli import build_parser, main
    from mule.serve._env import BASE_ALLOW, child_environment
    from mule.serve._jobs import JobManager, JobRequestError, ServerJob
    from mule.serve._setup import PI_INSTALL, SetupError
    from mule.serve._ws import CLOSE_TOO_SLOW, CLOSE_UNAUTHORIZED, ClientQueue

__all__ = [
    "BASE_ALLOW",
    "CLOSE_TOO_SLOW",
    "CLOSE_UNAUTHORIZED",
    "DEFAULT_PORT",
    "OVERRIDABLE",
    "PI_INSTALL",
    "TOKEN_ENV",
    "AgentProfile",
    "ClientQueue",
    "JobManager",
    "JobRequestError",
    "ServerConfig",
    "ServerJob",
    "SetupError",
    "build_parser",
    "child_environment",
    "create_app",
    "is_loopback",
    "main",
    "serve",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish

_publish(__name__, globals(), __all__)
