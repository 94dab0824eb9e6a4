"""What every piece of worker code is handed: the services, and where a trigger came from.

The bottom of the worker's import graph: bot/service/worker/respond.py builds on it, the
feature modules (debates, reviews, arbitration) build on both, and
bot/service/features/table.py registers the features with the router.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.github.events import (
    IssueCommentEvent,
    IssuesEvent,
    PullRequestEvent,
    PullRequestReviewCommentEvent,
)
from bot.github.gateway import GitHubGateway, InstallationClient
from bot.inputs.repo_config import CONFIG_PATH, RepoConfig, load_repo_config
from bot.models.router import ModelRouter
from bot.repo.cache import SnapshotCache
from bot.repo.github import GitHubReader, html_url
from bot.service.worker.publish import Thread
from bot.store import RunStore
from bot.store.aio import AsyncStore
from bot.store.rows import RunRow


@dataclass
class Services:
    settings: Settings
    store: RunStore
    gateway: GitHubGateway
    models: ModelRouter  # the model calls: adapters, fallbacks, capacity
    metrics: Metrics
    wake: Any = field(default=lambda: None)
    # How a new run is named; an Actions job names it after the job so that a
    # re-run finds the comments of the first attempt by their markers.
    new_run_id: Callable[[Origin], str] = field(default=lambda _: uuid.uuid4().hex[:12])
    # Look up the bot's own comments by marker before posting any (a re-run).
    resume_comments: bool = False
    # Repository snapshots at runs' pinned commits, shared by this process's runs.
    repos: GitHubReader = field(default_factory=lambda: GitHubReader(SnapshotCache(512 << 20)))

    # The store for async code: ``await svc.db.x(…)`` runs ``store.x`` in a thread.
    db: AsyncStore = field(init=False)

    def __post_init__(self) -> None:
        self.db = AsyncStore(self.store)


@dataclass(frozen=True)
class Origin:
    """Where a trigger came from and where replies go."""

    repo: str
    default_branch: str
    issue_number: int
    is_pr: bool
    sender: str
    title: str
    body: str
    comment_id: int | None = None  # the command comment (issue comment or review comment)
    review_comment: bool = False  # comment_id is a PR review comment
    # The root of the review thread replies go to (GitHub refuses replies to replies).
    thread_root: int | None = None
    delivery_id: str = ""
    labels: tuple[str, ...] = ()  # the issue's labels when the trigger fired
    retried: bool = False  # this delivery was processed before (crash, redelivery)
    html_url: str = ""  # the repository's page, from the delivery ("" for follow-ups)

    def repo_page(self, api_url: str) -> str:
        """The base of permalinks: what GitHub sent, else derived from the API URL."""
        return self.html_url or html_url(api_url, self.repo)

    def thread(self) -> Thread:
        return Thread(self.repo, self.issue_number)

    @classmethod
    def of_issue(
        cls, event: IssueCommentEvent | IssuesEvent, delivery_id: str, **extra: Any
    ) -> Origin:
        return cls(
            repo=event.repository.full_name,
            default_branch=event.repository.default_branch,
            issue_number=event.issue.number,
            is_pr=event.issue.pull_request is not None,
            sender=event.sender.login,
            title=event.issue.title,
            body=event.issue.body,
            delivery_id=delivery_id,
            labels=tuple(event.issue.label_names),
            html_url=event.repository.html_url or "",
            **extra,
        )

    @classmethod
    def of_pull(
        cls,
        event: PullRequestEvent | PullRequestReviewCommentEvent,
        delivery_id: str,
        **extra: Any,
    ) -> Origin:
        pr = event.pull_request
        return cls(
            repo=event.repository.full_name,
            default_branch=event.repository.default_branch,
            issue_number=pr.number,
            is_pr=True,
            sender=event.sender.login,
            title=pr.title,
            body=pr.body,
            delivery_id=delivery_id,
            labels=tuple(pr.label_names),
            html_url=event.repository.html_url or "",
            **extra,
        )

    @classmethod
    def of_run(cls, run: RunRow, pull: dict[str, Any], delivery_id: str, **extra: Any) -> Origin:
        """A follow-up started by a finished run (queued arbitrations, plan reviews)."""
        return cls(
            repo=run.repo,
            default_branch=run.trigger.default_branch or "main",
            issue_number=run.issue_number,
            is_pr=True,
            sender=run.trigger.sender,
            title=str(pull.get("title") or ""),
            body=str(pull.get("body") or ""),
            delivery_id=delivery_id,
            **extra,
        )


async def load_config(gh: InstallationClient, repo: str) -> RepoConfig:
    """`.github/debate.yml` on the default branch, else the org's `.github` repo."""
    text = await gh.read_file(repo, CONFIG_PATH)
    source = f"{repo}/{CONFIG_PATH}"
    if text is None:
        org_repo = f"{repo.split('/')[0]}/.github"
        text = await gh.read_file(org_repo, CONFIG_PATH)
        source = f"{org_repo}/{CONFIG_PATH}"
    return load_repo_config(text, source=source)
