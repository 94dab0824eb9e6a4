"""The fake GitHub's pull-request routes (installed by ``FakeGitHub``): pulls, their
files, review comments and replies, and the GraphQL the bot uses (review threads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from testkit.fakes.github_model import (
    ApiError,
    Issue,
    Repo,
    ReviewComment,
    User,
    body_json,
    body_text,
    missing_field,
    not_found,
    now_iso,
)

if TYPE_CHECKING:
    from testkit.fakes.github_server import FakeGitHub


def install(app: FastAPI, fake: FakeGitHub) -> None:
    P = fake.api_prefix
    lock = fake._lock

    # -- pulls ---------------------------------------------------------

    def pull(r: Repo, number: int) -> Issue:
        issue = fake._issue(r, number)
        if not issue.is_pr:
            raise not_found()
        return issue

    @app.post(P + "/repos/{owner}/{repo}/pulls")
    async def create_pull(owner: str, repo: str, request: Request) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            fake._require(r, "pull_requests")
            if not isinstance(payload, dict):
                raise missing_field("PullRequest", "head")
            head = str(payload.get("head") or "").split(":")[-1]
            base = str(payload.get("base") or "")
            for fname, value in (("head", head), ("base", base)):
                if value not in r.branches:
                    raise ApiError(
                        422,
                        "Validation Failed",
                        errors=[{"resource": "PullRequest", "code": "invalid", "field": fname}],
                    )
            if not payload.get("title"):
                raise missing_field("PullRequest", "title")
            body = body_text(payload, "PullRequest", required=False)
            for other in fake._issues.values():
                if (
                    other.repo == r.full_name
                    and other.is_pr
                    and other.head_ref == head
                    and other.state == "open"
                ):
                    raise ApiError(
                        422,
                        "Validation Failed",
                        errors=[
                            {
                                "resource": "PullRequest",
                                "code": "custom",
                                "message": f"A pull request already exists for {owner}:{head}.",
                            }
                        ],
                    )
            n = fake._new_issue(
                r.full_name, str(payload["title"]), body, User(fake.bot_login, "Bot"), [], None
            )
            issue = fake._issues[(r.full_name, n)]
            issue.is_pr, issue.head_ref, issue.base_ref = True, head, base
            return JSONResponse(fake._pull_json(issue), status_code=201)

    @app.get(P + "/repos/{owner}/{repo}/pulls")
    async def list_pulls(owner: str, repo: str, request: Request) -> JSONResponse:
        """``state`` (open, closed, all), ``sort`` (created, updated), ``direction``."""
        q = request.query_params
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            found = [
                i
                for (name, _), i in fake._issues.items()
                if name == r.full_name and i.is_pr and not i.gone
            ]
            if q.get("state", "open") != "all":
                found = [i for i in found if i.state == q.get("state", "open")]
            key = "updated_at" if q.get("sort") == "updated" else "created_at"
            desc = q.get("direction", "desc") == "desc"
            found.sort(key=lambda i: (getattr(i, key), i.number), reverse=desc)
            items = [fake._pull_json(i) for i in found]
        return fake._page(request, items)

    @app.get(P + "/repos/{owner}/{repo}/pulls/{pull_number:int}")
    async def get_pull(owner: str, repo: str, pull_number: int, request: Request) -> JSONResponse:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            return JSONResponse(fake._pull_json(pull(r, pull_number)))

    @app.get(P + "/repos/{owner}/{repo}/pulls/{pull_number:int}/files")
    async def pull_files(owner: str, repo: str, pull_number: int, request: Request) -> JSONResponse:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            items = list(pull(r, pull_number).pull_files)
        return fake._page(request, items)

    @app.get(P + "/repos/{owner}/{repo}/pulls/{pull_number:int}/comments")
    async def list_review_comments(
        owner: str, repo: str, pull_number: int, request: Request
    ) -> JSONResponse:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            pull(r, pull_number)
            items = fake.review_comments(r.full_name, pull_number)
        return fake._page(request, items)

    def review_comment(r: Repo, comment_id: int) -> ReviewComment:
        c = fake._review_comments.get(comment_id)
        if c is None or c.repo != r.full_name:
            raise not_found()
        return c

    @app.get(P + "/repos/{owner}/{repo}/pulls/comments/{comment_id:int}")
    async def get_review_comment(
        owner: str, repo: str, comment_id: int, request: Request
    ) -> JSONResponse:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            return JSONResponse(fake._review_comment_json(review_comment(r, comment_id)))

    @app.patch(P + "/repos/{owner}/{repo}/pulls/comments/{comment_id:int}")
    async def update_review_comment(
        owner: str, repo: str, comment_id: int, request: Request
    ) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            c = review_comment(r, comment_id)
            body = body_text(payload, "PullRequestReviewComment")
            assert body is not None
            c.body, c.updated_at = body, now_iso()
            return JSONResponse(fake._review_comment_json(c))

    @app.post(P + "/repos/{owner}/{repo}/pulls/comments/{comment_id:int}/reactions")
    async def react_review_comment(
        owner: str, repo: str, comment_id: int, request: Request
    ) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            review_comment(r, comment_id)
            status, out = fake._reaction(r.full_name, "review_comment", comment_id, payload)
            return JSONResponse(out, status_code=status)

    @app.post(P + "/repos/{owner}/{repo}/pulls/{pull_number:int}/comments/{comment_id:int}/replies")
    async def reply_review_comment(
        owner: str, repo: str, pull_number: int, comment_id: int, request: Request
    ) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            pull(r, pull_number)
            parent = review_comment(r, comment_id)
            if parent.pull_number != pull_number:
                raise not_found()
            body = body_text(payload, "PullRequestReviewComment")
            assert body is not None
            cid = fake._new_review_comment(
                r.full_name,
                pull_number,
                body=body,
                path=parent.path,
                line=parent.line,
                original_line=parent.original_line,
                diff_hunk=parent.diff_hunk,
                commit_id=parent.commit_id,
                original_commit_id=parent.original_commit_id,
                in_reply_to=comment_id,
                user=User(fake.bot_login, "Bot"),
            )
            return JSONResponse(
                fake._review_comment_json(fake._review_comments[cid]), status_code=201
            )

    # -- graphql -------------------------------------------------------

    graphql_path = "/api/graphql" if P.endswith("/api/v3") else P + "/graphql"

    @app.post(graphql_path)
    async def graphql(request: Request) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            installation = fake._installation_for(request)
            query = str(payload.get("query", "")) if isinstance(payload, dict) else ""
            variables = (payload.get("variables") or {}) if isinstance(payload, dict) else {}
            if "resolveReviewThread" in query:
                return JSONResponse(fake._gql_resolve(installation, variables))
            if "reviewThreads" in query:
                return JSONResponse(fake._gql_threads(installation, query, variables))
        return JSONResponse(
            {
                "errors": [
                    {"message": "the fake supports only reviewThreads and resolveReviewThread"}
                ]
            }
        )
