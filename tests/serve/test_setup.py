"""`mule serve` start-up: model options into an agent dir, finding and checking pi, paths, env.

Real processes throughout: a stand-in `pi` is a real executable script, and the real pi's
`--version` is run where it is installed.

Tests the private rules of `mule.serve._setup` (`model_setup`, `make_agent_dir`, `find_pi`,
`check_pi`) and `mule.serve._cli.prepare`.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mule.pirc import project_pi
from mule.serve import PI_INSTALL, ServerConfig, SetupError, build_parser, child_environment, main
from mule.serve._cli import prepare
from mule.serve._setup import check_pi, find_pi, make_agent_dir, model_setup
from tests.pirc.helpers import PI, PI_CURRENT, PI_LEGACY, PI_SCRIPT, pi_available
from tests.pirc.old_node import OLD_NODE
from tests.serve.fixtures import TOKEN

needs_pi = pytest.mark.skipif(not pi_available(), reason="pi CLI not installed")


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_pi(tmp_path: Path) -> Path:
    return script(tmp_path / "pi", 'echo "0.73.1" >&2')


# -- the model -----------------------------------------------------------------------------------


def test_a_custom_provider_becomes_an_openai_compatible_models_json() -> None:
    """`--model local/m --base-url URL`: pi gets a provider with that URL and a named key."""
    setup = model_setup("local", "m", base_url="http://127.0.0.1:11434/v1/", environ={})
    assert setup.models_json == {
        "providers": {
            "local": {
                "baseUrl": "http://127.0.0.1:11434/v1",
                "api": "openai-completions",
                "apiKey": "MULE_API_KEY",
                "models": [{"id": "m"}],
            }
        }
    }
    assert (setup.key_env, setup.key) == ("MULE_API_KEY", "none")
    keyed = model_setup(
        "local", "m", base_url="http://h/v1", api="openai-responses", environ={"MULE_API_KEY": "k"}
    )
    assert keyed.key == "k"
    assert keyed.models_json["providers"]["local"]["api"] == "openai-responses"
    agent = make_agent_dir(setup)
    try:
        assert json.loads((agent / "models.json").read_text()) == setup.models_json
        assert stat.S_IMODE(agent.stat().st_mode) == 0o700
    finally:
        (agent / "models.json").unlink()
        agent.rmdir()


def test_a_known_provider_keeps_its_api_and_reads_its_own_key() -> None:
    """A catalogue model: no provider entry, its key variable passes through; a URL overrides."""
    env = {"ANTHROPIC_API_KEY": "sk-ant"}
    setup = model_setup("anthropic", "claude-sonnet-4-5", environ=env)
    assert setup.models_json == {"providers": {}}
    assert (setup.key_env, setup.key) == ("ANTHROPIC_API_KEY", None)
    moved = model_setup("openai", "gpt-4o-mini", base_url="http://127.0.0.1:9/v1", environ={})
    entry = moved.models_json["providers"]["openai"]
    assert entry == {"baseUrl": "http://127.0.0.1:9/v1", "apiKey": "MULE_API_KEY"}
    new = model_setup(
        "openai", "my-finetune", base_url="http://h/v1", environ={"OPENAI_API_KEY": "k"}
    )
    assert new.models_json["providers"]["openai"]["models"] == [
        {"id": "my-finetune", "api": "openai-responses"}
    ]
    assert (new.key_env, new.key) == ("OPENAI_API_KEY", None)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"provider": "local", "model": "m"}, "pass --base-url"),
        ({"provider": "anthropic", "model": "claude-sonnet-4-5"}, "set ANTHROPIC_OAUTH_TOKEN or"),
        ({"provider": "anthropic", "model": "nope"}, "has no model 'nope'"),
        ({"provider": "local", "model": "m", "base_url": "127.0.0.1:11434/v1"}, "http(s) URL"),
        ({"provider": "local", "model": "m", "base_url": "http://h", "api": "x"}, "not one of"),
        ({"provider": "local", "model": "m", "api": "openai-completions"}, "needs --base-url"),
    ],
)
def test_model_options_that_cannot_work_are_refused(kw: dict[str, Any], message: str) -> None:
    """Each bad combination is a SetupError saying what to do."""
    provider, model = kw.pop("provider"), kw.pop("model")
    with pytest.raises(SetupError, match=message.replace("(", r"\(").replace(")", r"\)")):
        model_setup(provider, model, environ={}, **kw)


# -- finding and checking pi ---------------------------------------------------------------------


def test_pi_is_found_by_flag_then_env_then_path_then_the_repo(tmp_path: Path) -> None:
    """`--pi`, `$MULE_PI`, `pi` on PATH, node/node_modules/.bin/pi, in that order."""
    on_path = tmp_path / "bin"
    on_path.mkdir()
    fake_pi(on_path)
    env = {"PATH": str(on_path), "MULE_PI": "/opt/pi/bin/pi"}
    assert find_pi("./rel/pi", env)[1] == "--pi"
    assert find_pi("./rel/pi", env)[0] == str(Path("rel/pi").absolute())
    assert find_pi(None, env) == ("/opt/pi/bin/pi", "$MULE_PI")
    assert find_pi(None, {"PATH": str(on_path)}) == (str(on_path / "pi"), "PATH")
    path, source = find_pi(None, {"PATH": str(tmp_path / "empty")})
    assert (path, source) == (project_pi(), "the project's ./dev setup install")


def test_the_project_pi_is_the_one_dev_setup_puts_beside_python() -> None:
    """`./dev setup`'s `.venv/bin/pi` answers 1.6.0 with the machine's older node on PATH."""
    pi = project_pi()
    assert pi == str(Path(sys.executable).parent / "pi")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([pi, "--version"], capture_output=True, text=True, env=env, check=True)
    assert (done.stdout + done.stderr).strip().splitlines()[-1] == "1.6.0"


def test_a_missing_or_broken_pi_is_refused_with_the_install_command(tmp_path: Path) -> None:
    """No file, not executable, failing: each names the path, where it came from, and npm."""
    env = {"PATH": os.environ["PATH"]}
    with pytest.raises(SetupError, match="pi not found") as missing:
        check_pi(str(tmp_path / "nope"), "--pi", env)
    assert PI_INSTALL in str(missing.value)
    assert "--pi" in str(missing.value)
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(SetupError, match="not executable"):
        check_pi(str(plain), "$MULE_PI", env)
    broken = script(
        tmp_path / "broken", "echo 'env: node: No such file or directory' >&2; exit 127"
    )
    with pytest.raises(SetupError, match="node: No such file") as failed:
        check_pi(str(broken), "PATH", env)
    assert PI_INSTALL in str(failed.value)
    assert check_pi(str(fake_pi(tmp_path)), "PATH", env).version == "0.73.1"


@needs_pi
def test_the_real_pi_answers_its_version() -> None:
    """The installed pis pass the start-up check (as `./dev setup` installs them)."""
    assert check_pi(PI, "test", dict(os.environ)).version == "1.6.0"
    assert check_pi(PI_CURRENT, "test", dict(os.environ)).version == "1.6.0"
    assert check_pi(PI_LEGACY, "test", dict(os.environ)).version == "0.73.1"


def test_the_install_hint_names_the_pi_that_works_and_its_node() -> None:
    """The npm line installs pi 1.6.0 from its new scope, and says which Node it needs."""
    assert PI_INSTALL == "npm install -g @earendil-works/pi-coding-agent@1.6.0"
    with pytest.raises(SetupError) as missing:
        check_pi("/nonexistent/pi", "--pi", {"PATH": os.environ["PATH"]})
    assert f"`{PI_INSTALL}` (it needs Node.js 22.19 or newer)" in str(missing.value)


@pytest.mark.skipif(
    not OLD_NODE or not os.path.exists(PI_CURRENT), reason="no Node older than 22.19 or no pi"
)
def test_pi_160_on_an_old_node_is_refused_with_its_error_and_the_hint() -> None:
    """Pi 1.6.0 on Node 20 exits 1 with a missing export: the reason and the Node floor show."""
    assert OLD_NODE is not None
    env = {"PATH": str(Path(OLD_NODE).parent), "HOME": os.environ.get("HOME", "/")}
    with pytest.raises(SetupError) as old:
        check_pi(PI_SCRIPT, "test", env)
    assert "enableCompileCache" in str(old.value) or "Node.js v" in str(old.value)
    assert "Node.js 22.19 or newer" in str(old.value)


def test_main_refuses_a_bound_that_is_not_positive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--start-timeout -1` exits 2 before binding, naming the setting."""
    argv = ["--model", "local/m", "--base-url", "http://127.0.0.1:9/v1", "--port", "0"]
    assert main([*argv, "--pi", str(fake_pi(tmp_path)), "--start-timeout", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mule serve: start_timeout must be a positive number of seconds")


def test_main_refuses_to_start_without_pi(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mule serve` with no pi exits 2 before binding and prints the npm command."""
    argv = ["--model", "local/m", "--base-url", "http://127.0.0.1:9/v1"]
    assert main([*argv, "--pi", str(tmp_path / "pi"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mule serve: pi not found")
    assert PI_INSTALL in err


def test_main_refuses_an_unknown_provider_without_a_base_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The README's old line (`--model local/my-model` alone) now fails at start, not per job."""
    assert main(["--model", "local/my-model", "--port", "0"]) == 2
    assert "unknown provider 'local': pass --base-url" in capsys.readouterr().err


# -- paths and the config ------------------------------------------------------------------------


def test_paths_resolve_against_the_invoking_directory(tmp_path: Path) -> None:
    """`-e ext.ts` and `--cwd` are taken relative to where `mule serve` was typed."""
    here, work = tmp_path / "here", tmp_path / "here" / "work"
    work.mkdir(parents=True)
    (here / "ext.ts").write_text("export default function () {}\n")
    args = build_parser().parse_args(
        [
            "--model",
            "local/m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--pi",
            str(fake_pi(tmp_path)),
            "-e",
            "ext.ts",
            "--cwd",
            "work",
            "--command-timeout",
            "7",
            "--start-timeout",
            "90",
            "--pass-env",
            "MY_VAR",
            "--allow-origin",
            "https://ops.example",
        ]
    )
    prepared = prepare(args, TOKEN, {"PATH": os.environ["PATH"]}, cwd=here)
    try:
        bridge = prepared.config.bridge
        assert bridge.extensions == (str(here / "ext.ts"),)
        assert bridge.cwd == str(work)
        assert (bridge.command_timeout, bridge.start_timeout) == (7, 90)
        assert prepared.config.env_allow == ("MY_VAR",)
        assert prepared.config.allowed_origins == ("https://ops.example",)
        assert prepared.temp_agent_dir is not None
        assert bridge.agent_dir == str(prepared.temp_agent_dir)
        models = json.loads((prepared.temp_agent_dir / "models.json").read_text())
        assert models["providers"]["local"]["baseUrl"] == "http://127.0.0.1:9/v1"
        assert bridge.argv()[1:3] == ["--provider", "local"]
    finally:
        if prepared.temp_agent_dir is not None:
            for f in prepared.temp_agent_dir.iterdir():
                f.unlink()
            prepared.temp_agent_dir.rmdir()
    missing = build_parser().parse_args(
        ["--model", "local/m", "--base-url", "http://h/v1", "-e", "gone.ts"]
    )
    with pytest.raises(SetupError, match=r"extension 'gone\.ts' not found"):
        prepare(missing, TOKEN, {}, cwd=here)
    origin = build_parser().parse_args(
        ["--model", "local/m", "--base-url", "http://h/v1", "--allow-origin", "ops.example"]
    )
    with pytest.raises(SetupError, match="SCHEME://HOST"):
        prepare(origin, TOKEN, {}, cwd=here)


def test_the_token_can_never_be_allowed_into_a_child() -> None:
    """Neither `--pass-env MULE_SERVE_TOKEN` nor `env_allow` can hand pi the token."""
    args = build_parser().parse_args(
        ["--model", "local/m", "--base-url", "http://h/v1", "--pass-env", "MULE_SERVE_TOKEN"]
    )
    with pytest.raises(SetupError, match="never reaches pi"):
        prepare(args, TOKEN, {})
    from mule.pirc import BridgeConfig

    bridge = BridgeConfig(provider="local", model="m", executable="/bin/true")
    with pytest.raises(ValueError, match="never reaches pi"):
        ServerConfig(bridge=bridge, token=TOKEN, env_allow=("MULE_SERVE_TOKEN",))


def test_child_environment_is_minimal() -> None:
    """Base variables, the provider's key, what is allowed; never the token, by name or value."""
    ours = {
        "PATH": "/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": "sk-openai",
        "ANTHROPIC_API_KEY": "sk-ant",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "MULE_SERVE_TOKEN": TOKEN,
        "COPY_OF_TOKEN": TOKEN,
        "MY_VAR": "mine",
    }
    env = child_environment(ours, provider="openai")
    assert env == {
        "PATH": "/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": "sk-openai",
    }
    more = child_environment(
        ours,
        provider="local",
        allow=("MY_VAR", "COPY_OF_TOKEN", "MULE_SERVE_TOKEN"),
        fixed={"PI_X": "1", "LEAK": "generated-token-value"},
        secret_values=("generated-token-value",),
    )
    assert more == {
        "PATH": "/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "MY_VAR": "mine",
        "PI_X": "1",
    }
