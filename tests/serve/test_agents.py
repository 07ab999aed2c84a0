"""Agent profiles (issue 28.3): named pi configurations the owner defines, picked by clients.

A client names an agent, never a path: the profile's model, prompt, tools, extensions and
skills are the owner's, and only the settings it leaves overridable can be changed per job.

Settings are prepared by the private rule `mule.serve._cli.prepare`, as `mule serve` does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mule.pirc import BridgeConfig
from mule.serve import AgentProfile, ServerConfig, SetupError, build_parser
from mule.serve._cli import prepare
from mule.testing.fake_openai import FakeOpenAI, chat_text
from tests.pirc.helpers import PI, PI_CURRENT, make_home
from tests.pirc.helpers import config as pi_config
from tests.serve.fixtures import TOKEN, ServerThread, running

SECRET = "SECRET-agent-8c1e"


def base() -> BridgeConfig:
    return BridgeConfig(provider="local", model="m", executable="/nonexistent/pi")


AGENTS = {
    "reviewer": AgentProfile(
        description="Reviews code",
        model="review-model",
        system_prompt="You review. /etc/hostname",
        tools=("read",),
        overridable=frozenset({"thinking"}),
    ),
    "open": AgentProfile(description="Anything goes", overridable=frozenset({"model", "tools"})),
}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with running(ServerConfig(bridge=base(), token=TOKEN, agents=AGENTS)) as srv:
        yield srv


def test_clients_list_agents_without_their_prompts_or_paths(server: ServerThread) -> None:
    """`GET /agents`: names, descriptions, models and what is overridable; nothing else."""
    with server.http() as h:
        r = h.get("/agents")
    assert r.status_code == 200
    assert r.json() == {
        "agents": [
            {
                "name": "reviewer",
                "description": "Reviews code",
                "provider": None,
                "model": "review-model",
                "overridable": ["thinking"],
            },
            {
                "name": "open",
                "description": "Anything goes",
                "provider": None,
                "model": None,
                "overridable": ["model", "tools"],
            },
        ],
        "default": None,
    }
    with server.http(None) as anonymous:
        assert anonymous.get("/agents").status_code == 401


def test_a_job_runs_its_agent_and_overrides_only_what_it_allows(server: ServerThread) -> None:
    """A job names its agent; settings the agent locks are a 400, allowed ones apply."""
    with server.http() as h:
        r = h.post("/jobs", json={"prompt": "hi", "agent": "reviewer"})
        assert r.status_code == 201, r.text
        assert (r.json()["agent"], r.json()["model"]) == ("reviewer", "review-model")
        r = h.post(
            "/jobs", json={"prompt": "hi", "agent": "reviewer", "config": {"thinking": "low"}}
        )
        assert r.status_code == 201, r.text
        for locked in ({"system_prompt": "mine"}, {"model": "other"}, {"tools": ["bash"]}):
            r = h.post("/jobs", json={"prompt": "hi", "agent": "reviewer", "config": locked})
            assert r.status_code == 400, r.text
            assert "not allowed" in r.json()["error"]
        r = h.post("/jobs", json={"prompt": "hi", "agent": "open", "config": {"model": "x"}})
        assert (r.status_code, r.json()["model"]) == (201, "x")
        for body, error in (
            ({"prompt": "hi", "agent": "nobody"}, "no agent 'nobody'"),
            ({"prompt": "hi", "agent": ["reviewer"]}, "agent must be a string"),
            ({"prompt": "hi", "agent": "../etc/passwd"}, "no agent"),
        ):
            r = h.post("/jobs", json=body)
            assert (r.status_code, error in r.json()["error"]) == (400, True), r.text
        r = h.post("/jobs", json={"prompt": "hi", "config": {"system_prompt": "base"}})
        assert (r.status_code, r.json()["agent"]) == (201, None)  # no default: the base config


def test_a_default_agent_runs_jobs_that_name_none() -> None:
    """With `default_agent`, the server's base config is reachable only through agents."""
    cfg = ServerConfig(bridge=base(), token=TOKEN, agents=AGENTS, default_agent="reviewer")
    with running(cfg) as srv, srv.http() as h:
        r = h.post("/jobs", json={"prompt": "hi"})
        assert (r.status_code, r.json()["agent"]) == (201, "reviewer")
        r = h.post("/jobs", json={"prompt": "hi", "config": {"system_prompt": "mine"}})
        assert r.status_code == 400
        assert h.get("/agents").json()["default"] == "reviewer"


@pytest.mark.parametrize(
    ("agents", "default", "error"),
    [
        ({"bad name": AgentProfile()}, None, "must be plain"),
        ({"-x": AgentProfile()}, None, "must be plain"),
        ({"a": AgentProfile(extensions=("--evil",))}, None, "agent 'a'.*option"),
        ({"a": AgentProfile(skills=("-s",))}, None, "agent 'a'.*option"),
        ({"a": AgentProfile()}, "b", "not one of the agents"),
    ],
)
def test_the_server_refuses_bad_agents(
    agents: dict[str, Any], default: str | None, error: str
) -> None:
    """Names are plain, the default exists, and each profile makes a valid bridge config."""
    with pytest.raises(ValueError, match=error):
        ServerConfig(bridge=base(), token=TOKEN, agents=agents, default_agent=default)


