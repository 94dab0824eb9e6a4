"""Two GitHub reads the gateway does not offer (yet): review-thread states and a
branch's head commit.

They go through ``InstallationClient._call`` / ``_graphql`` so they get the same
auth, pacing, bounded retries and accounting as every other call. They belong
in ``InstallationClient``; they live here only because this module's author
does not own the gateway.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from bot.errors import GitHubError
from bot.github.gateway import _REVIEW_THREADS_QUERY, MAX_PAGES, InstallationClient


def _split(repo: str) -> tuple[str, str]:
    owner, _, name = repo.partition("/")
    return owner, name


async def review_thread_states(gh: InstallationClient, repo: str, pull: int) -> dict[int, bool]:
    """Every review comment id on the pull request → whether its thread is resolved.

    REST review comments do not carry the resolution state; GraphQL does.
    """
    owner, name = _split(repo)
    states: dict[int, bool] = {}
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        data = await gh._graphql(
            "reviewThreads",
            _REVIEW_THREADS_QUERY,
            {"owner": owner, "name": name, "number": pull, "cursor": cursor},
            write=False,
        )
        threads: Any = ((data.get("repository") or {}).get("pullRequest") or {}).get(
            "reviewThreads"
        )
        if not isinstance(threads, dict):
            raise GitHubError(f"pull request {repo}#{pull} not found via GraphQL")
        for node in threads.get("nodes") or []:
            resolved = bool(node.get("isResolved"))
            for c in (node.get("comments") or {}).get("nodes") or []:
                if isinstance(c, dict) and isinstance(c.get("databaseId"), int):
                    states[c["databaseId"]] = resolved
        page = threads.get("pageInfo") or {}
        if not page.get("hasNextPage"):
            break
        cursor = page.get("endCursor")
    return states


async def branch_sha(gh: InstallationClient, repo: str, branch: str) -> str:
    """The commit a branch points at (``GET /repos/{owner}/{repo}/git/ref/heads/{branch}``)."""
    owner, name = _split(repo)
    ref = "heads/" + quote(branch, safe="/")
    response = await gh._call(
        "GET",
        "/repos/{owner}/{repo}/git/ref/{ref}",
        lambda h: gh._gh.rest.git.async_get_ref(owner, name, ref, headers=h),
    )
    data = response.raw_response.json()
    sha = (data.get("object") or {}).get("sha") if isinstance(data, dict) else None
    if not isinstance(sha, str) or not sha:
        raise GitHubError(f"GitHub returned no commit for branch {branch!r}")
    return sha
