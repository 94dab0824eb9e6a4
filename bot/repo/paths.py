"""Paths inside a snapshot: the one place a name from a model, a tarball or a
symlink is judged safe.

Every path a snapshot holds or is asked for is a clean relative POSIX path
(``src/app.py``; ``""`` is the root): no absolute path, no ``..`` or ``.``
component, no empty component, no NUL. A name that
is not clean is refused, never "repaired" into one that is: a model asking for
``../.env`` or a tarball member named ``/etc/passwd`` gets nothing.
"""

from __future__ import annotations

import posixpath
import re

# Folders whose content is someone else's code or a build's output.
VENDORED_DIRS = frozenset(
    {
        "node_modules",
        "bower_components",
        "jspm_packages",
        "vendor",
        "third_party",
        "third-party",
        "thirdparty",
        "venv",
        "site-packages",
        "__pycache__",
        "dist",
        "build",
        "Pods",
    }
)


_DRIVE = re.compile(r"[A-Za-z]:[\\/]")  # C:/ or C:\ : absolute on Windows


class Refused(Exception):
    """A read the model asked for that cannot be served; the text, written for the
    model, says why and what to do instead.

    A control-flow signal, not an error of the bot (so not in ``bot/core/errors.py``,
    which lists it): ``bot.repo.tools.run_tool`` turns it into an error answer the
    model sees; readers of a snapshot (the agent workspace, eval's case reader)
    skip what it refuses.
    """


class PathRefused(Refused):
    """A path that does not name anything inside the repository."""


def clean_path(raw: str) -> str:
    """``raw`` as a snapshot path, or PathRefused. Leading ``./`` and trailing
    ``/`` are forgiven (models write folders both ways); ``..`` never is."""
    if "\x00" in raw:
        raise PathRefused("the path contains a NUL character")
    text = raw.strip()
    if text.startswith(("/", "\\")) or _DRIVE.match(text):
        raise PathRefused(f"{raw!r} is an absolute path; give a path relative to the repository")
    while text.startswith("./"):
        text = text[2:]
    text = text.rstrip("/")
    if text in ("", "."):
        return ""
    parts = text.split("/")
    for part in parts:
        if part == "..":
            raise PathRefused(f"{raw!r} leaves the repository (`..`)")
        if part in ("", "."):
            raise PathRefused(f"{raw!r} is not a clean path (empty or `.` component)")
    return "/".join(parts)


def link_target(link: str, target: str) -> str:
    """Where the symlink at ``link`` points, as a snapshot path; PathRefused when
    the target is absolute or climbs out of the repository."""
    if "\x00" in target or target.startswith("/"):
        raise PathRefused(f"the symlink `{link}` points outside the repository")
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    if joined == ".":
        return ""
    if joined == ".." or joined.startswith("../") or joined.startswith("/"):
        raise PathRefused(f"the symlink `{link}` points outside the repository")
    return joined


def parents(path: str) -> list[str]:
    """The folders above ``path``, nearest the root first (``a/b/c`` → ``a``, ``a/b``)."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]
