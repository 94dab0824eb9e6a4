"""The GitHub reader: a commit's files through the installation token.

Archive up to a size, lazy reads beyond (figures in benchmarks/repo_snapshot.py
and docs/architecture.md "Repository snapshots"):

1. One recursive git-trees request is the index (paths, sizes, blob shas,
   symlinks, submodules; 409 "Git Repository is empty." is an empty snapshot).
   ``list_files`` is served from it: never a list call afterwards.
2. When the tree is whole and its files sum to at most ``archive_max_bytes``, one
   tarball request (a 302 to codeload, followed) brings every file at once,
   streamed and unpacked in memory within the snapshot's bounds: a grounded run
   costs 2 requests however many files its debaters read, and ``search_code``
   runs over every file.
3. Otherwise (a monorepo, a tree GitHub cut at 100,000 entries, an archive past
   its bound or slower than ``timeout_s``) files are read one git blob each when
   first asked for (1 request per distinct file, shared by every run on the
   commit); ``search_code`` then needs a folder small enough to read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio

from bot.core.logs import get_logger
from bot.engine.types import RepoRef
from bot.repo.archive import unpack_into
from bot.repo.cache import SnapshotCache
from bot.repo.local import checkout_at
from bot.repo.paths import PathRefused, clean_path
from bot.repo.snapshot import Entry, Kind, Limits, Snapshot

log = get_logger(__name__)


class GitHubFiles(Protocol):
    """What this reader needs of GitHub (``bot.github.gateway.InstallationClient``)."""

    async def get_tree(self, repo: str, ref: str) -> dict[str, Any] | None: ...

    async def download_tarball(self, repo: str, ref: str, max_bytes: int) -> bytes | None: ...

    async def get_blob(self, repo: str, sha: str, max_bytes: int) -> bytes: ...

    async def get_contents(self, repo: str, path: str, ref: str) -> Any: ...


@dataclass(frozen=True)
class ReaderLimits:
    snapshot: Limits = field(default_factory=Limits)
    archive_max_bytes: int = 64 * 1024 * 1024
    timeout_s: float = 60.0  # the archive download and unpacking, together


def html_url(api_url: str, repo: str) -> str:
    """The repository's page, base of permalinks: ``https://api.github.com`` →
    ``https://github.com/owner/name``; a GHES ``https://host/api/v3`` →
    ``https://host/owner/name``."""
    base = api_url.rstrip("/")
    if base.endswith("/api/v3"):
        base = base[: -len("/api/v3")]
    elif base.startswith("https://api.github.com"):
        base = "https://github.com"
    return f"{base}/{repo}"


def tree_entries(tree: dict[str, Any]) -> tuple[list[Entry], bool]:
    """A git-trees answer as snapshot entries, and whether GitHub cut it. Entries
    whose path is not clean are dropped (a tree object can hold any name)."""
    entries: list[Entry] = []
    raw = tree.get("tree")
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        kind, mode = item.get("type"), str(item.get("mode") or "")
        try:
            path = clean_path(str(item.get("path") or ""))
        except PathRefused:
            continue
        if not path:
            continue
        sha = str(item.get("sha") or "")
        size = item.get("size")
        size = size if isinstance(size, int) and size >= 0 else 0
        if kind == "blob":
            entries.append(Entry(path, "link" if mode == "120000" else "file", size, sha))
        elif kind == "commit":
            entries.append(Entry(path, "submodule", 0, sha))
    return entries, bool(tree.get("truncated"))


_CONTENT_KINDS: dict[str, Kind] = {"file": "file", "symlink": "link", "submodule": "submodule"}


def content_entries(answer: Any) -> tuple[list[Entry], list[str]]:
    """A contents-API answer as snapshot entries and folders (unclean names dropped)."""
    items = answer if isinstance(answer, list) else [answer] if isinstance(answer, dict) else []
    entries: list[Entry] = []
    folders: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        try:
            path = clean_path(str(item.get("path") or ""))
        except PathRefused:
            continue
        kind = _CONTENT_KINDS.get(str(item.get("type")))
        size = item.get("size")
        if item.get("type") == "dir" and path:
            folders.append(path)
        elif kind is not None and path:
            sized = size if isinstance(size, int) and size >= 0 else 0
            entries.append(Entry(path, kind, sized, str(item.get("sha") or "")))
    return entries, folders


