"""`mule serve` (and `python -m mule.serve`): options, the start-up checks, then uvicorn."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import secrets
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, final
from urllib.parse import urlsplit

import attrs
from attrs import frozen

from mule.pi import needs_extra
from mule.pirc import BridgeConfig
from mule.serve._agents import AgentProfile
from mule.serve._app import DEFAULT_PORT, ServerConfig, bind_socket, is_loopback, serve, url_of
from mule.serve._env import TOKEN_ENV, child_environment
from mule.serve._setup import (
    ModelSetup,
    PiExecutable,
    SetupError,
    check_pi,
    find_pi,
    make_agent_dir,
    model_setup,
    resolve_paths,
    split_model,
)

EXIT_USAGE: Final = 2
_EXIT_INTERRUPTED: Final = (
    130  # as `mule run`: stopped by Ctrl-C (uvicorn re-raises it once shut down)
)
_THINKING: Final = ("off", "minimal", "low", "medium", "high", "xhigh")


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of `mule serve`."""
    p = argparse.ArgumentParser(
        prog="mule serve",
        description="Serve pi RPC jobs over HTTP and a WebSocket, with a browser page. "
        f"The token comes from ${TOKEN_ENV} or is generated and printed. The model options "
        "are those of `mule run`; the API key comes from the provider's environment variable "
        "(a custom --base-url server's from $MULE_API_KEY, if it needs one).",
    )
    model = p.add_argument_group("model (as for mule run)")
    model.add_argument(
        "--model", "-m", required=True, help="PROVIDER/MODEL, or MODEL with --provider"
    )
    model.add_argument("--provider", help="the provider (when --model is a bare model id)")
    model.add_argument(
        "--base-url",
        help="endpoint override; with an unknown provider, an OpenAI-compatible server "
        "(Ollama, llama.cpp, vLLM), e.g. http://127.0.0.1:11434/v1",
    )
    model.add_argument("--api", help="the wire API of --base-url (default openai-completions)")
    model.add_argument(
        "--agent-dir",
        help="use this pi agent dir (its models.json, auth.json) instead of a generated one",
    )
    pi = p.add_argument_group("pi")
    pi.add_argument("--pi", default=None, help="the pi executable (default: $MULE_PI, PATH, node/)")
    pi.add_argument("--cwd", help="the jobs' working directory (default: this one)")
    pi.add_argument("--tools", help="comma-separated pi tools (default: pi's own set)")
    pi.add_argument("--no-tools", action="store_true", help="run pi with no tools")
    pi.add_argument(
        "--extension", "-e", action="append", default=[], help="a pi extension (repeatable)"
    )
    pi.add_argument(
        "--skill", action="append", default=[], help="a pi skill file or directory (repeatable)"
    )
    pi.add_argument("--thinking", choices=_THINKING)
    pi.add_argument("--system-prompt", help="replace pi's system prompt")
    pi.add_argument(
        "--agents",
        metavar="FILE",
        help='agent profiles clients pick by name, as JSON: {"NAME": {"model": ..., '
        '"system_prompt": ..., "tools": [...], "extensions": [...], "skills": [...], '
        '"overridable": [...]}} (paths relative to the file)',
    )
    pi.add_argument("--default-agent", metavar="NAME", help="the agent of a job that names none")
    pi.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="also give pi this environment variable (repeatable; the token never)",
    )
    limits = p.add_argument_group("limits")
    limits.add_argument("--job-timeout", type=float, default=300.0, help="seconds per job")
    limits.add_argument("--ui-timeout", type=float, default=300.0, help="seconds per dialog")
    limits.add_argument(
        "--command-timeout", type=float, default=30.0, help="seconds for pi to answer a command"
    )
    limits.add_argument(
        "--start-timeout",
        type=float,
        default=120.0,
        help="seconds a starting pi may take to answer its first command",
    )
    limits.add_argument("--max-jobs", type=int, default=4, help="concurrent jobs (one pi each)")
    limits.add_argument("--client-queue", type=int, default=256, help="frames per slow client")
    net = p.add_argument_group("network")
    net.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    net.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (0: any free one)")
    net.add_argument(
        "--allow-remote", action="store_true", help="allow binding a non-loopback address"
    )
    net.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also accept browsers on /ws from this origin, e.g. https://ops.example "
        "(repeatable; default: only the page's own loopback origin)",
    )
    return p


@final
@frozen
class Prepared:
    """A checked server config, the pi it runs, and the generated agent dir (removed at exit)."""

    config: ServerConfig
    pi: PiExecutable
    temp_agent_dir: Path | None


