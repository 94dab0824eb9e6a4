"""The fake GitHub's repository routes (installed by ``FakeGitHub``): the repository,
collaborator permissions, contents (read and write), trees and refs."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from testkit.fakes.github_model import (
    LEGACY_PERMISSION,
    PERMISSION_FLAGS,
    ApiError,
    User,
    _tree_entries,
    blob_sha,
    body_json,
    missing_field,
    not_found,
    sha1_hex,
)

if TYPE_CHECKING:
    from testkit.fakes.github_server import FakeGitHub


def install(app: FastAPI, fake: FakeGitHub) -> None:
    P = fake.api_prefix
    lock = fake._lock

    # -- repos ---------------------------------------------------------

    @app.get(P + "/repos/{owner}/{repo}")
    async def get_repo(owner: str, repo: str, request: Request) -> JSONResponse:
        with lock:
            return JSONResponse(fake._repo_json(fake._authorized_repo(request, owner, repo)))

    @app.get(P + "/repos/{owner}/{repo}/collaborators/{username}/permission")
    async def get_permission(
        owner: str, repo: str, username: str, request: Request
    ) -> JSONResponse:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            perm = r.permissions.get(username)
            if perm is None:
                raise not_found()
            user = fake._user_json(User(username))
            user["permissions"] = {
                f: f in PERMISSION_FLAGS[perm]
                for f in ("admin", "maintain", "push", "triage", "pull")
            }
            user["role_name"] = perm
            return JSONResponse(
                {"permission": LEGACY_PERMISSION[perm], "role_name": perm, "user": user}
            )

    @app.get(P + "/repos/{owner}/{repo}/contents/{path:path}")
    async def get_content(owner: str, repo: str, path: str, request: Request) -> Response:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            ref = request.query_params.get("ref") or r.default_branch
            tree = fake._tree(r, ref)
            if tree is None:
                raise ApiError(404, f"No commit found for the ref {ref}")
            path = path.strip("/")
            data = tree.get(path)
            if data is None:
                prefix = path + "/" if path else ""
                entries = sorted(
                    {p[len(prefix) :].split("/")[0] for p in tree if p.startswith(prefix)}
                )
                if not entries:
                    raise not_found()
                return JSONResponse(
                    [
                        {
                            "type": "file" if (prefix + e) in tree else "dir",
                            "name": e,
                            "path": prefix + e,
                            "sha": blob_sha(tree.get(prefix + e, b"")),
                            "size": len(tree.get(prefix + e, b"")),
                        }
                        for e in entries
                    ]
                )
        if "application/vnd.github.raw" in request.headers.get("accept", ""):
            return Response(data, media_type="application/vnd.github.raw")
        big = len(data) > 1024 * 1024
        encoded = base64.encodebytes(data).decode() if not big else ""
        return JSONResponse(
            {
                "type": "file",
                "encoding": "none" if big else "base64",
                "size": len(data),
                "name": path.rsplit("/", 1)[-1],
                "path": path,
                "content": encoded,
                "sha": blob_sha(data),
                "url": f"{fake.api_url}/repos/{owner}/{repo}/contents/{path}?ref={ref}",
                "html_url": f"https://github.com/{owner}/{repo}/blob/{ref}/{path}",
                "download_url": None,
            }
        )

    @app.get(P + "/installation/repositories")
    async def installation_repositories(request: Request) -> Response:
        with lock:
            installation = fake._installation_for(request)
            repos = [
                fake._repo_json(r)
                for r in sorted(fake._repos.values(), key=lambda r: r.id)
                if r.installation_id == installation
            ]
        page = fake._page(request, repos)
        # This endpoint wraps its page in an object, unlike most list endpoints.
        body = {"total_count": len(repos), "repositories": json.loads(bytes(page.body))}
        return JSONResponse(body, headers={k: v for k, v in page.headers.items() if k == "link"})

    @app.get(P + "/repos/{owner}/{repo}/git/trees/{tree_sha}")
    async def get_tree(owner: str, repo: str, tree_sha: str, request: Request) -> Response:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            tree = fake._tree(r, tree_sha)
            if tree is None:
                raise not_found()
            if not tree:
                raise ApiError(409, "Git Repository is empty.")
            recursive = request.query_params.get("recursive") not in (None, "", "0", "false")
            entries = _tree_entries(tree, recursive, fake.modes.get(r.full_name))
            limit = fake.tree_limit
        base = f"{fake.api_url}/repos/{owner}/{repo}/git"
        return JSONResponse(
            {
                "sha": sha1_hex("tree", owner, repo, tree_sha),
                "url": f"{base}/trees/{tree_sha}",
                "tree": [
                    {
                        **e,
                        "url": f"{base}/{'blobs' if e['type'] == 'blob' else 'trees'}/{e['sha']}",
                    }
                    for e in entries[:limit]
                ],
                "truncated": len(entries) > limit,
            }
        )

    @app.put(P + "/repos/{owner}/{repo}/contents/{path:path}")
    async def put_content(owner: str, repo: str, path: str, request: Request) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            fake._require(r, "contents")
            if not isinstance(payload, dict) or not payload.get("message"):
                raise missing_field("Commit", "message")
            try:
                data = base64.b64decode(str(payload.get("content", "")), validate=True)
            except ValueError:
                raise ApiError(422, "content is not valid Base64") from None
            branch = payload.get("branch") or r.default_branch
            if branch not in r.branches:
                raise ApiError(404, f"Branch {branch} not found")
            path = path.strip("/")
            existing = r.commits[r.branches[branch]].get(path)
            if existing is not None:
                if "sha" not in payload:
                    raise ApiError(422, 'Invalid request.\n\n"sha" wasn\'t supplied.')
                if payload["sha"] != blob_sha(existing):
                    raise ApiError(409, f"{path} does not match {payload['sha']}")
            commit = fake._commit(r, branch, {path: data})
            return JSONResponse(
                {
                    "content": {
                        "name": path.rsplit("/", 1)[-1],
                        "path": path,
                        "sha": blob_sha(data),
                        "size": len(data),
                        "type": "file",
                    },
                    "commit": {"sha": commit, "message": payload["message"]},
                },
                status_code=200 if existing is not None else 201,
            )

    @app.get(P + "/repos/{owner}/{repo}/git/ref/{ref:path}")
    async def get_ref(owner: str, repo: str, ref: str, request: Request) -> JSONResponse:
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            if not r.branches:  # before the first push (see make_empty)
                raise ApiError(409, "Git Repository is empty.")
            branch = ref.removeprefix("heads/")
            if not ref.startswith("heads/") or branch not in r.branches:
                raise not_found()
            sha = r.branches[branch]
            return JSONResponse(
                {
                    "ref": f"refs/{ref}",
                    "node_id": f"REF_{sha[:8]}",
                    "url": f"{fake.api_url}/repos/{owner}/{repo}/git/refs/{ref}",
                    "object": {"type": "commit", "sha": sha},
                }
            )

    @app.post(P + "/repos/{owner}/{repo}/git/refs")
    async def create_ref(owner: str, repo: str, request: Request) -> JSONResponse:
        payload = await body_json(request)
        with lock:
            r = fake._authorized_repo(request, owner, repo)
            fake._require(r, "contents")
            ref = payload.get("ref") if isinstance(payload, dict) else None
            sha = payload.get("sha") if isinstance(payload, dict) else None
            if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2:
                raise ApiError(422, f"{ref} is not a valid ref name.")
            if not isinstance(sha, str) or sha not in r.commits:
                raise ApiError(422, "Object does not exist")
            branch = ref.removeprefix("refs/heads/")
            if branch in r.branches:
                raise ApiError(422, "Reference already exists")
            r.branches[branch] = sha
            return JSONResponse(
                {
                    "ref": ref,
                    "node_id": f"REF_{sha[:8]}",
                    "url": f"{fake.api_url}/repos/{owner}/{repo}/git/{ref}",
                    "object": {"type": "commit", "sha": sha},
                },
                status_code=201,
            )
