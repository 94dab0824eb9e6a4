"""`debate-bot run` and `debate-bot review` with tools, as a user runs them: the
CLI in its own process, in a temporary git checkout, against the tool-calling
fake model server over HTTP. The debaters read tracked files; an ignored `.env`
and an untracked file can never be read; `--no-tools` turns the tools off."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.engine import rehearsal
from testkit.fakes.tool_server import Call, Result, Seen, ToolModelServer

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

KEY = "sk-test-" + secrets.token_hex(8)
SECRET = "sk-live-" + secrets.token_hex(12)  # in the ignored .env: must never reach a model
VIEWS = "def view(user):\n    assert user is not None\n    return user.name\n"
PLAN = """\
---
rounds: 1
---
# Check the view before release

We plan to release the user view next week. The view asserts that a user is given
and returns the user's name; the reviewers doubt that the assertion holds when the
session expires, and ask whether the release should wait for a guard in the view.
Decide whether the current code is safe to release as it is, or what must change.
"""
CITE = '\nEvidence: `app/views.py:L2` "assert user is not None".\n'
READS = [
    Call("read_file", {"path": "app/views.py"}),
    Call("read_file", {"path": ".env"}),
    Call("read_file", {"path": "notes.txt"}),
    Call("search_code", {"pattern": "sk-live"}),
]


class Reading:
    """The script of a model that reads the same files every turn, then answers."""

    def __init__(self) -> None:
        self.results: list[Result] = []
        self.lock = threading.Lock()

    def __call__(self, seen: Seen) -> str | list[Call]:
        if seen.may_call and seen.step == 0:
            return READS
        with self.lock:
            self.results.extend(seen.results)
        answer = rehearsal.reply(seen.text)
        return answer + CITE if seen.tools else answer


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "app").mkdir(parents=True)
    (root / "app" / "views.py").write_text(VIEWS)
    (root / "plan.md").write_text(PLAN)
    (root / ".gitignore").write_text(".env\ndebates/\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "app/views.py", "plan.md", ".gitignore"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    (root / ".env").write_text(f"API_TOKEN={SECRET}\n")  # ignored
    (root / "notes.txt").write_text(f"token {SECRET}\n")  # untracked
    return root


@pytest.fixture
def server() -> Iterator[tuple[ToolModelServer, Reading]]:
    script = Reading()
    with ToolModelServer(script=script, openai_api_key=KEY) as srv:
        yield srv, script


def cli(root: Path, server: ToolModelServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DEBATE_BOT_", "OPENAI_", "ANTHROPIC_"))
    }
    env.update(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=server.openai_base_url,
        DEBATE_BOT_MODEL_MAX_RETRIES="0",
        COLUMNS="200",
    )
    return subprocess.run(
        [sys.executable, "-m", "bot", *args, "--model", "openai/gpt-test"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def transcript(root: Path, proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    return (root / proc.stdout.strip().splitlines()[-1]).read_text()


def assert_read_safely(server: ToolModelServer, script: Reading) -> None:
    offered = [r for r in server.requests if "tools" in r.body]
    assert offered, "no request offered tools"
    assert script.results and len(script.results) % len(READS) == 0
    # Each turn's answers, in the order of READS (the wire format carries no error
    # flag for OpenAI: the refusal is the text).
    for i in range(0, len(script.results), len(READS)):
        views, env, notes, search = (r.content for r in script.results[i : i + len(READS)])
        assert "2:     assert user is not None" in views
        assert "`.env` does not exist" in env, env
        assert "`notes.txt` does not exist" in notes, notes
        assert "no match" in search, search
    # Nothing of the ignored or untracked files reached the model, in any request.
    for r in server.requests:
        assert SECRET not in str(r.body)


def test_run_reads_tracked_files_and_never_the_env(
    checkout: Path, server: tuple[ToolModelServer, Reading]
) -> None:
    srv, script = server
    text = transcript(checkout, cli(checkout, srv, "run", "plan.md"))
    assert_read_safely(srv, script)
    assert "verified" in text and "0 unverified" in text


def test_run_with_no_tools_offers_none(
    checkout: Path, server: tuple[ToolModelServer, Reading]
) -> None:
    srv, script = server
    transcript(checkout, cli(checkout, srv, "run", "plan.md", "--no-tools"))
    assert srv.requests and not any("tools" in r.body for r in srv.requests)
    assert script.results == []


def test_review_reads_tracked_files_and_never_the_env(
    checkout: Path, server: tuple[ToolModelServer, Reading]
) -> None:
    srv, script = server
    transcript(checkout, cli(checkout, srv, "review", ".", "--rounds", "1"))
    assert_read_safely(srv, script)
    srv.reset()
    transcript(checkout, cli(checkout, srv, "review", ".", "--rounds", "1", "--no-tools"))
    assert srv.requests and not any("tools" in r.body for r in srv.requests)
