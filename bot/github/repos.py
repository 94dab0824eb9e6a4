"""Repository endpoints: permissions, the default branch, file contents and git refs."""

from __future__ import annotations

import base64
import binascii
from typing import Any
from urllib.parse import quote

import anyio
import httpx
from githubkit.response import Response

from bot.github.calls import PER_PAGE, InstallationCalls, dig, split_repo
from bot.github.session import github_error, json_body, json_dict

PERMISSIONS = ("admin", "maintain", "write", "triage", "read")


class RepoEndpoints(InstallationCalls):
    async def permission(self, repo: str, username: str) -> str:
        """The user's role: admin | maintain | write | triage | read | none."""
        owner, name = split_repo(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/collaborators/{username}/permission",
            lambda h: self._gh.rest.repos.async_get_collaborator_permission_level(
                owner, name, username, headers=h
            ),
            ok_statuses=(404,),
        )
        if response.status_code == 404:
            return "none"
        data = json_dict(response)
        # role_name tells maintain/triage apart (``permission`` folds them into
        # write/read); a custom role name falls back to the user's permission flags.
        role = data.get("role_name")
        if role in PERMISSIONS:
            return str(role)
        user = data.get("user")
        flags = user.get("permissions") if isinstance(user, dict) else None
        if isinstance(flags, dict):
            for perm, flag in (
                ("admin", "admin"),
                ("maintain", "maintain"),
                ("write", "push"),
                ("triage", "triage"),
                ("read", "pull"),
            ):
                if flags.get(flag):
                    return perm
        legacy = data.get("permission")
        return str(legacy) if legacy in PERMISSIONS else "none"

    async def get_repo(self, repo: str) -> dict[str, Any]:
        """``GET /repos/{owner}/{repo}``: the repository's metadata."""
        owner, name = split_repo(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}",
            lambda h: self._gh.rest.repos.async_get(owner, name, headers=h),
        )
        return json_dict(response)

    async def default_branch(self, repo: str) -> str:
        branch = (await self.get_repo(repo)).get("default_branch")
        if not isinstance(branch, str) or not branch:
            raise github_error("GitHub returned a repository without a default branch")
        return branch

    async def license_id(self, repo: str) -> str:
        """The repository's licence as GitHub detected it (SPDX id), or ``""``."""
        spdx = ((await self.get_repo(repo)).get("license") or {}).get("spdx_id")
        return spdx if isinstance(spdx, str) and spdx != "NOASSERTION" else ""

    async def installation_repositories(self, limit: int) -> list[str]:
        """``owner/name`` of the repositories this installation can see, at most ``limit``."""
        names: list[str] = []
        for page in range(1, 1 + -(-limit // PER_PAGE)):

            async def op(h: dict[str, str], page: int = page) -> Response[Any]:
                return await self._gh.rest.apps.async_list_repos_accessible_to_installation(
                    per_page=PER_PAGE, page=page, headers=h
                )

            response = await self._call("GET", "/installation/repositories", op)
            repos = json_dict(response).get("repositories")
            batch = [str(r["full_name"]) for r in repos or [] if isinstance(r, dict)]
            names += batch
            if len(batch) < PER_PAGE:
                break
        return names[:limit]

    async def get_tree(self, repo: str, ref: str) -> dict[str, Any] | None:
        """The recursive git tree at ``ref`` (one request, GitHub marks a cut answer
        ``truncated``); None for an empty repository (409) or an unknown ref (404)."""
        owner, name = split_repo(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/git/trees/{tree_sha}",
            lambda h: self._gh.rest.git.async_get_tree(owner, name, ref, recursive="1", headers=h),
            ok_statuses=(404, 409),
        )
        if response.status_code in (404, 409):
            return None
        return json_dict(response)

    async def read_file(self, repo: str, path: str, ref: str | None = None) -> str | None:
        """A UTF-8 text file's content, or None when it does not exist (404)."""
        owner, name = split_repo(repo)
        quoted = quote(path.strip("/"), safe="/")
        route = "/repos/{owner}/{repo}/contents/{path}"
        kwargs: dict[str, Any] = {} if ref is None else {"ref": ref}
        response = await self._call(
            "GET",
            route,
            lambda h: self._gh.rest.repos.async_get_content(
                owner, name, quoted, headers=h, **kwargs
            ),
            ok_statuses=(404,),
        )
        if response.status_code == 404:
            return None
        data = json_body(response)
        if isinstance(data, list):
            raise github_error(
                f"{path} is a directory, not a file", github_status=response.status_code
            )
        if not isinstance(data, dict) or data.get("type") != "file":
            kind = data.get("type") if isinstance(data, dict) else type(data).__name__
            raise github_error(
                f"{path} is a {kind}, not a file", github_status=response.status_code
            )
        if data.get("encoding") == "base64":
            try:
                raw = base64.b64decode(str(data.get("content", "")))
            except (binascii.Error, ValueError) as exc:
                raise github_error(f"{path}: undecodable content") from exc
        else:
            # Files over 1 MB come back with encoding "none": fetch the raw bytes.
            async def raw_op(h: dict[str, str]) -> Response[Any]:
                h = {**h, "Accept": "application/vnd.github.raw+json"}
                return await self._gh.rest.repos.async_get_content(
                    owner, name, quoted, headers=h, **kwargs
                )

            raw = (await self._call("GET", route, raw_op)).raw_response.content
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise github_error(f"{path} is not a UTF-8 text file") from exc

    async def branch_sha(self, repo: str, branch: str) -> str:
        """The commit a branch points at."""
        owner, name = split_repo(repo)
        ref = "heads/" + quote(branch, safe="/")
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/git/ref/{ref}",
            lambda h: self._gh.rest.git.async_get_ref(owner, name, ref, headers=h),
        )
        sha = dig(response.raw_response.json(), "object", "sha")
        if not isinstance(sha, str) or not sha:
            raise github_error(f"GitHub returned no commit for branch {branch!r}")
        return sha

    async def create_branch(self, repo: str, branch: str, from_sha: str) -> None:
        owner, name = split_repo(repo)
        await self._call(
            "POST",
            "/repos/{owner}/{repo}/git/refs",
            lambda h: self._gh.rest.git.async_create_ref(
                owner, name, ref=f"refs/heads/{branch}", sha=from_sha, headers=h
            ),
            write=True,
        )

    async def put_file(
        self,
        repo: str,
        path: str,
        branch: str,
        content: str,
        message: str,
        sha: str | None = None,
    ) -> None:
        """Create or replace a file on ``branch``.

        ``sha`` is the blob being replaced; when omitted it is looked up, so this is
        an upsert (e.g. a revised plan written over the original on a new branch).
        """
        owner, name = split_repo(repo)
        quoted = quote(path.strip("/"), safe="/")
        if sha is None:
            existing = await self._call(
                "GET",
                "/repos/{owner}/{repo}/contents/{path}",
                lambda h: self._gh.rest.repos.async_get_content(
                    owner, name, quoted, ref=branch, headers=h
                ),
                ok_statuses=(404,),
            )
            if existing.status_code != 404:
                found = json_body(existing)
                if isinstance(found, dict) and isinstance(found.get("sha"), str):
                    sha = found["sha"]
        data: Any = {
            "message": message,
            "content": base64.b64encode(content.encode("utf-8")).decode("ascii"),
            "branch": branch,
        }
        if sha is not None:
            data["sha"] = sha
        await self._call(
            "PUT",
            "/repos/{owner}/{repo}/contents/{path}",
            lambda h: self._gh.rest.repos.async_create_or_update_file_contents(
                owner, name, quoted, data=data, headers=h
            ),
            write=True,
        )

    # -- a commit's files, for repository snapshots (bot/repo/github.py) ----------

    async def download_tarball(self, repo: str, ref: str, max_bytes: int) -> bytes | None:
        """The ``.tar.gz`` of ``ref``, or None when it is larger than ``max_bytes`` (the
        download stops there) or there is none (404, 409 an empty repository).

        GitHub answers 302 to a short-lived codeload URL (``/_codeload`` on GHES);
        httpx follows it and drops the token when the host changes. The body is
        streamed, so a 2 GB archive costs ``max_bytes`` of memory, not 2 GB."""
        owner, name = split_repo(repo)
        path = f"/repos/{quote(owner)}/{quote(name)}/tarball/{quote(ref, safe='')}"

        async def op(h: dict[str, str]) -> Response[Any]:
            return await self._gh.arequest("GET", path, headers=h, stream=True)

        response = await self._call(
            "GET", "/repos/{owner}/{repo}/tarball/{ref}", op, ok_statuses=(404, 409)
        )
        return await _capped_body(response, max_bytes, none_on=(404, 409))

    async def get_contents(self, repo: str, path: str, ref: str) -> Any:
        """``GET …/contents/{path}`` as GitHub answers it (an object for a file,
        symlink or submodule, a list for a folder), None when nothing is there."""
        owner, name = split_repo(repo)
        quoted = quote(path.strip("/"), safe="/")
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/contents/{path}",
            lambda h: self._gh.rest.repos.async_get_content(
                owner, name, quoted, ref=ref, headers=h
            ),
            ok_statuses=(404,),
        )
        return None if response.status_code == 404 else json_body(response)

    async def get_blob(self, repo: str, sha: str, max_bytes: int) -> bytes:
        """A git blob's raw bytes, at most ``max_bytes`` of them (the rest is not
        downloaded: the snapshot keeps a cut file and says so)."""
        owner, name = split_repo(repo)
        path = f"/repos/{quote(owner)}/{quote(name)}/git/blobs/{quote(sha, safe='')}"

        async def op(h: dict[str, str]) -> Response[Any]:
            h = {**h, "Accept": "application/vnd.github.raw+json"}
            return await self._gh.arequest("GET", path, headers=h, stream=True)

        response = await self._call("GET", "/repos/{owner}/{repo}/git/blobs/{file_sha}", op)
        body = await _capped_body(response, max_bytes, keep_prefix=True)
        assert body is not None  # keep_prefix never gives up
        return body


async def _capped_body(
    response: Response[Any],
    max_bytes: int,
    *,
    none_on: tuple[int, ...] = (),
    keep_prefix: bool = False,
) -> bytes | None:
    """A streamed body, read up to ``max_bytes``: past it, None (or the first
    ``max_bytes`` with ``keep_prefix``); the connection is released either way."""
    raw = response.raw_response
    try:
        if raw.status_code in none_on:
            return None
        chunks: list[bytes] = []
        size = 0
        async for chunk in raw.aiter_bytes():
            size += len(chunk)
            if size > max_bytes:
                if not keep_prefix:
                    return None
                chunks.append(chunk[: len(chunk) - (size - max_bytes)])
                break
            chunks.append(chunk)
        return b"".join(chunks)
    except httpx.HTTPError as exc:  # the stream broke after the headers
        raise github_error(f"GitHub download cut: {type(exc).__name__}") from exc
    finally:
        with anyio.CancelScope(
            shield=True
        ):  # a download cut by a timeout still frees its connection
            await raw.aclose()
