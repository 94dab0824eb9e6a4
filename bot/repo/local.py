"""The local reader: a checkout on disk as a snapshot (``debate-bot run``,
``review``, and Action mode when the job's checkout holds the pinned commit).

Inside a git work tree the files are what ``git ls-files`` lists — tracked
files only, so an ignored or untracked file (a ``.env`` beside the code) is not
in the index and no path, symlink or search reaches it. Outside git, a walk that
skips dot-files and dot-folders, vendored folders and key files (``*.pem``,
``*.key``, ``id_rsa*``, …). Contents are read from the working tree when first
asked for, within the snapshot's bounds; a file is opened without following
symlinks, so one swapped for a link after listing is not read through it.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import anyio

from bot.repo.paths import VENDORED_DIRS, PathRefused, clean_path
from bot.repo.snapshot import Entry, Limits, Snapshot

# Key and credential files a walk never lists (dot-files are skipped already).
KEY_FILES = (
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "*.ppk",
    "*.gpg",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.env",
)
GIT_TIMEOUT_S = 60
_GITHUB_REMOTE = re.compile(r"^(?:https://|ssh://git@|git@)([^/:]+)[/:]([^/]+/[^/]+?)(?:\.git)?/?$")


def is_key_file(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in KEY_FILES)


def _git(root: Path, *args: str) -> bytes | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        # A fixed argv; root is one argument, never parsed by a shell.
        done = subprocess.run(  # noqa: S603
            [git, "-C", str(root), *args],
            capture_output=True,
            check=False,
            timeout=GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_files(root: Path, *, untracked: bool = False) -> list[str] | None:
    """Paths ``git ls-files`` lists under ``root`` (tracked; with ``untracked`` also
    the untracked files that are not ignored), or None outside a work tree.

    The one home of how a checkout is read, and its two readers differ on
    purpose: a local review's brief covers the working tree as its author sees
    it (``untracked``: a new file not yet added is part of what is reviewed),
    while the debaters' tools and an agent's workspace answer a model's own
    requests and read tracked files only. Ignored files reach neither."""
    args = ["ls-files", "-z", "--cached"]
    if untracked:
        args += ["--others", "--exclude-standard"]
    out = _git(root, *args)
    if out is None:
        return None
    # -z: raw paths, no quoting of unusual names; relative to root (git -C).
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def walk_files(root: Path, max_files: int | None = None) -> list[str]:
    """Files under ``root`` outside git: no dot-files or dot-folders, no vendored
    folders, no key files; symlinks listed, never followed."""
    found: list[str] = []
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in VENDORED_DIRS)
        base = Path(here).relative_to(root)
        for f in sorted(files):
            if f.startswith(".") or is_key_file(f):
                continue
            found.append((base / f).as_posix())
            if max_files is not None and len(found) >= max_files:
                return found
    return found


def head_commit(root: Path) -> str | None:
    out = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    return out.decode().strip() if out else None


def html_url_of(root: Path) -> str:
    """The repository's web page from its ``origin`` remote, "" when not a GitHub-like URL."""
    out = _git(root, "remote", "get-url", "origin")
    match = _GITHUB_REMOTE.match(out.decode().strip()) if out else None
    return f"https://{match.group(1)}/{match.group(2)}" if match else ""


def _entries(root: Path, paths: list[str]) -> tuple[list[Entry], dict[str, str]]:
    entries: list[Entry] = []
    links: dict[str, str] = {}
    for raw in paths:
        try:
            path = clean_path(raw)
            st = os.lstat(root / path)
        except (PathRefused, OSError, ValueError):
            continue  # an unclean name, or listed by git but deleted in the work tree
        if stat.S_ISLNK(st.st_mode):
            try:
                links[path] = os.readlink(root / path)
            except OSError:
                continue
            entries.append(Entry(path, "link", st.st_size))
        elif stat.S_ISDIR(st.st_mode):
            entries.append(Entry(path, "submodule"))  # git lists a submodule as one path
        elif stat.S_ISREG(st.st_mode):
            entries.append(Entry(path, "file", st.st_size))
    return entries, links


def open_checkout(
    root: Path,
    *,
    repo: str = "",
    commit: str = "",
    html_url: str | None = None,
    limits: Limits | None = None,
) -> Snapshot:
    """The working tree at ``root`` (a git work tree's top, or any folder)."""
    root = root.resolve()
    limits = limits or Limits()
    paths = git_files(root)
    in_git = paths is not None
    if paths is None:
        paths = walk_files(root, limits.max_files + 1)
    entries, links = _entries(root, paths)
    cap = limits.max_file_bytes + 1

    def read(e: Entry) -> bytes | None:
        try:
            fd = os.open(root / e.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return f.read(cap)

    async def load(e: Entry) -> bytes | None:
        return await anyio.to_thread.run_sync(read, e)

    snap = Snapshot(
        repo=repo or root.name,
        commit=commit or (head_commit(root) if in_git else None) or "working-tree",
        html_url=html_url_of(root) if html_url is None else html_url,
        entries=entries,
        limits=limits,
        loader=load,
        notes=() if in_git else ("not a git checkout: dot-files and key files are left out",),
    )
    for path, target in links.items():
        snap.add_link(path, target)
    return snap


def checkout_at(
    root: Path, *, repo: str, commit: str, html_url: str, limits: Limits | None = None
) -> Snapshot | None:
    """Action mode: the job's checkout when its HEAD is the pinned commit, else None
    (a pull request's job checks out a merge commit: the reader then reads GitHub)."""
    if head_commit(root) != commit:
        return None
    return open_checkout(root, repo=repo, commit=commit, html_url=html_url, limits=limits)