def prepare(
    args: argparse.Namespace,
    token: str,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Prepared:
    """Check everything once and build the server config; raise `SetupError` (or ValueError)."""
    env = os.environ if environ is None else environ
    here = Path.cwd() if cwd is None else cwd
    if not is_loopback(args.host) and not args.allow_remote:
        raise SetupError(
            f"refusing to bind to non-loopback address {args.host!r}; pass --allow-remote "
            "if every client on that network may try the token"
        )
    for origin in args.allow_origin:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise SetupError(f"--allow-origin {origin!r}: expected SCHEME://HOST[:PORT]")
    for name in args.pass_env:
        if name == TOKEN_ENV:
            raise SetupError(f"--pass-env {TOKEN_ENV}: the server's token never reaches pi")
    provider, model = split_model(args.model, args.provider)
    if args.agent_dir is not None:
        if args.base_url is not None or args.api is not None:
            raise SetupError(
                "--agent-dir brings its own models.json: put the base URL and API there, "
                "or leave --agent-dir out"
            )
        setup = ModelSetup(provider=provider, model=model)
        agent_dir: str | None = resolve_paths((args.agent_dir,), here, "--agent-dir")[0]
    else:
        setup = model_setup(provider, model, base_url=args.base_url, api=args.api, environ=env)
        agent_dir = None
    extensions = resolve_paths(tuple(args.extension), here, "extension")
    skills = resolve_paths(tuple(args.skill), here, "skill")
    agents = load_agents(resolve_paths((args.agents,), here, "--agents")[0]) if args.agents else {}
    job_cwd = resolve_paths((args.cwd,), here, "--cwd")[0] if args.cwd else str(here)
    path, source = find_pi(args.pi, env)
    pi = check_pi(path, source, child_environment(env, provider=provider, allow=args.pass_env))
    temp = None
    if agent_dir is None:
        temp = make_agent_dir(setup)
        agent_dir = str(temp)
    try:
        tools = None
        if args.tools:
            tools = tuple(t.strip() for t in args.tools.split(",") if t.strip())
        bridge = BridgeConfig(
            provider=provider,
            model=model,
            api_key_env=setup.key_env if setup.key is not None else None,
            api_key=setup.key,
            executable=pi.path,
            cwd=job_cwd,
            agent_dir=agent_dir,
            tools=tools,
            no_tools=args.no_tools,
            extensions=extensions,
            skills=skills,
            thinking=args.thinking,
            system_prompt=args.system_prompt,
            job_timeout=args.job_timeout,
            ui_timeout=args.ui_timeout,
            command_timeout=args.command_timeout,
            start_timeout=args.start_timeout,
        )
        config = ServerConfig(
            bridge=bridge,
            token=token,
            host=args.host,
            port=args.port,
            allow_remote=args.allow_remote,
            max_jobs=args.max_jobs,
            client_queue=args.client_queue,
            env_allow=tuple(args.pass_env),
            allowed_origins=tuple(args.allow_origin),
            agents=agents,
            default_agent=args.default_agent,
        )
    except BaseException:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    return Prepared(config, pi, temp)


def load_agents(path: str) -> dict[str, AgentProfile]:
    """Read agent profiles from a JSON file; relative paths are the file's; raise SetupError."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SetupError(f"--agents {path}: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SetupError(f'--agents {path}: expected {{"NAME": {{settings}}, ...}}')
    agents: dict[str, AgentProfile] = {}
    for name, settings in data.items():
        try:
            profile = AgentProfile.from_json(settings)
        except ValueError as exc:
            raise SetupError(f"--agents {path}: agent {name!r}: {exc}") from None
        here = file.parent
        if profile.extensions is not None:
            exts = resolve_paths(profile.extensions, here, f"agent {name!r} extension")
            profile = attrs.evolve(profile, extensions=exts)
        if profile.skills is not None:
            skills = resolve_paths(profile.skills, here, f"agent {name!r} skill")
            profile = attrs.evolve(profile, skills=skills)
        agents[name] = profile
    return agents


def main(argv: Sequence[str] | None = None) -> int:
    """Run `mule serve`; return the exit code (2 for a usage or setup error, before binding)."""
    args = build_parser().parse_args(argv)
    with needs_extra("server", "mule serve"):  # a missing extra first: nothing else helps then
        import uvicorn  # noqa: F401
    token = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)
    try:
        prepared = prepare(args, token)
    except ValueError as exc:  # SetupError, or a config the validators refuse
        print(f"mule serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    config = prepared.config
    try:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        try:
            sock = bind_socket(config.host, config.port)
        except OSError as exc:
            print(f"mule serve: cannot bind {config.host}:{config.port}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        b = config.bridge
        print(
            f"mule serve: pi {prepared.pi.version} ({prepared.pi.path}), "
            f"model {b.provider}/{b.model}",
            file=sys.stderr,
        )
        shown = token if TOKEN_ENV not in os.environ else None
        print(f"mule serve: open {url_of(sock, shown)}", file=sys.stderr, flush=True)
        with sock, contextlib.suppress(KeyboardInterrupt):
            serve(config, sock)
            return 0
        return _EXIT_INTERRUPTED
    finally:
        if prepared.temp_agent_dir is not None:
            shutil.rmtree(prepared.temp_agent_dir, ignore_errors=True)


__all__ = ["EXIT_USAGE", "Prepared", "build_parser", "load_agents", "main", "prepare"]
