"""The fake GitHub's issue routes (installed by ``FakeGitHub``): issues, their
comments, reactions and labels."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from testkit.fakes.github_model import (
    ApiError,
    Comment,
    User,
    body_json,
    body_text,
    missing_field,
    now_iso,
)

if TYPE_CHECKING:
    from testkit.fakes.github_server import FakeGitHub


def install(app: FastAPI, fake: FakeGitHub) -> None:
    P = fake.api_prefix
    lock = fake._lock

    # -- issues --------------------------------------------------------

    @app.post(P + "/repos/{owner}/{repo}/issues")
    async def create_issue(owner: str, repo: str, request: Request) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            title = payload.get("title") if isinstance(payload, dict) else None
            if not title:
                raise missing_field("Issue", "title")
            body = body_text(payload, "Issue", required=False)
            labels = [
                x if isinstance(x, str) else str(x.get("name")) for x in payload.get("labels") or []
            ]
            n = fake._new_issue(
                r.full_name, str(title), body, User(fake.bot_login, "Bot"), labels, None
            )
            return JSONResponse(fake._issue_json(fake._issues[(r.full_name, n)]), status_code=201)

    @app.get(P + "/repos/{owner}/{repo}/issues")
    async def list_issues(owner: str, repo: str, request: Request) -> JSONResponse:
        q = request.query_params
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            found = [
                i for (name, _), i in fake._issues.items() if name == r.full_name and not i.gone
            ]
            if q.get("creator"):
                found = [i for i in found if i.user.login == q["creator"]]
            if q.get("state", "open") != "all":
                found = [i for i in found if i.state == q.get("state", "open")]
            found.sort(key=lambda i: i.number, reverse=q.get("direction", "desc") == "desc")
            items = [fake._issue_json(i) for i in found]
        return fake._page(request, items)

    @app.get(P + "/repos/{owner}/{repo}/issues/{issue_number:int}")
    async def get_issue(owner: str, repo: str, issue_number: int, request: Request) -> JSONResponse:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            return JSONResponse(fake._issue_json(fake._issue(r, issue_number)))

    @app.get(P + "/repos/{owner}/{repo}/issues/{issue_number:int}/comments")
    async def list_comments(
        owner: str, repo: str, issue_number: int, request: Request
    ) -> JSONResponse:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            fake._issue(r, issue_number)
            items = [
                fake._comment_json(c)
                for c in sorted(fake._comments.values(), key=lambda c: c.id)
                if c.repo == r.full_name and c.issue_number == issue_number
            ]
        return fake._page(request, items)

    @app.post(P + "/repos/{owner}/{repo}/issues/{issue_number:int}/comments")
    async def create_comment(
        owner: str, repo: str, issue_number: int, request: Request
    ) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            fake._unless_locked(fake._issue(r, issue_number), "create")
            body = body_text(payload, "IssueComment")
            assert body is not None
            c = Comment(
                next(fake._ids), r.full_name, issue_number, body, User(fake.bot_login, "Bot")
            )
            fake._comments[c.id] = c
            return JSONResponse(fake._comment_json(c), status_code=201)

    @app.get(P + "/repos/{owner}/{repo}/issues/comments/{comment_id:int}")
    async def get_comment(owner: str, repo: str, comment_id: int, request: Request) -> JSONResponse:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            c = fake._issue_comment(r, comment_id)
            return JSONResponse(fake._comment_json(c))

    @app.patch(P + "/repos/{owner}/{repo}/issues/comments/{comment_id:int}")
    async def update_comment(
        owner: str, repo: str, comment_id: int, request: Request
    ) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            c = fake._issue_comment(r, comment_id)
            fake._unless_locked(fake._issues.get((c.repo, c.issue_number)), "update")
            body = body_text(payload, "IssueComment")
            assert body is not None
            c.body = body
            c.updated_at = now_iso()
            return JSONResponse(fake._comment_json(c))

    @app.post(P + "/repos/{owner}/{repo}/issues/comments/{comment_id:int}/reactions")
    async def react_comment(
        owner: str, repo: str, comment_id: int, request: Request
    ) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            fake._issue_comment(r, comment_id)
            status, out = fake._reaction(r.full_name, "issue_comment", comment_id, payload)
            return JSONResponse(out, status_code=status)

    @app.post(P + "/repos/{owner}/{repo}/issues/{issue_number:int}/reactions")
    async def react_issue(
        owner: str, repo: str, issue_number: int, request: Request
    ) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            fake._issue(r, issue_number)
            status, out = fake._reaction(r.full_name, "issue", issue_number, payload)
            return JSONResponse(out, status_code=status)

    @app.post(P + "/repos/{owner}/{repo}/issues/{issue_number:int}/labels")
    async def add_labels(
        owner: str, repo: str, issue_number: int, request: Request
    ) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            issue = fake._issue(r, issue_number)
            raw = payload.get("labels") if isinstance(payload, dict) else payload
            if not isinstance(raw, list):
                raise ApiError(
                    422, "Invalid request.\n\nFor 'links/0/schema', nil is not an array."
                )
            names = [x if isinstance(x, str) else str(x.get("name")) for x in raw]
            for name in names:
                r.labels.add(name)
                if name not in issue.labels:
                    issue.labels.append(name)
            return JSONResponse([fake._label_json(r.full_name, n) for n in issue.labels])

    @app.delete(P + "/repos/{owner}/{repo}/issues/{issue_number:int}/labels/{name}")
    async def remove_label(
        owner: str, repo: str, issue_number: int, name: str, request: Request
    ) -> JSONResponse:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            issue = fake._issue(r, issue_number)
            if name not in issue.labels:
                raise ApiError(404, "Label does not exist")
            issue.labels.remove(name)
            return JSONResponse([fake._label_json(r.full_name, n) for n in issue.labels])
