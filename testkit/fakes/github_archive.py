"""The fake GitHub's archive and git-blob routes (installed by ``FakeGitHub``).

- ``GET /repos/{owner}/{repo}/tarball/{ref}``: 302 to a one-use codeload URL on
  the same fake, outside the API prefix (``/_codeload/...``, as GHES serves it;
  github.com uses codeload.github.com), carrying its own ``token`` query
  parameter and needing no Authorization header, as GitHub's does. An empty
  repository answers 404.
- ``GET /_codeload/{owner}/{repo}/legacy.tar.gz/{sha}?token=``: the commit's
  files as GitHub builds the archive: a pax global header naming the commit, one
  top folder ``owner-repo-sha7/``, folders, files, symlinks (mode 120000 in the
  tree) and submodules as empty folders. ``archives[(repo, sha)]`` replaces the
  bytes with a crafted archive (``..`` members, a bomb). Streamed in chunks.
- ``GET /repos/{owner}/{repo}/git/blobs/{file_sha}``: a blob of any commit of
  the repository, JSON (base64) or raw with ``application/vnd.github.raw+json``.

Seed symlinks and submodules with ``FakeGitHub.set_mode(repo, path, mode)``
(the file's content is then the link target or the submodule's commit).
"""

from __future__ import annotations

import base64
import io
import secrets
import tarfile
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

if TYPE_CHECKING:
    from testkit.fakes.github_server import FakeGitHub

CHUNK = 64 * 1024


def build_tarball(
    owner: str, repo: str, sha: str, files: dict[str, bytes], modes: dict[str, str]
) -> bytes:
    """A ``.tar.gz`` shaped like GitHub's ``legacy.tar.gz``."""
    top = f"{owner}-{repo}-{sha[:7]}"
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        tar.pax_headers = {"comment": sha}
        folders = sorted(
            {"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)}
        )
        for name in ["", *folders]:
            info = tarfile.TarInfo(f"{top}/{name}".rstrip("/") + "/")
            info.type = tarfile.DIRTYPE
            info.mode = 0o775
            tar.addfile(info)
        for path in sorted(files):
            data = files[path]
            info = tarfile.TarInfo(f"{top}/{path}")
            mode = modes.get(path, "100644")
            if mode == "120000":
                info.type = tarfile.SYMTYPE
                info.linkname = data.decode()
                tar.addfile(info)
            elif mode == "160000":
                info.type = tarfile.DIRTYPE
                info.name += "/"
                tar.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o755 if mode == "100755" else 0o664
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def install(app: FastAPI, fake: FakeGitHub) -> None:
    P = fake.api_prefix
    lock = fake._lock
    issued: dict[str, tuple[str, str]] = {}  # codeload token -> (repo, sha)

    @app.get(P + "/repos/{owner}/{repo}/tarball/{ref:path}")
    async def tarball(owner: str, repo: str, ref: str, request: Request) -> Response:
        from testkit.fakes.github_server import not_found

        with lock:
            r = fake._authorized_repo(request, owner, repo)
            tree = fake._tree(r, ref)
            if not tree:
                raise not_found()
            sha = r.branches.get(ref.removeprefix("refs/heads/"), ref)
            token = secrets.token_hex(8)
            issued[token] = (r.full_name, sha)
        url = f"{fake.url}/_codeload/{owner}/{repo}/legacy.tar.gz/{sha}?token={token}"
        return RedirectResponse(url, status_code=302)

    @app.get("/_codeload/{owner}/{repo}/legacy.tar.gz/{sha}")
    async def codeload(owner: str, repo: str, sha: str, token: str = "") -> Response:
        with lock:
            granted = issued.pop(token, None)
            if granted != (f"{owner}/{repo}", sha):
                return Response(b"Not Found", status_code=404)
            r = fake._repo(granted[0])
            data = fake.archives.get(granted)
            if data is None:
                files = dict(fake._tree(r, sha) or {})
                modes = fake.modes.get(r.full_name, {})
                data = build_tarball(owner, repo, sha, files, modes)

        async def body() -> AsyncIterator[bytes]:
            for i in range(0, len(data), CHUNK):
                yield data[i : i + CHUNK]

        return StreamingResponse(
            body(),
            media_type="application/x-gzip",
            headers={
                "content-disposition": f"attachment; filename={owner}-{repo}-{sha[:7]}.tar.gz"
            },
        )

    @app.get(P + "/repos/{owner}/{repo}/git/blobs/{file_sha}")
    async def blob(owner: str, repo: str, file_sha: str, request: Request) -> Response:
        from testkit.fakes.github_server import blob_sha, not_found

        with lock:
            r = fake._authorized_repo(request, owner, repo)
            found = next(
                (
                    d
                    for tree in r.commits.values()
                    for d in tree.values()
                    if blob_sha(d) == file_sha
                ),
                None,
            )
        if found is None:
            raise not_found()
        if "application/vnd.github.raw" in request.headers.get("accept", ""):
            return Response(found, media_type="application/vnd.github.raw")
        return JSONResponse(
            {
                "sha": file_sha,
                "size": len(found),
                "encoding": "base64",
                "content": base64.encodebytes(found).decode(),
                "url": f"{fake.api_url}/repos/{owner}/{repo}/git/blobs/{file_sha}",
            }
        )
