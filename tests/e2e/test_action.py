"""`debate-bot action` end to end: a real process, as a GitHub Actions job runs it,
against the fake GitHub (a plain job token) and the fake model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.fakes.github_server import FakeGitHub
from testkit.fakes.model_server import FakeModelServer
from testkit.harness.service import APP_ID, INSTALLATION, REPO, delivery, rsa_keypair

ACTIONS_BOT = "github-actions[bot]"


class Job:
    """One workflow run of the example workflow: its event file and environment."""

    def __init__(self, tmp: Path, github: FakeGitHub, models: FakeModelServer) -> None:
        self.tmp, self.github, self.models = tmp, github, models
        self.token = github.actions_token(REPO)

    def run(
        self, event: str, payload: dict[str, Any], *, attempt: int = 1, **env: str
    ) -> subprocess.CompletedProcess[str]:
        temp = self.tmp / f"runner-temp-{attempt}-{len(list(self.tmp.iterdir()))}"
        temp.mkdir()
        event_path = temp / "event.json"
        event_path.write_text(json.dumps(payload))
        base = {
            "PATH": os.environ.get("PATH", ""),
            "GITHUB_TOKEN": self.token,
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(event_path),
            "GITHUB_API_URL": self.github.api_url,
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_RUN_ID": "4242",
            "GITHUB_RUN_ATTEMPT": str(attempt),
            "RUNNER_TEMP": str(temp),
            "OPENAI_API_KEY": "sk-test-openai",
            "OPENAI_BASE_URL": self.models.openai_base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": self.models.anthropic_base_url,
            "DEBATE_BOT_DEFAULT_MODEL": "openai/gpt-4.1-mini",
            "DEBATE_BOT_DEFAULT_MODELS": '["openai/gpt-4.1-mini","anthropic/claude-sonnet-4-5"]',
            "DEBATE_BOT_GITHUB_WRITE_INTERVAL_S": "0",
        }
        return subprocess.run(
            [sys.executable, "-m", "bot", "action"],
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture
def job(tmp_path: Path) -> Iterator[Job]:
    _, public = rsa_keypair()
    with (
        FakeGitHub(app_id=APP_ID, public_key_pem=public, app_slug="github-actions") as github,
        FakeModelServer() as models,
    ):
        # The corpus payloads name `master`: the run pins its head (and reads it).
        github.add_repo(REPO, installation_id=INSTALLATION, default_branch="master")
        github.set_permission(REPO, "Codertocat", "admin")
        yield Job(tmp_path, github, models)


def issue_comment(job: Job, number: int, body: str, user: str = "Codertocat") -> dict[str, Any]:
    comment_id = job.github.add_comment(REPO, number, body, user=user)
    issue = job.github.issue(REPO, number)
    doc = delivery(
        "issue_comment.created",
        **{
            "comment.body": body,
            "comment.id": comment_id,
            "comment.user.login": user,
            "issue.number": number,
            "issue.title": issue["title"],
            "issue.body": issue["body"],
            "sender.login": user,
            "sender.type": "Bot" if user.endswith("[bot]") else "User",
        },
    )
    doc.pop("installation", None)  # Actions events carry none
    return doc


def markers(job: Job, number: int) -> list[str]:
    return [
        c["body"].split("\n", 1)[0]
        for c in job.github.comments(REPO, number)
        if c["user"] == ACTIONS_BOT and c["body"].startswith("<!-- debate-bot:")
    ]


def new_issue(job: Job) -> int:
    return job.github.add_issue(
        REPO, title="Should we use gRPC or REST?", body="A public API.", user="Codertocat"
    )


def test_a_debate_command_and_a_rerun_of_the_same_job(job: Job) -> None:
    number = new_issue(job)
    payload = issue_comment(job, number, "/debate --rounds 1")
    first = job.run("issue_comment", payload)
    assert first.returncode == 0, first.stderr
    posted = markers(job, number)
    assert any("debate-bot:verdict" in m for m in posted) and any("round=1" in m for m in posted)
    paid = len(job.models.requests)

    again = job.run("issue_comment", payload, attempt=2)  # "Re-run jobs" in the UI
    assert again.returncode == 0, again.stderr
    assert markers(job, number) == posted  # the same comments, edited, none added
    assert len(job.models.requests) > paid  # it did debate again (a fresh runner)


def test_a_label_starts_a_debate(job: Job) -> None:
    number = new_issue(job)
    payload = delivery(
        "issues.labeled",
        **{
            "issue.number": number,
            "issue.title": "Should we use gRPC or REST?",
            "label.name": "debate",
            "sender.login": "Codertocat",
        },
    )
    payload.pop("installation", None)
    done = job.run("issues", payload)
    assert done.returncode == 0, done.stderr
    assert any("debate-bot:verdict" in m for m in markers(job, number))


def test_a_read_only_user_and_bots_get_no_debate(job: Job) -> None:
    number = new_issue(job)
    job.github.set_permission(REPO, "reader", "read")
    denied = job.run("issue_comment", issue_comment(job, number, "/debate", user="reader"))
    assert denied.returncode == 0, denied.stderr
    [reply] = [c["body"] for c in job.github.comments(REPO, number) if c["user"] == ACTIONS_BOT]
    assert "Only users with `write` access" in reply and "verdict" not in reply

    before = len(job.github.comments(REPO, number))
    own = job.run("issue_comment", issue_comment(job, number, "/debate", user=ACTIONS_BOT))
    assert own.returncode == 0 and len(job.github.comments(REPO, number)) == before + 1
    assert not job.models.requests  # neither started a run


def test_a_bad_setup_exits_2_naming_the_fix(job: Job) -> None:
    number = new_issue(job)
    no_token = job.run("issue_comment", issue_comment(job, number, "/debate"), GITHUB_TOKEN="")
    assert no_token.returncode == 2
    assert "GITHUB_TOKEN is not set" in no_token.stderr and "github-token" in no_token.stderr
    no_event = job.run("issue_comment", {}, GITHUB_EVENT_PATH="/nonexistent/event.json")
    assert no_event.returncode == 2 and "cannot be read" in no_event.stderr
    assert "Traceback" not in no_token.stderr + no_event.stderr


def test_a_failed_run_exits_1_after_its_notice(job: Job) -> None:
    number = new_issue(job)
    job.models.responder = lambda prompt: ""  # every model answers nothing usable
    failed = job.run("issue_comment", issue_comment(job, number, "/debate --rounds 1"))
    assert failed.returncode == 1, failed.stderr
    assert any("debate-bot:aborted" in m for m in markers(job, number))
