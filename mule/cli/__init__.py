"""The `mule` command: `run`, `demo`, `models`, `journal list|show` and `serve`.

Exit codes: 0 the run completed, 1 it failed (the MuleError's phase and message are printed),
2 a usage or setup problem (unknown model, no API key), 130 it was cancelled (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from mule.cli._codes import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_TOOLS,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_USAGE,
    THINKING_LEVELS,
)
from mule.pi import PI_CODING_AGENT_RETRY_DEFAULTS, MissingExtraError, RetryPolicy, needs_extra
from mule.pi.providers import registered_apis

_EPILOG = """\
exit codes: 0 completed, 1 failed, 2 usage or setup error, 130 cancelled (Ctrl-C)
API keys come from the provider's environment variable (OPENAI_API_KEY, ANTHROPIC_API_KEY,
GEMINI_API_KEY, ...) or Pi's models.json ($PI_CODING_AGENT_DIR or ~/.pi/agent/models.json).
"""


def _tools(value: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in value.split(",") if t.strip())


def _url(value: str) -> str:
    """Accept only an absolute http(s) URL, so a typo is a usage error, not a retried failure."""
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 (raises ValueError for a bad port)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        example = value if "://" in value else f"http://{value}"
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an http(s) URL with a host; did you mean {example!r}?"
        )
    return value


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 <= seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r} must be 0 or more seconds")
    return seconds


class _Version(argparse.Action):
    """`--version`, reading the package metadata only when asked (importlib.metadata is slow)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version"
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        import mule

        sys.stdout.write(f"mule {mule.__version__}\n")
        parser.exit()


def build_parser(*, defaults: bool = True) -> argparse.ArgumentParser:
    """Return the argument parser of the `mule` command.

    With `defaults=False`, `run` options that are not given are left out of the namespace (so
    a resume can tell the options given from the ones to restore from the journal).
    """
    parser = argparse.ArgumentParser(
        prog="mule",
        description="Run Pi's agent loop from the terminal.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = commands.add_parser(
        "run",
        help="run a prompt against a model, with tools",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("prompt", nargs="?", help="the user's message (none with --resume)")
    run.add_argument(
        "--model", "-m", help="provider/id (see `mule models`); a resumed run keeps its own"
    )
    run.add_argument(
        "--base-url",
        type=_url,
        help="endpoint override; with an unknown provider, an OpenAI-compatible server "
        "(Ollama, llama.cpp, vLLM); its key comes from MULE_API_KEY if it needs one",
    )
    run.add_argument(
        "--api",
        choices=registered_apis(),
        help="the wire API to speak (default: the model's; openai-completions for an unknown "
        "provider), e.g. openai-completions for a chat-only server",
    )
    run.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=DEFAULT_IDLE_TIMEOUT_S,
        metavar="SECONDS",
        help="give up on a model stream silent this long, as a retryable error "
        f"(default {DEFAULT_IDLE_TIMEOUT_S:g}; 0 = wait forever)",
    )
    run.add_argument("--system", help="system prompt (default: a short one naming the tools)")
    run.add_argument(
        "--tools",
        type=_tools,
        default=DEFAULT_TOOLS,
        help=f"comma-separated built-in tools (default {','.join(DEFAULT_TOOLS)}; '' for none)",
    )
    run.add_argument("--journal", metavar="PATH", help="record the run in a SQLite journal")
    run.add_argument(
        "--resume",
        metavar="RUN_ID",
        help="resume a run from the journal (a unique prefix of its id will do), with the "
        "settings it was started with; options given here win",
    )
    run.add_argument("--json", action="store_true", help="write one mule event per line")
    run.add_argument("--yes", "-y", action="store_true", help="run bash commands without asking")
    run.add_argument("--thinking", choices=THINKING_LEVELS, help="reasoning level")
    run.add_argument(
        "--retries",
        type=int,
        default=PI_CODING_AGENT_RETRY_DEFAULTS.max_retries,
        metavar="N",
        help="retries of a transient model error (Pi coding-agent default "
        f"{PI_CODING_AGENT_RETRY_DEFAULTS.max_retries}; 0 = none)",
    )
    run.add_argument(
        "--retry-base-ms",
        type=float,
        default=PI_CODING_AGENT_RETRY_DEFAULTS.base_delay_ms,
        metavar="MS",
        help="first retry delay, doubled each time "
        f"(default {PI_CODING_AGENT_RETRY_DEFAULTS.base_delay_ms:g})",
    )
    run.add_argument(
        "--provider-retries",
        type=int,
        metavar="N",
        help="HTTP-level retries inside one model call (default 0, as in Pi 1.6.0)",
    )
    run.add_argument(
        "--cwd", type=Path, default=Path("."), help="working directory for the tools (default .)"
    )
    run.add_argument(
        "--unconfined",
        action="store_true",
        help="let read/ls/grep reach files outside the working directory",
    )
    run.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="'COMMAND ARGS'",
        help="add the tools of an MCP server run as this command (stdio; repeatable)",
    )
    run.add_argument(
        "--mcp-url",
        action="append",
        default=[],
        type=_url,
        metavar="URL",
        help="add the tools of an MCP server at this streamable-HTTP URL (repeatable)",
    )
    run.add_argument(
        "--otel",
        action="store_true",
        help="export OpenTelemetry traces and metrics over OTLP (OTEL_EXPORTER_OTLP_* variables)",
    )
    run.add_argument(
        "--bash-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="default timeout of one bash command (default 120)",
    )

    demo = commands.add_parser(
        "demo", help="try mule with a scripted model (no key, no network) and real tools"
    )
    demo.add_argument(
        "--cwd", type=Path, default=Path("."), help="directory to look at (default .)"
    )
    demo.add_argument("--json", action="store_true", help="write one mule event per line")
    demo.add_argument(
        "--delay-ms", type=float, default=12.0, help="pause between streamed events (default 12)"
    )

    serve = commands.add_parser(
        "serve",
        help="stream pi RPC jobs to WebSocket clients (see `mule serve --help`)",
        add_help=False,
    )
    serve.add_argument("args", nargs=argparse.REMAINDER)

    models = commands.add_parser("models", help="list the model registry")
    models.add_argument("--provider", "-p", help="only this provider's models")

    journal = commands.add_parser("journal", help="inspect a run journal (SQLite)")
    actions = journal.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list the recorded runs")
    where = "the journal file (default: $MULE_JOURNAL)"
    listing.add_argument("--journal", metavar="PATH", help=where)
    show = actions.add_parser("show", help="show one run's committed transcript")
    show.add_argument("run_id")
    show.add_argument("--journal", metavar="PATH", help=where)
    if not defaults:
        for action in run._actions:
            action.default = argparse.SUPPRESS
    return parser


