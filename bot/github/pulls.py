"""Pull-request endpoints: pulls, their files, review comments and review threads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from bot.github.calls import MAX_PAGES, PER_PAGE, InstallationCalls, dig, split_repo
from bot.github.session import github_error, json_dict

_REVIEW_THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes { id isResolved comments(first: 100) { nodes { databaseId } } }
      }
    }
  }
}
"""

_RESOLVE_THREAD_MUTATION = """
mutation($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
"""


class PullEndpoints(InstallationCalls):
    async def get_pull(self, repo: str, number: int) -> dict[str, Any]:
        owner, name = split_repo(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/pulls/{pull_number}",
            lambda h: self._gh.rest.pulls.async_get(owner, name, number, headers=h),
        )
        return json_dict(response)

    async def list_pull_files(self, repo: str, number: int) -> list[dict[str, Any]]:
        owner, name = split_repo(repo)
        return await self._paginate(
            "/repos/{owner}/{repo}/pulls/{pull_number}/files",
            lambda h: self._gh.rest.pulls.async_list_files(
                owner, name, number, per_page=PER_PAGE, headers=h
            ),
        )

    async def get_review_comment(self, repo: str, comment_id: int) -> dict[str, Any]:
        owner, name = split_repo(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/pulls/comments/{comment_id}",
            lambda h: self._gh.rest.pulls.async_get_review_comment(
                owner, name, comment_id, headers=h
            ),
        )
        return json_dict(response)

    async def list_review_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        owner, name = split_repo(repo)
        return await self._paginate(
            "/repos/{owner}/{repo}/pulls/{pull_number}/comments",
            lambda h: self._gh.rest.pulls.async_list_review_comments(
                owner, name, number, per_page=PER_PAGE, headers=h
            ),
        )

    async def reply_review_comment(
        self, repo: str, pull_number: int, comment_id: int, body: str
    ) -> int:
        owner, name = split_repo(repo)
        response = await self._call(
            "POST",
            "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies",
            lambda h: self._gh.rest.pulls.async_create_reply_for_review_comment(
                owner, name, pull_number, comment_id, body=body, headers=h
            ),
            write=True,
        )
        return int(json_dict(response)["id"])

    async def update_review_comment(self, repo: str, comment_id: int, body: str) -> None:
        owner, name = split_repo(repo)
        await self._call(
            "PATCH",
            "/repos/{owner}/{repo}/pulls/comments/{comment_id}",
            lambda h: self._gh.rest.pulls.async_update_review_comment(
                owner, name, comment_id, body=body, headers=h
            ),
            write=True,
        )

    async def _review_threads(self, repo: str, pull_number: int) -> AsyncIterator[dict[str, Any]]:
        """The pull request's review threads (GraphQL: REST does not carry resolution)."""
        owner, name = split_repo(repo)
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            data = await self._graphql(
                "reviewThreads",
                _REVIEW_THREADS_QUERY,
                {"owner": owner, "name": name, "number": pull_number, "cursor": cursor},
                write=False,
            )
            threads = dig(data, "repository", "pullRequest", "reviewThreads")
            if not isinstance(threads, dict):
                raise github_error(f"pull request {repo}#{pull_number} not found via GraphQL")
            for node in threads.get("nodes") or []:
                if isinstance(node, dict):
                    yield node
            page = threads.get("pageInfo") or {}
            if not page.get("hasNextPage"):
                return
            cursor = page.get("endCursor")

    @staticmethod
    def _thread_comment_ids(node: dict[str, Any]) -> set[int]:
        return {
            c["databaseId"]
            for c in (dig(node, "comments", "nodes") or [])
            if isinstance(c, dict) and isinstance(c.get("databaseId"), int)
        }

    async def review_thread_states(self, repo: str, pull_number: int) -> dict[int, bool]:
        """Every review comment id on the pull request → whether its thread is resolved."""
        states: dict[int, bool] = {}
        async for node in self._review_threads(repo, pull_number):
            resolved = bool(node.get("isResolved"))
            for comment_id in self._thread_comment_ids(node):
                states[comment_id] = resolved
        return states

    async def resolve_review_thread(self, repo: str, pull_number: int, comment_id: int) -> bool:
        """Resolve the review thread holding ``comment_id``; False if no thread holds it."""
        thread: dict[str, Any] | None = None
        async for node in self._review_threads(repo, pull_number):
            if comment_id in self._thread_comment_ids(node):
                thread = node
                break
        if thread is None:
            return False
        if thread.get("isResolved"):
            return True
        result = await self._graphql(
            "resolveReviewThread",
            _RESOLVE_THREAD_MUTATION,
            {"threadId": thread["id"]},
            write=True,
        )
        return bool(dig(result, "resolveReviewThread", "thread", "isResolved"))

    async def create_pull(self, repo: str, title: str, head: str, base: str, body: str) -> int:
        owner, name = split_repo(repo)
        data: Any = {"title": title, "head": head, "base": base, "body": body}
        response = await self._call(
            "POST",
            "/repos/{owner}/{repo}/pulls",
            lambda h: self._gh.rest.pulls.async_create(owner, name, data=data, headers=h),
            write=True,
        )
        return int(json_dict(response)["number"])


# --- history: merged pull requests (`debate-bot eval harvest`) --------------------


class PullHistoryEndpoints(InstallationCalls):
    async def merged_pulls(self, repo: str, since: datetime) -> list[dict[str, Any]]:
        """Pull requests merged at or after ``since``, newest update first. Pages are
        read by last update and stop at the first older than ``since`` (a PR merged
        since was updated since)."""
        owner, name = split_repo(repo)
        out: list[dict[str, Any]] = []
        pages = self._pages(
            "/repos/{owner}/{repo}/pulls",
            lambda h: self._gh.rest.pulls.async_list(
                owner,
                name,
                state="closed",
                sort="updated",
                direction="desc",
                per_page=PER_PAGE,
                headers=h,
            ),
        )
        async for page in pages:
            for pr in page:
                updated = _when(pr.get("updated_at"))
                if updated is not None and updated < since:
                    return out
                merged = _when(pr.get("merged_at"))
                if merged is not None and merged >= since:
                    out.append(pr)
        return out


def _when(value: Any) -> datetime | None:
    """A GitHub timestamp (``2024-05-01T12:00:00Z``), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
