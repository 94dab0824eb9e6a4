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
from bot.service.features.declared import DELIVERY_FILTER
from bot.service.web.webhook import known_events, local_webhook_url


@dataclass(frozen=True)
class ReplayResult:
    status: int
    delivery_id: str
    body: str


def read_payload(file: Path, event: str) -> bytes:
    """The file's exact bytes (GitHub signs the raw body), checked to be a JSON object."""
    known = known_events(DELIVERY_FILTER)
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


@dataclass(frozen=True)
class CommentFlags:
    """`replay --comment`'s flags as given (None: not given)."""

    comment: str
    repo: str | None
    issue: int | None
    installation: int | None
    sender: str
    pull_request: bool


def delivery(
    settings: Settings, file: Path | None, event: str | None, comment: CommentFlags | None
) -> tuple[str, bytes]:
    """The event and the body to post: ``file`` as ``event``, or the issue
    comment built from ``comment``'s flags (then no FILE)."""
    if comment is not None:
        return "issue_comment", _comment_body(settings, file, comment)
    if file is None or event is None:
        raise ConfigError('give FILE --event NAME, or --comment "/debate …" --repo --issue')
    return event, read_payload(file, event)


def _comment_body(settings: Settings, file: Path | None, flags: CommentFlags) -> bytes:
    given = (
        ("--repo", flags.repo),
        ("--issue", flags.issue),
        ("--installation", flags.installation),
    )
    missing = [flag for flag, value in given if value is None]
    if file is not None or missing:
        raise ConfigError(
            "--comment builds the payload: give --repo OWNER/NAME --issue N "
            "--installation ID and no FILE"
            + (f" (missing {', '.join(missing)})" if missing else "")
        )
    assert flags.repo is not None and flags.issue is not None and flags.installation is not None
    return comment_payload(
        settings,
        comment=flags.comment,
        repo=flags.repo,
        issue=flags.issue,
        installation=flags.installation,
        sender=flags.sender,
        pull_request=flags.pull_request,
    )


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
    owner, name = _owner_and_name(repo)
    if issue < 1:
        raise ConfigError("--issue: expected an issue or pull request number (1 or more)")
    if not comment.strip():
        raise ConfigError("--comment: the comment is empty")
    api = settings.github_api_url.rstrip("/")
    thread = _Thread(
        api=api,
        html=html_base(api),
        repo=repo,
        issue=issue,
        pull_request=pull_request,
        now=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    comment_id = secrets.randbelow(2**40) + 1  # fresh, so never a duplicate comment
    doc = {
        "action": "created",
        "issue": thread.issue_doc(sender),
        "comment": thread.comment_doc(comment_id, sender, comment),
        "repository": thread.repository_doc(owner, name),
        "sender": thread.user(sender),
        "installation": {"id": installation},
    }
    return json.dumps(doc).encode()


def _owner_and_name(repo: str) -> tuple[str, str]:
    owner, sep, name = repo.partition("/")
    if not sep or not owner or not name or "/" in name:
        raise ConfigError(f"--repo {repo!r}: expected OWNER/NAME")
    return owner, name


@dataclass(frozen=True)
class _Thread:
    """The issue or pull request a replayed comment is on, with the API and web
    addresses GitHub would give its parts."""

    api: str
    html: str
    repo: str
    issue: int
    pull_request: bool
    now: str

    @property
    def repo_url(self) -> str:
        return f"{self.api}/repos/{self.repo}"

    @property
    def issue_url(self) -> str:
        return f"{self.repo_url}/issues/{self.issue}"

    @property
    def page(self) -> str:
        kind = "pull" if self.pull_request else "issues"
        return f"{self.html}/{self.repo}/{kind}/{self.issue}"

    def user(self, login: str) -> dict[str, object]:
        return {
            "login": login,
            "id": 1,
            "url": f"{self.api}/users/{login}",
            "html_url": f"{self.html}/{login}",
            "type": "User",
            "site_admin": False,
        }

    def issue_doc(self, sender: str) -> dict[str, object]:
        doc: dict[str, object] = {
            "url": self.issue_url,
            "repository_url": self.repo_url,
            "comments_url": f"{self.issue_url}/comments",
            "html_url": self.page,
            "id": self.issue,
            "number": self.issue,
            "title": f"Replayed issue #{self.issue}",
            "user": self.user(sender),
            "labels": [],
            "state": "open",
            "locked": False,
            "comments": 0,
            "created_at": self.now,
            "updated_at": self.now,
            "author_association": "OWNER",
            "body": "",
        }
        if self.pull_request:
            doc["pull_request"] = {
                "url": f"{self.repo_url}/pulls/{self.issue}",
                "html_url": f"{self.html}/{self.repo}/pull/{self.issue}",
            }
        return doc

    def comment_doc(self, comment_id: int, sender: str, body: str) -> dict[str, object]:
        return {
            "url": f"{self.repo_url}/issues/comments/{comment_id}",
            "html_url": f"{self.page}#issuecomment-{comment_id}",
            "issue_url": self.issue_url,
            "id": comment_id,
            "user": self.user(sender),
            "created_at": self.now,
            "updated_at": self.now,
            "author_association": "OWNER",
            "body": body,
        }

    def repository_doc(self, owner: str, name: str) -> dict[str, object]:
        return {
            "id": 1,
            "name": name,
            "full_name": self.repo,
            "private": False,
            "owner": self.user(owner),
            "html_url": f"{self.html}/{self.repo}",
            "url": self.repo_url,
            "default_branch": "main",
        }


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
