"""`mule journal list|show` without `--journal`: `$MULE_JOURNAL`, else a message saying how."""

from __future__ import annotations

from pathlib import Path

from mule.testing.fake_openai import FakeOpenAI, chat_text
from tests.cli import support as cli_support

env = cli_support.env
project = cli_support.project
fake = cli_support.fake
mule = cli_support.mule
run_args = cli_support.run_args


def test_mule_journal_is_the_default_journal(
    fake: FakeOpenAI, project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    db = str(tmp_path / "runs.db")
    fake.push(chat_text("Hello."))
    done = mule([*run_args(fake, "hi", "--journal", db)], env, project)
    assert done.returncode == 0, done.stderr
    with_env = {**env, "MULE_JOURNAL": db}
    listed = mule(["journal", "list"], with_env, project)
    assert listed.returncode == 0, listed.stderr
    assert "completed" in listed.stdout
    # --journal wins over the variable.
    other = mule(["journal", "list", "--journal", db], {**env, "MULE_JOURNAL": "nope.db"}, project)
    assert other.stdout == listed.stdout


def test_without_a_journal_the_message_says_how_to_pass_one(
    project: Path, env: dict[str, str]
) -> None:
    bare = {k: v for k, v in env.items() if k != "MULE_JOURNAL"}
    for argv in (["journal", "list"], ["journal", "show", "abc"]):
        done = mule(argv, bare, project)
        assert done.returncode == 2
        assert "no journal given: pass --journal PATH" in done.stderr
        assert "MULE_JOURNAL=PATH" in done.stderr
    missing = mule(["journal", "list"], {**bare, "MULE_JOURNAL": "gone.db"}, project)
    assert missing.returncode == 2
    assert "no journal at gone.db (from $MULE_JOURNAL)" in missing.stderr
