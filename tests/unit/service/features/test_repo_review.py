"""`/debate review` of a repository nothing was pushed to
(bot/service/features/reviews/repo_review.py): GitHub's 409 "Git Repository
is empty." is an answer, not a failure to retry."""

from __future__ import annotations

from typing import Any, cast

import pytest

from bot.core.errors import GitHubError
from bot.github.session import github_error, is_empty_repository
from bot.inputs.parser import Command
from bot.inputs.repo_config import RepoConfig
from bot.service.features.reviews.repo_review import review_repository
from bot.service.worker.context import Origin

REF_ROUTE = "/repos/{owner}/{repo}/git/ref/{ref}"


def _failed(status: int, detail: str) -> GitHubError:
    return github_error(
        f"GitHub GET {REF_ROUTE} failed: {status} {detail}",
        github_status=status,
        detail=detail,
        route=REF_ROUTE,
    )


class Responder:
    """What review_repository uses of the worker's Responder before a run starts."""

    def __init__(self) -> None:
        self.replies: list[str] = []

    async def reply(self, gh: Any, origin: Origin, text: str) -> None:
        self.replies.append(text)

    async def start(self, *args: Any, **kwargs: Any) -> str:
        raise AssertionError("no run for an empty repository")


class Client:
    def __init__(self, error: GitHubError) -> None:
        self.error = error

    async def branch_sha(self, repo: str, branch: str) -> str:
        raise self.error


ORIGIN = Origin(
    repo="acme/widgets",
    default_branch="main",
    issue_number=7,
    is_pr=False,
    sender="octocat",
    title="Design review",
    body="",
)


def test_only_the_empty_repository_409_is_recognised() -> None:
    assert is_empty_repository(_failed(409, "Git Repository is empty."))
    assert not is_empty_repository(_failed(409, "README.md does not match abc"))
    assert not is_empty_repository(_failed(404, "Not Found"))
    assert not is_empty_repository(GitHubError("Git Repository is empty."))  # no answer


async def test_an_empty_repository_is_answered_without_a_retry() -> None:
    r = Responder()
    gh = Client(_failed(409, "Git Repository is empty."))
    state = await review_repository(
        cast(Any, r), cast(Any, gh), ORIGIN, RepoConfig(), Command(action="review")
    )
    assert state == "done"
    assert r.replies == ["The repository is empty at `main`; there is nothing to review."]


async def test_other_github_answers_still_fail_the_command() -> None:
    r = Responder()
    gh = Client(_failed(403, "Resource not accessible by integration"))
    with pytest.raises(GitHubError):
        await review_repository(
            cast(Any, r), cast(Any, gh), ORIGIN, RepoConfig(), Command(action="review")
        )
    assert r.replies == []
