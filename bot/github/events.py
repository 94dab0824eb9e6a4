"""Lenient models of the webhook deliveries the bot acts on.

Only the fields the bot reads are declared; everything else is ignored, and
fields GitHub may omit or null are optional. githubkit's strict models reject
real deliveries (new required label fields, older installation payloads), so
these are our own (see tests/fixtures/SOURCES.md for the deliveries concerned).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, ClassVar, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from bot.core.errors import PayloadError


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
        return is_bot(self.type, self.login)


class InstallationRef(_Model):
    id: int


def is_bot(kind: object, login: object) -> bool:
    """Whether an account is a bot: GitHub's ``type`` says so, or its login has
    the ``[bot]`` suffix GitHub reserves for apps (an app's comments and the
    Actions token). The one rule for senders and comment authors alike."""
    return kind == "Bot" or str(login or "").endswith("[bot]")


class Repository(_Model):
    full_name: str
    name: str
    owner: Account
    default_branch: str = "main"
    private: bool = False
    # The repository's page as GitHub serves it: the base of permalinks. Not
    # derivable from the API URL on a data-residency host (api.NAME.ghe.com
    # serves its pages at NAME.ghe.com).
    html_url: str | None = None


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


class WebhookEvent(_Model):
    """The fields every delivery may carry; subclasses name their event."""

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

    @classmethod
    def required_objects(cls) -> tuple[str, ...]:
        """The payload objects this model cannot do without, sorted."""
        return tuple(
            sorted(
                name
                for name, f in cls.model_fields.items()
                if f.is_required()
                and isinstance(f.annotation, type)
                and issubclass(f.annotation, _Model)
            )
        )


class IssueCommentEvent(WebhookEvent):
    name: ClassVar[str] = "issue_comment"
    action: str
    sender: Account
    repository: Repository
    issue: Issue
    comment: Comment


class IssuesEvent(WebhookEvent):
    name: ClassVar[str] = "issues"
    action: str
    sender: Account
    repository: Repository
    issue: Issue
    label: Label | None = None  # on labeled/unlabeled


class PullRequestEvent(WebhookEvent):
    name: ClassVar[str] = "pull_request"
    action: str
    sender: Account
    repository: Repository
    number: int | None = None
    pull_request: PullRequest
    label: Label | None = None  # on labeled/unlabeled


class PullRequestReviewCommentEvent(WebhookEvent):
    name: ClassVar[str] = "pull_request_review_comment"
    action: str
    sender: Account
    repository: Repository
    pull_request: PullRequest
    comment: Comment


class InstallationEvent(WebhookEvent):
    name: ClassVar[str] = "installation"
    action: str
    installation: InstallationRef
    sender: Account | None = None


class RepositoryRef(_Model):
    full_name: str


class InstallationRepositoriesEvent(WebhookEvent):
    name: ClassVar[str] = "installation_repositories"
    action: str
    installation: InstallationRef
    repositories_added: tuple[RepositoryRef, ...] = ()
    repositories_removed: tuple[RepositoryRef, ...] = ()


class Hook(_Model):
    type: str | None = None
    app_id: int | None = None


class PingEvent(WebhookEvent):
    name: ClassVar[str] = "ping"
    zen: str | None = None
    hook_id: int | None = None
    hook: Hook | None = Field(default=None)


E = TypeVar("E", bound=WebhookEvent)


def _models() -> dict[str, type[WebhookEvent]]:
    return {m.name: m for m in WebhookEvent.__subclasses__()}


def parse_payload(model: type[E], body: bytes) -> E:
    """Parse a delivery body as ``model``.

    Raises ``PayloadError`` for malformed JSON or a payload missing a field the bot
    needs (the webhook route answers it with 400). Error messages name the field,
    never echo payload values.
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise PayloadError("malformed JSON body") from None
    if not isinstance(data, dict):
        raise PayloadError("payload is not a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise PayloadError(f"invalid {model.name} payload at {loc}: {first['type']}") from None


def parse_event(event: str, body: bytes) -> WebhookEvent | None:
    """Parse a delivery given its `X-GitHub-Event` header, as whichever model above
    describes that event; None (the body not even decoded) for any other event.
    Which events the bot acts on is the router's business (bot/service/worker/routes.py)."""
    model = _models().get(event)
    return None if model is None else parse_payload(model, body)
