"""Snapshots for tests of bot/repo, built the way the GitHub reader builds them:
entries from a git-tree-like index, content from a GitHub-shaped tarball."""

from __future__ import annotations

from bot.repo.archive import unpack_into
from bot.repo.snapshot import Entry, Kind, Limits, Snapshot
from testkit.fakes.github_archive import build_tarball
from testkit.fakes.github_server import blob_sha

COMMIT = "0123456789abcdef0123456789abcdef01234567"
HTML_URL = "https://github.com/acme/widgets"


def entries_of(files: dict[str, bytes], modes: dict[str, str]) -> list[Entry]:
    out = []
    for path, data in files.items():
        mode = modes.get(path, "100644")
        kind: Kind = {"120000": "link", "160000": "submodule"}.get(mode, "file")  # type: ignore[assignment]
        sha = data.decode() if kind == "submodule" else blob_sha(data)
        out.append(Entry(path, kind, 0 if kind == "submodule" else len(data), sha))
    return out


def archived(
    files: dict[str, bytes],
    modes: dict[str, str] | None = None,
    limits: Limits | None = None,
) -> Snapshot:
    """A sealed snapshot of ``files`` (``modes``: 120000 symlinks, 160000 submodules)."""
    modes = modes or {}
    snap = Snapshot(
        repo="acme/widgets",
        commit=COMMIT,
        html_url=HTML_URL,
        entries=entries_of(files, modes),
        limits=limits or Limits(),
    )
    unpack_into(snap, build_tarball("acme", "widgets", COMMIT, files, modes), max_unpacked=1 << 30)
    snap.seal()
    return snap
