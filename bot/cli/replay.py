"""`debate-bot replay`: sign a payload file as GitHub would and post it to a
running service, for trying triggers locally without GitHub."""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bot.cli.reports import html_base
from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.github.webhooks import SIGNATURE_HEADER, sign
from bot.service.web.webhook import known_events, local_webhook_url
from bot.service.worker.triggers import build_triggers


@dataclass(frozen=True)
class ReplayResult:
    status: int
    delivery_id: str
    body: str


def read_payload(file: Path, event: str) -> bytes:
    """The file's exact bytes (GitHub signs the raw body), checked to be a JSON object."""
    known = known_events(build_triggers().delivery_filter())
    if event not in known:  # anything else is almost surely a typo
        raise ConfigError(f"unknown event {event!r}; one of: {', '.join(sorted(known))}")
    try:
        body = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot be read ({exc.strerror})") from None
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{file}: a webhook payload is a JSON object")
    return body


def replay(
    settings: Settings, file: Path, event: str, url: str | None = None, *, timeout_s: float = 10.0
) -> ReplayResult:
    """Post ``file`` as one delivery of ``event``. ``httpx.HTTPError`` when unreachable."""
    if settings.webhook_secret is None:
        raise ConfigError("set DEBATE_BOT_WEBHOOK_SECRET (the secret the service verifies with)")
    body = read_payload(file, event)
    return post_delivery(settings, body, event, url, timeout_s=timeout_s)


def comment_payload(
    settings: Settings,
    *,
    comment: str,
    repo: str,
    issue: int,
    installation: int,
    sender: str,
    pull_request: bool = False,
) -> bytes:
    """An ``issue_comment.created`` delivery in GitHub's shape (the fields of
    tests/fixtures/webhooks/issue_comment.created.with-installation.json that a
    handler reads, with their real names and types), for ``repo`` and ``issue``."""
    owner, sep, name = repo.partition("/")
    if not sep or not owner or not name or "/" in name:
        raise ConfigError(f"--repo {repo!r}: expected OWNER/NAME")
    if issue < 1:
        raise ConfigError("--issue: expected an issue or pull request number (1 or more)")
    if not comment.strip():
        raise ConfigError("--comment: the comment is empty")
    api = settings.github_api_url.rstrip("/")
    html = html_base(api)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    comment_id = secrets.randbelow(2**40) + 1  # fresh, so never a duplicate comment

    def user(login: str, account_id: int) -> dict[str, object]:
        return {
            "login": login,
            "id": account_id,
            "url": f"{api}/users/{login}",
            "html_url": f"{html}/{login}",
            "type": "User",
            "site_admin": False,
        }

    repo_url = f"{api}/repos/{repo}"
    issue_url = f"{repo_url}/issues/{issue}"
    kind = "pull" if pull_request else "issues"
    issue_doc: dict[str, object] = {
        "url": issue_url,
        "repository_url": repo_url,
        "comments_url": f"{issue_url}/comments",
        "html_url": f"{html}/{repo}/{kind}/{issue}",
        "id": issue,
        "number": issue,
        "title": f"Replayed issue #{issue}",
        "user": user(sender, 1),
        "labels": [],
        "state": "open",
        "locked": False,
        "comments": 0,
        "created_at": now,
        "updated_at": now,
        "author_association": "OWNER",
        "body": "",
    }
    if pull_request:
        issue_doc["pull_request"] = {
            "url": f"{repo_url}/pulls/{issue}",
            "html_url": f"{html}/{repo}/pull/{issue}",
        }
    doc = {
        "action": "created",
        "issue": issue_doc,
        "comment": {
            "url": f"{repo_url}/issues/comments/{comment_id}",
            "html_url": f"{html}/{repo}/{kind}/{issue}#issuecomment-{comment_id}",
            "issue_url": issue_url,
            "id": comment_id,
            "user": user(sender, 1),
            "created_at": now,
            "updated_at": now,
            "author_association": "OWNER",
            "body": comment,
        },
        "repository": {
            "id": 1,
            "name": name,
            "full_name": repo,
            "private": False,
            "owner": user(owner, 1),
            "html_url": f"{html}/{repo}",
            "url": repo_url,
            "default_branch": "main",
        },
        "sender": user(sender, 1),
        "installation": {"id": installation},
    }
    return json.dumps(doc).encode()


def post_delivery(
    settings: Settings, body: bytes, event: str, url: str | None = None, *, timeout_s: float = 10.0
) -> ReplayResult:
    """Post ``body`` signed as one delivery of ``event``. ``httpx.HTTPError`` when unreachable."""
    if settings.webhook_secret is None:
        raise ConfigError("set DEBATE_BOT_WEBHOOK_SECRET (the secret the service verifies with)")
    secret = settings.webhook_secret.get_secret_value().encode()
    delivery_id = str(uuid.uuid4())
    response = httpx.post(
        url or local_webhook_url(settings),
        content=body,
        headers={
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/debate-bot-replay",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id,
            SIGNATURE_HEADER: sign(secret, body),
        },
        timeout=timeout_s,
    )
    return ReplayResult(response.status_code, delivery_id, response.text)
