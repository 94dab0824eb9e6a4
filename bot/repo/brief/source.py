"""The repository a brief is read from: the port the brief owns (issue 17).

Any reader of a repository at one commit that can list its paths and read a
file's text serves: ``bot.repo``'s snapshots do (GitHub's, or a checkout's),
so the brief no longer makes GitHub calls of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from bot.repo.brief.tree import Kind, TreeEntry

_KINDS: dict[str, Kind] = {"file": "blob", "link": "blob", "submodule": "commit", "folder": "tree"}


class RepoFiles(Protocol):
    """A repository at one commit, read-only."""

    @property
    def truncated(self) -> bool:
        """The listing misses entries (GitHub cut the tree, or a bound was reached)."""
        ...

    def listing(self) -> Iterable[tuple[str, int, str]]:
        """(path, size, kind): kind is file, link, submodule or folder."""
        ...

    async def text(self, path: str) -> str | None:
        """A text file's content; None when it is missing, binary or unreadable."""
        ...


def tree_of(files: RepoFiles) -> tuple[TreeEntry, ...]:
    """The listing as the brief's tree entries, in path order."""
    entries = [TreeEntry(p, size, _KINDS[kind]) for p, size, kind in files.listing()]
    return tuple(sorted(entries, key=lambda e: e.path))
