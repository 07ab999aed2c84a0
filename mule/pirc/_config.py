"""What the bridge needs to start pi: command line, child environment and limits."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, TypeAlias, final

from attrs import field, frozen

from mule.pirc._commands import ConfigError
from mule.pirc._framing import DEFAULT_DEPTH

ThinkingOption: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_LINE_DEPTH = DEFAULT_DEPTH
# A value pi's argument parser could read as an option: `-x`, `--x`, `--x=y` ("- x" is text).
_FLAG_LIKE = re.compile(r"-{1,2}[A-Za-z0-9]")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_SYSTEM_FILE = "system-prompt.md"


def project_pi() -> str:
    """Return the pi a checkout's `./dev setup` installs.

    That is `pi` beside this Python (`.venv/bin/pi`: pi 1.6.0 on the Node >= 22.19 that
    `./dev setup` puts in the venv, whatever `node` is on PATH), else the checkout's
    `node/node_modules/.bin/pi` (which runs on PATH's `node`).
    """
    beside = Path(sys.executable).parent / "pi"
    if beside.is_file():
        return str(beside)
    return str(Path(__file__).resolve().parents[2] / "node" / "node_modules" / ".bin" / "pi")


def default_pi_executable() -> str:
    """Return `$MULE_PI` if set, else `pi` on PATH, else `project_pi()`."""
    env = os.environ.get("MULE_PI")
    if env:
        return env
    found = shutil.which("pi")
    if found:
        return found
    return project_pi()


@final
@frozen(kw_only=True)
class BridgeConfig:
    """How to start one `pi --mode rpc` child and how long to wait for it.

    The API key reaches pi only through the child's environment: `api_key` is stored under the
    variable named `api_key_env` (for a custom provider, the name its models.json `apiKey` holds).

    Attributes:
        provider: pi's `--provider` (a built-in provider or one from models.json).
        model: pi's `--model`, the model id within the provider.
        api_key_env: The environment variable the child reads the key from (for example
            `ANTHROPIC_API_KEY`); None: pi finds its own key.
        api_key: The key, put into the child's environment under `api_key_env` (never in argv
            or `repr`).
        executable: The pi command: `$MULE_PI`, else `pi` on PATH, else the repo's
            `node/node_modules/.bin/pi`.
        cwd: The child's working directory (where pi's tools act); None: ours.
        agent_dir: pi's configuration directory (`PI_CODING_AGENT_DIR`: models.json, settings);
            None: pi's default under `HOME`.
        home: The child's `HOME`; None: inherited.
        tmpdir: The child's `TMPDIR`; None: inherited.
        tools: pi's built-in tools to enable (`--tools`, for example `("read", "ls")`); None:
            pi's default set.
        no_tools: Start pi with no tools at all (`--no-tools`; wins over `tools`).
        extensions: Extension files to load (`-e` each).
        skills: Skill files or directories to load (`--skill` each; loaded even with
            `no_discovery`).
        no_discovery: Load only what this config names: no extensions, skills, prompt
            templates, themes or context files (AGENTS.md) found on disk (default True).
        system_prompt: The text that replaces pi's system prompt; None: pi's own. Always text,
            never a path: pi reads a `--system-prompt` value naming an existing file as that
            file, so the bridge passes each non-empty prompt text as a private file it wrote
            (see `write_prompts`). To use a file's text, read it yourself.
        append_system_prompt: Texts appended to the system prompt, in order (text too).
        thinking: pi's thinking level (`--thinking`); None: the model's default.
        extra_args: More pi options, appended last and not checked.
        env: Variables set in the child's environment over the inherited ones.
        inherit_env: Start from our environment (default); False: only `PATH`, `env` and the
            variables the bridge sets.
        max_line_bytes: The longest stdout line read, in bytes (default 8 MB); a longer line
            is skipped and counted in `stats.frames.oversize_lines`.
        max_line_depth: The deepest nesting of arrays and objects decoded in one line
            (default 256); a deeper line is skipped and counted in `stats.frames.deep_lines`.
        event_buffer: Each subscriber's buffer, in events (default 100); see the pirc guide
            for what is dropped when it is full.
        command_timeout: Seconds a command waits for pi's response (default 30).
        start_timeout: Seconds pi may take, from its spawn, to write its first line (default
            120): a command without its own `time_limit` sent before then waits until the
            later of its `command_timeout` and this bound, since node loads pi for seconds and
            for far longer when many start at once on a busy machine.
        job_timeout: Seconds a job may run before it is aborted with `JobTimeout` (default
            300).
        ui_timeout: Seconds an extension dialog may stay unanswered before the bridge
            cancels it (default 300); None: no limit.
        write_timeout: Seconds one write to pi's stdin may take, waiting for the write lock
            included (default 10).
        stop_grace: Seconds `stop()` waits after closing stdin, and again after SIGTERM
            (default 5).
        abort_grace: Seconds `stop()` waits for a running job's abort to be answered
            (default 2).

    """

    provider: str
    model: str
    api_key_env: str | None = None
    api_key: str | None = field(default=None, repr=False)
    executable: str = field(factory=default_pi_executable)
    cwd: str | None = None
    agent_dir: str | None = None
    home: str | None = None
    tmpdir: str | None = None
    tools: tuple[str, ...] | None = None
    no_tools: bool = False
    extensions: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    no_discovery: bool = True
    system_prompt: str | None = None
    append_system_prompt: tuple[str, ...] = ()
    thinking: ThinkingOption | None = None
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(factory=dict)
    inherit_env: bool = True
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_line_depth: int = DEFAULT_MAX_LINE_DEPTH
    event_buffer: int = 100
    command_timeout: float = 30.0
    start_timeout: float = 120.0
    job_timeout: float = 300.0
    ui_timeout: float | None = 300.0
    write_timeout: float = 10.0
    stop_grace: float = 5.0
    abort_grace: float = 2.0

    def __attrs_post_init__(self) -> None:
        check_argv_values(self)
        check_bounds(self)

    def argv(self, prompt_dir: str | None = None) -> list[str]:
        """Return the child's command line (never holds the API key nor a prompt's text).

        Each non-empty prompt text is passed as the path of its file in `prompt_dir`, which
        `write_prompts()` returned: pi reads exactly the text, and no text can make pi open
        another file. An empty text (pi's own prompt) is passed as is.

        Raises:
            ValueError: The config has a prompt text and `prompt_dir` is None.

        """
        files = dict(self._prompt_files())
        if files and prompt_dir is None:
            raise ValueError("argv() needs the prompt_dir that write_prompts() returned")

        def prompt_arg(name: str, text: str) -> str:
            return os.path.join(prompt_dir, name) if prompt_dir is not None and text else text

        args = [self.executable, "--provider", self.provider, "--model", self.model]
        args += ["--mode", "rpc", "--no-session"]
        if self.no_tools:
            args.append("--no-tools")
        elif self.tools is not None:
            args += ["--tools", ",".join(self.tools)]
        if self.no_discovery:
            # Only what the config names: no skills, templates, themes or AGENTS.md from disk.
            args += ["--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes"]
            args.append("--no-context-files")
        for ext in self.extensions:
            args += ["-e", ext]
        for skill in self.skills:
            args += ["--skill", skill]
        if self.system_prompt is not None:
            args += ["--system-prompt", prompt_arg(_SYSTEM_FILE, self.system_prompt)]
        for i, extra in enumerate(self.append_system_prompt):
            args += ["--append-system-prompt", prompt_arg(_append_file(i), extra)]
        if self.thinking is not None:
            args += ["--thinking", self.thinking]
        args += list(self.extra_args)
        return args

    def _prompt_files(self) -> list[tuple[str, str]]:
        """Return (file name, text) for each non-empty prompt text."""
        files = [(_SYSTEM_FILE, self.system_prompt)] if self.system_prompt else []
        files += [(_append_file(i), t) for i, t in enumerate(self.append_system_prompt) if t]
        return files

    def write_prompts(self) -> str | None:
        """Write the prompt texts into a new private directory and return it (None: no texts).

        The directory (mode 0700) and its files (0600) are new and the caller's: it passes the
        directory to `argv()` and removes it (`shutil.rmtree`) once pi has exited.
        """
        files = self._prompt_files()
        if not files:
            return None
        root = tempfile.mkdtemp(prefix="mule-pi-prompts-")
        try:
            for name, text in files:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                fd = os.open(os.path.join(root, name), flags, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                    f.write(text)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return root

    def child_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Return the child's environment: base (or ours), overrides, offline flags, the key."""
        env = dict(os.environ if base is None else base) if self.inherit_env else {}
        if not self.inherit_env and "PATH" in os.environ:
            env["PATH"] = os.environ["PATH"]  # node must still be found
        env.update(self.env)
        env["PI_OFFLINE"] = "1"
        env["PI_TELEMETRY"] = "0"
        no_proxy = [p for p in env.get("NO_PROXY", "").split(",") if p]
        env["NO_PROXY"] = env["no_proxy"] = ",".join(
            no_proxy + [h for h in _LOOPBACK if h not in no_proxy]
        )
        if self.agent_dir is not None:
            env["PI_CODING_AGENT_DIR"] = self.agent_dir
        if self.home is not None:
            env["HOME"] = self.home
        if self.tmpdir is not None:
            env["TMPDIR"] = self.tmpdir
        if self.api_key_env is not None and self.api_key is not None:
            env[self.api_key_env] = self.api_key
        return env


def _append_file(index: int) -> str:
    return f"append-system-prompt-{index + 1}.md"


def _check_text(name: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{name} holds a lone surrogate (not valid Unicode text)") from None


def check_argv_values(config: BridgeConfig) -> None:
    """Refuse values that would reach pi's argv looking like an option (`ConfigError`).

    pi reads an option's value verbatim, but a value such as `--extension=x.ts` must not depend
    on that: per-job overrides come from clients. `extra_args` are options by design. Prompt
    texts never reach argv (they go through files, see `BridgeConfig.argv`): any text is
    fine there but one that is not valid Unicode. No argv word may hold a NUL or a lone
    surrogate (the OS could not pass it).
    """
    named: list[tuple[str, str | None]] = [
        ("provider", config.provider),
        ("model", config.model),
        ("thinking", config.thinking),
    ]
    named += [("tools", t) for t in config.tools or ()]
    named += [("extensions", e) for e in config.extensions]
    named += [("skills", s) for s in config.skills]
    for name, value in named:
        if value is not None and _FLAG_LIKE.match(value):
            raise ConfigError(f"{name} value {value[:40]!r} looks like a command-line option")
    words = [("executable", config.executable), *named]
    words += [("extra_args", a) for a in config.extra_args]
    words += [("cwd", config.cwd), ("agent_dir", config.agent_dir), ("home", config.home)]
    words += [("tmpdir", config.tmpdir)]
    for name, value in words:
        if value is not None:
            _check_text(name, value)
            if "\x00" in value:
                raise ConfigError(f"{name} value {value[:40]!r} holds a NUL character")
    texts = [("system_prompt", config.system_prompt)]
    texts += [("append_system_prompt", a) for a in config.append_system_prompt]
    for name, text in texts:
        if text is not None:
            _check_text(name, text)
    for tool in config.tools or ():
        if not tool or "," in tool or tool != tool.strip():
            raise ConfigError(f"tools value {tool[:40]!r} is not a tool name")
    if not config.provider or not config.model:
        raise ConfigError("provider and model must be non-empty")


_SECONDS = (
    "command_timeout",
    "start_timeout",
    "job_timeout",
    "ui_timeout",
    "write_timeout",
    "stop_grace",
    "abort_grace",
)
_COUNTS = ("max_line_bytes", "max_line_depth", "event_buffer")


def check_bounds(config: BridgeConfig) -> None:
    """Refuse a timeout, grace or size that is not a positive number (`ConfigError`).

    A zero, negative or NaN bound would fire at once, never, or unpredictably (anyio's
    deadlines compare with it); `math.inf` is allowed and means no bound. `ui_timeout=None`
    leaves dialogs to pi's own limit.
    """
    for name in _SECONDS:
        value: object = getattr(config, name)
        if value is None and name == "ui_timeout":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ConfigError(f"{name} must be a positive number of seconds, not {value!r}")
    for name in _COUNTS:
        count: object = getattr(config, name)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"{name} must be a positive whole number, not {count!r}")


__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_LINE_DEPTH",
    "BridgeConfig",
    "ThinkingOption",
    "check_argv_values",
    "check_bounds",
    "default_pi_executable",
    "project_pi",
]
