"""A checkout on disk as tree entries and contents (the package's only I/O).

Inside a git work tree the file list is ``git ls-files`` (tracked, and untracked
files that are not ignored), so ``.gitignore`` is honoured exactly as git does;
elsewhere the directory is walked as ``bot.repo.local`` walks it, skipping
dot-files, hidden and vendored folders and key files (there is no ignore file
to ask). The debaters' tools read less: tracked files only (``bot.repo.local``).
"""

from __future__ import annotations

import stat
from pathlib import Path

from bot.repo.brief.tree import TreeEntry
from bot.repo.local import git_files, walk_files

READ_MAX_BYTES = 1024 * 1024  # condensed or cut to an excerpt anyway


def read_tree(root: Path) -> tuple[TreeEntry, ...]:
    """The files under ``root`` (paths relative to it, sizes from stat)."""
    root = root.resolve()
    paths = git_files(root, untracked=True)
    if paths is None:
        paths = walk_files(root)
    entries = []
    for rel in sorted(paths):
        try:
            st = (root / rel).stat()
        except OSError:
            continue  # listed by git but deleted in the work tree
        if stat.S_ISDIR(st.st_mode):
            entries.append(TreeEntry(rel, 0, "commit"))  # git lists a submodule as one path
        else:
            entries.append(TreeEntry(rel, st.st_size, "blob"))
    return tuple(entries)


def read_text(root: Path, rel: str) -> str | None:
    """UTF-8 text of ``root/rel``, or None when it is gone, binary or outside root."""
    base = root.resolve()
    target = (base / rel).resolve()
    if not target.is_relative_to(base) or not target.is_file():
        return None
    try:
        with target.open("rb") as f:
            data = f.read(READ_MAX_BYTES)
    except OSError:
        return None
    if b"\x00" in data:
        return None
    # A read cut at the limit may split a character; keep what decodes.
    cut = len(data) == READ_MAX_BYTES
    try:
        return data.decode("utf-8", errors="ignore" if cut else "strict")
    except UnicodeDecodeError:
        return None
