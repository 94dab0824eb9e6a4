"""Lenient models of the webhook deliveries the bot acts on.

Only the fields the bot reads are declared; everything else is ignored, and
fields GitHub may omit or null are optional. githubkit's strict models reject
real deliveries (new required label fields, older installation payloads), so
these are our own (see tests/fixtures/SOURCES.md for the deliveries concerned).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, ClassVar, Literal, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from bot.errors import WebhookError


def _none_to_empty(value: object) -> object:
    return "" if value is None else value


# GitHub sends `"body": null` for empty issue and PR descriptions.
Text = Annotated[str, BeforeValidator(_none_to_empty)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Account(_Model):
    login: str
    id: int | None = None
    type: str = "User"  # "User", "Bot", "Organization", "Mannequin"

    @property
    def is_bot(self) -> bool:
        return self.type == "Bot" or self.login.endswith("[bot]")


class InstallationRef(_Model):
    id: int


class Repository(_Model):
    full_name: str
    name: str
    owner: Account
    default_branch: str = "main"
    private: bool = False


class Label(_Model):
    name: str


class Issue(_Model):
    number: int
    title: Text = ""
    body: Text = ""
    user: Account | None = None
    labels: tuple[Label, ...] = ()
    state: str = "open"
    html_url: str | None = None
    # Present (as an object of links) only when the issue is a pull request.
    pull_request: dict[str, object] | None = None

    @property
    def is_pull_request(self) -> bool:
        return self.pull_request is not None

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(label.name for label in self.labels)


class Comment(_Model):
    """An issue comment or a pull-request review comment (review fields optional)."""

    id: int
    body: Text = ""
    user: Account | None = None
    html_url: str | None = None
    created_at: datetime | None = None
    author_association: str | None = None
    # Review comments only.
    in_reply_to_id: int | None = None
    path: str | None = None
    line: int | None = None
    original_line: int | None = None
    start_line: int | None = None
    side: str | None = None
    diff_hunk: str | None = None
    commit_id: str | None = None
    original_commit_id: str | None = None
    pull_request_review_id: int | None = None


class HeadRepo(_Model):
    full_name: str


class Head(_Model):
    sha: str
    ref: str
    repo: HeadRepo | None = None  # null when the fork was deleted


class Base(_Model):
    ref: str
    sha: str | None = None


class PullRequest(_Model):
    number: int
    title: Text = ""
    body: Text = ""
    state: str = "open"
    html_url: str | None = None
    user: Account | None = None
    labels: tuple[Label, ...] = ()
    head: Head
    base: Base

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(label.name for label in self.labels)


class _Event(_Model):
    name: ClassVar[str]
    action: str | None = None
    sender: Account | None = None
    installation: InstallationRef | None = None
    repository: Repository | None = None

    @property
    def installation_id(self) -> int | None:
        return self.installation.id if self.installation else None

    @property
    def sender_is_bot(self) -> bool:
        return self.sender is not None and self.sender.is_bot


class IssueCommentEvent(_Event):
    name: ClassVar[str] = "issue_comment"
    action: str
    sender: Account
    repository: Repository
    issue: Issue
    comment: Comment


class IssuesEvent(_Event):
    name: ClassVar[str] = "issues"
    action: str
    sender: Account
    repository: Repository
    issue: Issue
    label: Label | None = None  # on labeled/unlabeled


class PullRequestEvent(_Event):
    name: ClassVar[str] = "pull_request"
    action: str
    sender: Account
    repository: Repository
    number: int | None = None
    pull_request: PullRequest
    label: Label | None = None  # on labeled/unlabeled


class PullRequestReviewCommentEvent(_Event):
    name: ClassVar[str] = "pull_request_review_comment"
    action: str
    sender: Account
    repository: Repository
    pull_request: PullRequest
    comment: Comment


class InstallationEvent(_Event):
    name: ClassVar[str] = "installation"
    action: str
    installation: InstallationRef
    sender: Account | None = None


class Hook(_Model):
    type: str | None = None
    app_id: int | None = None


class PingEvent(_Event):
    name: ClassVar[str] = "ping"
    zen: str | None = None
    hook_id: int | None = None
    hook: Hook | None = Field(default=None)


Event = (
    IssueCommentEvent
    | IssuesEvent
    | PullRequestEvent
    | PullRequestReviewCommentEvent
    | InstallationEvent
    | PingEvent
)

EventName = Literal[
    "issue_comment",
    "issues",
    "pull_request",
    "pull_request_review_comment",
    "installation",
    "ping",
]

_MODELS: dict[str, type[_Event]] = {
    m.name: m
    for m in (
        IssueCommentEvent,
        IssuesEvent,
        PullRequestEvent,
        PullRequestReviewCommentEvent,
        InstallationEvent,
        PingEvent,
    )
}


def is_handled(event: str) -> bool:
    """Whether deliveries of this `X-GitHub-Event` type are parsed at all."""
    return event in _MODELS


def parse_event(event: str, body: bytes) -> Event | None:
    """Parse a delivery body given its `X-GitHub-Event` header.

    Returns None for event types the bot ignores (their body is not even
    decoded); raises ``WebhookError(http_status=400)`` for malformed JSON or a payload
    missing a field the bot needs. Error messages name the field, never echo
    payload values.
    """
    model = _MODELS.get(event)
    if model is None:
        return None
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise WebhookError("malformed JSON body", http_status=400) from None
    if not isinstance(data, dict):
        raise WebhookError("payload is not a JSON object", http_status=400)
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise WebhookError(
            f"invalid {event} payload at {loc}: {first['type']}", http_status=400
        ) from None
    return cast(Event, parsed)  # _MODELS holds exactly the members of Event