async def fetch_snapshot(gh: GitHubFiles, ref: RepoRef, limits: ReaderLimits) -> Snapshot:
    """Build the snapshot of ``ref`` (2 requests when the archive serves it)."""
    tree = await gh.get_tree(ref.repo, ref.commit)
    if tree is None:  # an empty repository (409) or a commit GitHub does not know (404)
        return Snapshot(
            repo=ref.repo,
            commit=ref.commit,
            html_url=ref.html_url,
            entries=(),
            limits=limits.snapshot,
            notes=("the repository has no files at this commit",),
        )
    entries, truncated = tree_entries(tree)
    blob_cap = limits.snapshot.max_file_bytes + 1  # one byte more says "cut"

    async def load(e: Entry) -> bytes | None:
        return await gh.get_blob(ref.repo, e.sha, blob_cap) if e.sha else None

    async def probe(path: str) -> tuple[list[Entry], list[str]]:
        return content_entries(await gh.get_contents(ref.repo, path, ref.commit))

    snap = Snapshot(
        repo=ref.repo,
        commit=ref.commit,
        html_url=ref.html_url,
        entries=entries,
        limits=limits.snapshot,
        loader=load,
        probe=probe if truncated else None,  # past GitHub's 100,000-entry cut
        remote=True,
        truncated=truncated,
    )
    total = sum(e.size for e in entries if e.kind == "file")
    if snap.truncated or total > limits.archive_max_bytes:
        log.info("repo.snapshot_lazy", repo=ref.repo, files=len(entries), bytes=total)
        return snap
    with anyio.move_on_after(limits.timeout_s):
        archive = await gh.download_tarball(ref.repo, ref.commit, limits.archive_max_bytes)
        if archive is not None:
            # The unpacked bound: the files plus tar's headers and padding (1 kB per
            # member at most), so a gzip bomb is stopped early.
            bound = total + 1024 * (len(entries) + 16)
            done = await anyio.to_thread.run_sync(
                lambda: unpack_into(snap, archive, max_unpacked=bound)
            )
            if done.complete and not snap.lacking():
                snap.seal()
            log.info(
                "repo.snapshot_archive",
                repo=ref.repo,
                files=done.files,
                skipped=done.skipped,
                complete=done.complete,
            )
    return snap


class GitHubReader:
    """Snapshots of GitHub commits for one process, shared through ``cache``."""

    def __init__(
        self,
        cache: SnapshotCache,
        limits: ReaderLimits | None = None,
        *,
        checkout: Path | None = None,
    ) -> None:
        self.cache = cache
        self.limits = limits or ReaderLimits()
        # Action mode: the job's checkout, read instead of GitHub when its HEAD is
        # the pinned commit (a PR job checks out a merge commit: GitHub then).
        self.checkout = checkout

    @classmethod
    def from_settings(
        cls, *, cache_mb: int, archive_max_mb: int, timeout_s: float, checkout: Path | None = None
    ) -> GitHubReader:
        """``DEBATE_BOT_REPO_SNAPSHOT_CACHE_MB``, ``…_REPO_ARCHIVE_MAX_MB``,
        ``…_REPO_FETCH_TIMEOUT_S`` (passed by the process wiring)."""
        mb = 1024 * 1024
        limits = ReaderLimits(archive_max_bytes=archive_max_mb * mb, timeout_s=timeout_s)
        return cls(SnapshotCache(cache_mb * mb), limits, checkout=checkout)

    async def snapshot(self, gh: GitHubFiles, ref: RepoRef) -> Snapshot:
        key = SnapshotCache.key(ref.repo, ref.commit)
        return await self.cache.get(key, lambda: self._build(gh, ref))

    async def _build(self, gh: GitHubFiles, ref: RepoRef) -> Snapshot:
        checkout = self.checkout
        if checkout is not None:
            local = await anyio.to_thread.run_sync(
                lambda: checkout_at(
                    checkout,
                    repo=ref.repo,
                    commit=ref.commit,
                    html_url=ref.html_url,
                    limits=self.limits.snapshot,
                )
            )
            if local is not None:
                return local
        return await fetch_snapshot(gh, ref, self.limits)