def _restore_run(args: argparse.Namespace, argv: Sequence[str]) -> str | None:
    """Fill a resumed run's options from its journal; return why that failed, if it did."""
    from returns.result import Failure

    from mule.cli._settings import restore, stored_settings

    if args.resume is not None and args.prompt:
        return "--resume continues a run as it was; leave out the prompt"
    if args.resume is not None and args.journal is not None:
        found = stored_settings(Path(args.journal), args.resume)
        if isinstance(found, Failure):
            return str(found.failure())
        args.resume, stored = found.unwrap()
        given = set(vars(build_parser(defaults=False).parse_args(argv)))
        restore(args, given, stored)
    if args.model is None:
        return "--model is required (a resumed run keeps the one it was started with)"
    return None


def _dispatch(args: argparse.Namespace, argv: Sequence[str]) -> int:
    import anyio

    from mule.cli._run_command import RunOptions, demo_command, run_command

    match args.command:
        case "run":
            problem = _restore_run(args, argv)
            if problem is not None:
                print(f"mule run: {problem}", file=sys.stderr)
                return EXIT_USAGE
            from mule.cli._settings import settings_of

            opts = RunOptions(
                settings=settings_of(args),
                prompt=args.prompt,
                model=args.model,
                base_url=args.base_url,
                api=args.api,
                idle_timeout_s=args.idle_timeout or None,
                system=args.system,
                tools=args.tools,
                journal=args.journal,
                resume=args.resume,
                json=args.json,
                yes=args.yes,
                thinking=args.thinking,
                retry=RetryPolicy(
                    enabled=args.retries > 0,
                    max_retries=max(0, args.retries),
                    base_delay_ms=args.retry_base_ms,
                ),
                provider_retries=args.provider_retries,
                cwd=args.cwd.resolve(),
                confined=not args.unconfined,
                bash_timeout_s=args.bash_timeout,
                mcp=tuple(args.mcp),
                mcp_urls=tuple(args.mcp_url),
                otel=args.otel,
            )
            return anyio.run(run_command, opts)
        case "demo":
            cwd = args.cwd.resolve()
            return anyio.run(lambda: demo_command(cwd, json_mode=args.json, delay_ms=args.delay_ms))
        case "models":
            from returns.result import Failure
            from rich.console import Console

            from mule.cli._models import load_registry, print_models

            registry = load_registry()
            if isinstance(registry, Failure):
                Console(stderr=True).print(f"[red]{registry.failure()}[/]")
                return EXIT_USAGE
            return print_models(Console(), registry.unwrap(), args.provider)
        case "journal":
            from returns.result import Failure
            from rich.console import Console

            from mule.cli._journal import journal_path, open_journal, print_run, print_runs

            found = journal_path(args.journal)
            if isinstance(found, Failure):
                Console(stderr=True).print(found.failure(), style="red", markup=False)
                return EXIT_USAGE
            opened = open_journal(found.unwrap())
            if isinstance(opened, Failure):
                Console(stderr=True).print(f"[red]{opened.failure()}[/]")
                return EXIT_USAGE
            with opened.unwrap() as journal:
                if args.action == "list":
                    return print_runs(Console(), journal)
                return print_run(Console(), journal, args.run_id)
        case _:
            raise AssertionError(f"unhandled command {args.command!r}")


def _no_extra(exc: MissingExtraError, command: str) -> int:
    """Print the install line of a missing optional extra: a usage error, not a traceback."""
    again = MissingExtraError(exc.extra, exc.missing, f"mule {command}")  # the command's name
    print(f"mule: {again}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `mule` command; return its exit code."""
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["serve"]:  # the server owns its own options
        try:
            from mule.serve import main as serve_main

            return serve_main(given[1:])
        except MissingExtraError as exc:
            return _no_extra(exc, "serve")
    parser = build_parser()
    args = parser.parse_args(given)
    try:
        with needs_extra("cli", f"mule {args.command}"):  # rich, and httpx for the providers
            return _dispatch(args, given)
    except KeyboardInterrupt:  # Ctrl-C before the run installed its own handler
        print("cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    except MissingExtraError as exc:  # mcp, otel-export, ... raise their own
        return _no_extra(exc, args.command)
    except BrokenPipeError:  # `mule models | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit's flush does not fail again
        return EXIT_FAILED


__all__ = ["build_parser", "main"]
