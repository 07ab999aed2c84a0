"""`mule serve` start-up: model options into an agent dir, finding and checking pi, paths, env.

Real processes throughout: a stand-in `pi` is a real executable script, and the real pi's
`--version` is run where it is installed.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from mule.serve import PI_INSTALL, ServerConfig, SetupError, child_environment, main
from mule.serve._cli import build_parser, prepare
from mule.serve._setup import check_pi, find_pi, make_agent_dir, model_setup
from tests.pirc.helpers import PI, pi_available
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
    assert (path.endswith("node/node_modules/.bin/pi"), source) == (
        True,
        "the project's node/ install",
    )


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
    """The installed pi passes the start-up check (as `./dev setup` installs it: 1.6.0)."""
    assert check_pi(PI, "test", dict(os.environ)).version == "1.6.0"


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
