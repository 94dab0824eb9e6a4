"""`debate-bot action` with tools: the debaters read the job's checkout when it
holds the run's pinned commit, and GitHub otherwise (a pull request's job checks
out a merge commit). A real process, as a workflow runs it, against the fake
GitHub and the tool-calling fake model server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.engine import rehearsal
from testkit.fakes.github_server import FakeGitHub
from testkit.fakes.tool_server import Call, Seen, ToolModelServer
from testkit.harness.service import APP_ID, INSTALLATION, REPO, delivery, rsa_keypair

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# The same path, told apart by where it was read from (the fake GitHub's commit and
# the checkout are made to share a sha; real ones would hold the same bytes).
ON_GITHUB = "SOURCE = 'github'\n"
IN_CHECKOUT = "SOURCE = 'checkout'\n"


class Reads:
    """A model that reads app/source.py once a turn, then answers citing it."""

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, seen: Seen) -> str | list[Call]:
        if seen.may_call and seen.step == 0:
            return [Call("read_file", {"path": "app/source.py"})]
        with self.lock:
            self.answers.extend(r.content for r in seen.results)
        answer = rehearsal.reply(seen.text)
        return answer + '\nSee `app/source.py:L1` "SOURCE =".\n' if seen.tools else answer


@pytest.fixture
def fakes() -> Iterator[tuple[FakeGitHub, ToolModelServer, Reads]]:
    _, public = rsa_keypair()
    reads = Reads()
    with (
        FakeGitHub(app_id=APP_ID, public_key_pem=public, app_slug="github-actions") as github,
        ToolModelServer(script=reads) as models,
    ):
        # The events' repository (the fixtures' payloads) names `master` its default
        # branch: the run pins that branch's head.
        github.add_repo(REPO, installation_id=INSTALLATION, default_branch="master")
        github.set_permission(REPO, "Codertocat", "admin")
        github.put_file(REPO, "app/source.py", ON_GITHUB)
        yield github, models, reads


def workspace(tmp_path: Path) -> tuple[Path, str]:
    """The job's checkout (actions/checkout): a git work tree; returns its HEAD."""
    root = tmp_path / "workspace"
    (root / "app").mkdir(parents=True)
    (root / "app" / "source.py").write_text(IN_CHECKOUT)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "-C", str(root), "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return root, head


def pin_default_branch(github: FakeGitHub, sha: str) -> None:
    """The fake's default branch at ``sha`` (its files unchanged): the checkout's
    HEAD is then the commit an issue's run pins."""
    with github._lock:
        repo = github._repo(REPO)
        repo.commits[sha] = dict(repo.commits[repo.branches[repo.default_branch]])
        repo.branches[repo.default_branch] = sha


def run_action(
    tmp_path: Path, github: FakeGitHub, models: ToolModelServer, workspace: Path
) -> subprocess.CompletedProcess[str]:
    number = github.add_issue(REPO, title="Is SOURCE right?", body="Check it.", user="Codertocat")
    body = "/debate --rounds 1"
    comment_id = github.add_comment(REPO, number, body, user="Codertocat")
    issue = github.issue(REPO, number)
    payload = delivery(
        "issue_comment.created",
        **{
            "comment.body": body,
            "comment.id": comment_id,
            "comment.user.login": "Codertocat",
            "issue.number": number,
            "issue.title": issue["title"],
            "issue.body": issue["body"],
            "sender.login": "Codertocat",
            "sender.type": "User",
        },
    )
    payload.pop("installation", None)  # Actions events carry none
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    (temp / "event.json").write_text(json.dumps(payload))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "GITHUB_TOKEN": github.actions_token(REPO),
        "GITHUB_EVENT_NAME": "issue_comment",
        "GITHUB_EVENT_PATH": str(temp / "event.json"),
        "GITHUB_API_URL": github.api_url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_RUN_ID": "4242",
        "GITHUB_WORKSPACE": str(workspace),
        "RUNNER_TEMP": str(temp),
        "OPENAI_API_KEY": "sk-test-openai",
        "OPENAI_BASE_URL": models.openai_base_url,
        "DEBATE_BOT_DEFAULT_MODEL": "openai/gpt-4.1-mini",
        "DEBATE_BOT_DEFAULT_MODELS": '["openai/gpt-4.1-mini","openai/gpt-4.1-mini"]',
        "DEBATE_BOT_GITHUB_WRITE_INTERVAL_S": "0",
    }
    return subprocess.run(
        [sys.executable, "-m", "bot", "action"],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def repository_reads(github: FakeGitHub) -> int:
    """Requests for the repository's files (tree, archive, blobs, contents)."""
    with github._lock:
        routes = [r.route for r in github.requests]
    return sum(
        1
        for route in routes
        if any(part in route for part in ("/git/trees/", "/tarball/", "/git/blobs/", "codeload"))
    )


def test_the_jobs_checkout_is_read_when_it_holds_the_pinned_commit(
    tmp_path: Path, fakes: tuple[FakeGitHub, ToolModelServer, Reads]
) -> None:
    github, models, reads = fakes
    root, head = workspace(tmp_path)
    pin_default_branch(github, head)
    done = run_action(tmp_path, github, models, root)
    assert done.returncode == 0, done.stderr
    assert reads.answers and all("SOURCE = 'checkout'" in a for a in reads.answers)
    assert repository_reads(github) == 0  # not one request for the files


def test_github_is_read_when_the_checkout_is_another_commit(
    tmp_path: Path, fakes: tuple[FakeGitHub, ToolModelServer, Reads]
) -> None:
    github, models, reads = fakes
    root, _ = workspace(tmp_path)  # e.g. the merge commit a pull request's job checks out
    done = run_action(tmp_path, github, models, root)
    assert done.returncode == 0, done.stderr
    assert reads.answers and all("SOURCE = 'github'" in a for a in reads.answers)
    assert repository_reads(github) > 0
