"""A checkout on disk as tree entries and contents (the package's only I/O).

Inside a git work tree the file list is ``git ls-files``, so ``.gitignore`` is
honoured exactly as git does; elsewhere the directory is walked, skipping
hidden and vendored folders (there is no ignore file to ask).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from bot.brief.tree import VENDORED_DIRS, TreeEntry

READ_MAX_BYTES = 1024 * 1024  # condensed or cut to an excerpt anyway


def read_tree(root: Path) -> tuple[TreeEntry, ...]:
    """The files under ``root`` (paths relative to it, sizes from stat)."""
    root = root.resolve()
    paths = _git_files(root)
    if paths is None:
        paths = _walk(root)
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


def _git_files(root: Path) -> list[str] | None:
    """Tracked and untracked-but-not-ignored files, or None outside a work tree."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        # A fixed argv; root is one argument, never parsed by a shell.
        done = subprocess.run(  # noqa: S603
            [
                git,
                "-C",
                str(root),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    # -z: raw paths, no quoting of unusual names; relative to root (git -C).
    return [p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def _walk(root: Path) -> list[str]:
    found: list[str] = []
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in VENDORED_DIRS]
        base = Path(here).relative_to(root)
        found.extend((base / f).as_posix() for f in files)
    return found


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
