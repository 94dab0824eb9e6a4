"""Issue endpoints: issues, their comments, labels and reactions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from bot.github.calls import PER_PAGE, InstallationCalls, split_repo
from bot.github.session import Op, github_error, json_body, json_dict

REACTIONS = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})


class IssueEndpoints(InstallationCalls):
    async def create_comment(self, repo: str, issue_number: int, body: str) -> int:
        owner, name = split_repo(repo)
        response = await self._call(
            "POST",
            "/repos/{owner}/{repo}/issues/{issue_number}/comments",
            lambda h: self._gh.rest.issues.async_create_comment(
                owner, name, issue_number, body=body, headers=h
            ),
            write=True,
        )
        return int(json_dict(response)["id"])

    async def update_comment(self, repo: str, comment_id: int, body: str) -> None:
        owner, name = split_repo(repo)
        await self._call(
            "PATCH",
            "/repos/{owner}/{repo}/issues/comments/{comment_id}",
            lambda h: self._gh.rest.issues.async_update_comment(
                owner, name, comment_id, body=body, headers=h
            ),
            write=True,
        )

    async def list_comments(self, repo: str, issue_number: int) -> list[dict[str, Any]]:
        """The issue's comments as GitHub's JSON (id, body, user, …), every page."""
        owner, name = split_repo(repo)
        items = await self._paginate(
            "/repos/{owner}/{repo}/issues/{issue_number}/comments",
            lambda h: self._gh.rest.issues.async_list_comments(
                owner, name, issue_number, per_page=PER_PAGE, headers=h
            ),
        )
        return [c for c in items if "id" in c]

    # -- reactions -----------------------------------------------------------

    async def add_reaction(
        self, repo: str, comment_id: int, content: str, *, review_comment: bool = False
    ) -> None:
        owner, name = split_repo(repo)
        data = _reaction(content)
        reactions = self._gh.rest.reactions
        if review_comment:
            await self._react(
                "/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions",
                lambda h: reactions.async_create_for_pull_request_review_comment(
                    owner, name, comment_id, data=data, headers=h
                ),
            )
        else:
            await self._react(
                "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
                lambda h: reactions.async_create_for_issue_comment(
                    owner, name, comment_id, data=data, headers=h
                ),
            )

    async def add_issue_reaction(self, repo: str, issue_number: int, content: str) -> None:
        owner, name = split_repo(repo)
        data = _reaction(content)
        await self._react(
            "/repos/{owner}/{repo}/issues/{issue_number}/reactions",
            lambda h: self._gh.rest.reactions.async_create_for_issue(
                owner, name, issue_number, data=data, headers=h
            ),
        )

    async def _react(self, route: str, op: Op) -> None:
        # Replay-safe: GitHub answers 200 for a repeated reaction.
        await self._call("POST", route, op, write=True, replay_safe=True)

    # -- labels and issues ---------------------------------------------------

    async def add_labels(self, repo: str, issue_number: int, labels: Iterable[str]) -> None:
        owner, name = split_repo(repo)
        wanted = list(labels)
        if not wanted:
            return
        await self._call(
            "POST",
            "/repos/{owner}/{repo}/issues/{issue_number}/labels",
            lambda h: self._gh.rest.issues.async_add_labels(
                owner, name, issue_number, labels=wanted, headers=h
            ),
            write=True,
            replay_safe=True,  # GitHub answers 200 for a repeat
        )

    async def remove_label(self, repo: str, issue_number: int, label: str) -> None:
        """Remove a label; a label that is not there (404) is not an error."""
        owner, name = split_repo(repo)
        await self._call(
            "DELETE",
            "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}",
            lambda h: self._gh.rest.issues.async_remove_label(
                owner, name, issue_number, quote(label, safe=""), headers=h
            ),
            write=True,
            ok_statuses=(404,),
        )

    async def create_issue(
        self, repo: str, title: str, body: str, labels: Iterable[str] = ()
    ) -> int:
        owner, name = split_repo(repo)
        data: Any = {"title": title, "body": body}
        if labels:
            data["labels"] = list(labels)
        response = await self._call(
            "POST",
            "/repos/{owner}/{repo}/issues",
            lambda h: self._gh.rest.issues.async_create(owner, name, data=data, headers=h),
            write=True,
        )
        return int(json_dict(response)["number"])

    async def find_own_issue(self, repo: str, marker: str) -> int | None:
        """The newest issue the app filed whose body carries ``marker`` (one page:
        it is asked right after filing, or on resuming the run that filed it)."""
        owner, name = split_repo(repo)
        me = await self.bot_login()
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/issues",
            lambda h: self._gh.rest.issues.async_list_for_repo(
                owner,
                name,
                creator=me,
                state="all",
                sort="created",
                direction="desc",
                per_page=PER_PAGE,
                headers=h,
            ),
        )
        for issue in json_body(response) or []:
            if isinstance(issue, dict) and marker in str(issue.get("body") or ""):
                return int(issue["number"])
        return None

    async def get_issue(self, repo: str, number: int) -> dict[str, Any]:
        """The issue as GitHub returns it (``pull_request`` present on PRs)."""
        owner, name = split_repo(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/issues/{issue_number}",
            lambda h: self._gh.rest.issues.async_get(owner, name, number, headers=h),
        )
        return json_dict(response)


def _reaction(content: str) -> Any:
    """The request body for a reaction, after checking GitHub knows it."""
    if content not in REACTIONS:
        raise github_error(f"unknown reaction {content!r}")
    return {"content": content}