def test_a_profile_may_leave_open_only_client_settings() -> None:
    """`overridable` is a subset of what a client may ever set: no cwd, no extensions."""
    with pytest.raises(ValueError, match="no client may set"):
        AgentProfile(overridable=frozenset({"cwd"}))
    with pytest.raises(ValueError, match="unknown agent settings"):
        AgentProfile.from_json({"cwd": "/"})
    with pytest.raises(ValueError, match="thinking must be one of"):
        AgentProfile.from_json({"thinking": "--help"})
    with pytest.raises(ValueError, match="list of strings"):
        AgentProfile.from_json({"skills": "a"})


def test_mule_serve_reads_agents_from_a_file_with_paths_relative_to_it(tmp_path: Path) -> None:
    """`--agents FILE`: extensions and skills relative to the file, which must exist.

    `--skill` is relative to the invoking directory, as `-e` is.
    """
    conf = tmp_path / "conf"
    (conf / "skills" / "hello").mkdir(parents=True)
    (conf / "ext.ts").write_text("export default function () {}\n")
    (conf / "agents.json").write_text(
        json.dumps(
            {
                "helper": {
                    "description": "helps",
                    "extensions": ["ext.ts"],
                    "skills": ["skills/hello"],
                    "overridable": ["thinking"],
                }
            }
        )
    )
    here = tmp_path / "elsewhere"
    (here / "my-skill").mkdir(parents=True)
    argv = ["--model", "local/m", "--base-url", "http://127.0.0.1:9/v1", "--pi", PI]
    argv += ["--agents", str(conf / "agents.json"), "--default-agent", "helper"]
    args = build_parser().parse_args([*argv, "--skill", "my-skill"])
    prepared = prepare(args, TOKEN, {"PATH": "/usr/bin:/bin"}, cwd=here)
    try:
        helper = prepared.config.agents["helper"]
        assert helper.extensions == (str(conf / "ext.ts"),)
        assert helper.skills == (str(conf / "skills" / "hello"),)
        assert prepared.config.default_agent == "helper"
        assert prepared.config.bridge.skills == (str(here / "my-skill"),)  # the invoking dir's
        (conf / "agents.json").write_text(json.dumps({"helper": {"skills": ["missing"]}}))
        with pytest.raises(SetupError, match="agent 'helper' skill 'missing' not found"):
            prepare(args, TOKEN, {"PATH": "/usr/bin:/bin"}, cwd=here)
        (conf / "agents.json").write_text(json.dumps({"helper": {"cwd": "/"}}))
        with pytest.raises(SetupError, match="unknown agent settings"):
            prepare(args, TOKEN, {"PATH": "/usr/bin:/bin"}, cwd=here)
    finally:
        if prepared.temp_agent_dir is not None:
            for f in prepared.temp_agent_dir.iterdir():
                f.unlink()
            prepared.temp_agent_dir.rmdir()


@pytest.mark.slow
@pytest.mark.pi
@pytest.mark.parametrize(
    "pi",
    [
        pytest.param(p, id=name, marks=pytest.mark.skipif(not Path(p).exists(), reason="no pi"))
        for p, name in ((PI, "pi-0.73.1"), (PI_CURRENT, "pi-1.6.0"))
    ],
)
def test_an_agent_runs_on_the_real_pi_with_its_prompt_as_text_and_its_skill(
    tmp_path: Path, pi: str
) -> None:
    """The real pi runs the agent: its prompt, its skill and its tools; never the secret.

    The agent's prompt names a secret file: it is sent as those words.
    """
    skill = tmp_path / "skills" / "greeter"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: greeter\ndescription: Greets people warmly.\n---\nSay hello.\n"
    )
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    agent = AgentProfile(
        description="greets",
        system_prompt=str(secret),
        tools=("read",),
        skills=(str(skill),),
    )
    with FakeOpenAI() as fake:
        fake.set_default(chat_text("ok"))
        dirs = make_home(tmp_path, fake.base_url)
        bridge = pi_config(dirs, executable=pi, no_tools=False)
        cfg = ServerConfig(bridge=bridge, token=TOKEN, agents={"greeter": agent})
        with running(cfg) as srv, srv.http() as h:
            r = h.post("/jobs", json={"prompt": "hi", "agent": "greeter"})
            assert r.status_code == 201, r.text
            job = wait_job(h, r.json()["id"])
        assert job["status"] == "completed", job
        (request,) = fake.requests
    body = request["body"]
    system = body["messages"][0]["content"]
    assert system.startswith(str(secret) + "\n")
    assert "greeter" in system
    assert "Greets people warmly." in system
    assert [t["function"]["name"] for t in body.get("tools", [])] == ["read"]
    assert SECRET not in json.dumps(request)


def wait_job(client: Any, job_id: str) -> dict[str, Any]:
    """Poll the job until it ended (bounded); return its JSON."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        got: dict[str, Any] = client.get(f"/jobs/{job_id}").json()
        if got["status"] not in ("starting", "running"):
            return got
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not end")
