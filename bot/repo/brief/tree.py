"""The repository's file tree: entries, what to leave out, the outline.

Entries are what GitHub's recursive git-trees request returns (or what
``bot.repo.brief.local`` reads from a checkout); everything here is pure.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bot.core.errors import ConfigError
from bot.inputs.text import check_ref
from bot.repo.paths import VENDORED_DIRS

Kind = Literal["blob", "tree", "commit"]  # "commit": a submodule

LOCKFILES = frozenset(
    {
        "package-lock.json",
        "npm-shrinkwrap.json",
        "pnpm-lock.yaml",
        "bun.lockb",
        "go.sum",
        "packages.lock.json",
    }
)
BINARY_EXT = frozenset(
    [
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".bmp",
        ".ico",
        ".icns",
        ".webp",
        ".tif",
        ".tiff",
        ".psd",
        ".svg",
        ".pdf",
        ".doc",
        ".docx",
        ".xls",
        ".xlsx",
        ".ppt",
        ".pptx",
        ".zip",
        ".gz",
        ".tgz",
        ".tar",
        ".bz2",
        ".xz",
        ".7z",
        ".rar",
        ".jar",
        ".war",
        ".whl",
        ".egg",
        ".so",
        ".dylib",
        ".dll",
        ".exe",
        ".bin",
        ".o",
        ".a",
        ".lib",
        ".obj",
        ".class",
        ".pyc",
        ".pyo",
        ".wasm",
        ".woff",
        ".woff2",
        ".ttf",
        ".otf",
        ".eot",
        ".mp3",
        ".mp4",
        ".wav",
        ".ogg",
        ".flac",
        ".mov",
        ".avi",
        ".webm",
        ".mkv",
        ".sqlite",
        ".sqlite3",
        ".db",
        ".pkl",
        ".npy",
        ".npz",
        ".parquet",
        ".onnx",
        ".pt",
        ".h5",
    ]
)
GENERATED_SUFFIXES = (
    ".min.js",
    ".min.css",
    ".min.mjs",
    ".map",
    "_pb2.py",
    "_pb2_grpc.py",
    "_pb2.pyi",
    ".pb.go",
    ".pb.cc",
    ".pb.h",
    ".g.dart",
    ".designer.cs",
)
# Left-out categories, in the order the brief lists them: (one, many).
Category = Literal["vendored", "hidden", "lockfile", "generated", "binary"]
CATEGORY_LABELS: Mapping[Category, tuple[str, str]] = {
    "vendored": (
        "file in vendored, dependency or build folders",
        "files in vendored, dependency or build folders",
    ),
    "hidden": ("file in hidden folders", "files in hidden folders"),
    "lockfile": ("lockfile", "lockfiles"),
    "generated": ("generated or minified file", "generated or minified files"),
    "binary": ("binary file", "binary files"),
}

# The outline's bounds: a folder with more direct entries than this is shown
# as a count; the whole outline stays under MAX_LINES lines.
COLLAPSE_AT = 30
MAX_LINES = 300
MAX_OUTLINE_BYTES = 16 * 1024


@dataclass(frozen=True)
class TreeEntry:
    path: str  # repository-relative, "/"-separated
    size: int = 0  # bytes; 0 for folders and submodules
    kind: Kind = "blob"


def parse_git_tree(payload: Mapping[str, object]) -> tuple[tuple[TreeEntry, ...], bool]:
    """(entries, truncated) from a ``GET /repos/{o}/{r}/git/trees/{sha}?recursive=1``
    answer; items of other types are ignored."""
    items = payload.get("tree")
    entries: list[TreeEntry] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        path, kind, size = item.get("path"), item.get("type"), item.get("size")
        if isinstance(path, str) and kind in ("blob", "tree", "commit"):
            entries.append(TreeEntry(path, size if isinstance(size, int) else 0, kind))
    return tuple(entries), payload.get("truncated") is True


def normalize_scope(scope: str) -> str:
    """``""`` for the whole repository, else the folder path without slashes."""
    s = scope.strip().strip("/")
    return "" if s in ("", ".") else check_ref(s)


def nothing_to_review(ref: str = "") -> ConfigError:
    """An empty repository (no file at ``ref``, or nothing pushed yet): one public sentence."""
    at = f" at `{ref}`" if ref else ""
    return ConfigError(f"The repository is empty{at}; there is nothing to review.")


def in_scope(entries: Iterable[TreeEntry], scope: str, *, ref: str = "") -> list[TreeEntry]:
    """The entries under ``scope``; ConfigError (one public sentence) when
    there are none: an empty repository, a missing folder, or a file."""
    entries = list(entries)
    at = f" at `{ref}`" if ref else ""
    if not entries:
        raise nothing_to_review(ref)
    if not scope:
        return entries
    inside = [e for e in entries if e.path.startswith(scope + "/")]
    if not inside:
        if any(e.path == scope and e.kind == "blob" for e in entries):
            raise ConfigError(
                f"`{scope}` is a file{at}, not a folder; a design review takes a folder."
            )
        raise ConfigError(f"`{scope}/` does not exist{at}.")
    return inside


def skip_reason(path: str, scope: str = "") -> Category | None:
    """Why ``path`` stays out of the brief, or None. Only the components below
    ``scope`` count, so asking for ``vendor/`` reviews it."""
    rel = path[len(scope) + 1 :] if scope else path
    *dirs, name = rel.split("/")
    if any(d in VENDORED_DIRS for d in dirs):
        return "vendored"
    if any(d.startswith(".") and d != ".github" for d in dirs):
        return "hidden"
    low = name.lower()
    if low in LOCKFILES or low.endswith(".lock"):
        return "lockfile"
    if low.endswith(GENERATED_SUFFIXES) or ".generated." in low:
        return "generated"
    if posixpath.splitext(low)[1] in BINARY_EXT:
        return "binary"
    return None


@dataclass
class _Dir:
    name: str
    dirs: dict[str, _Dir] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)  # name -> size
    submodules: set[str] = field(default_factory=set)

    def count(self) -> tuple[int, int]:
        """(files, bytes) in this folder and below."""
        n, b = len(self.files), sum(self.files.values())
        for d in self.dirs.values():
            dn, db = d.count()
            n, b = n + dn, b + db
        return n, b

    def width(self) -> int:
        return len(self.dirs) + len(self.files) + len(self.submodules)


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024 / 1024:.1f} MB"


def outline(kept: Sequence[TreeEntry], scope: str) -> str:
    """An indented outline of the files and submodules in ``kept`` (already in
    scope and filtered; folders are drawn from the paths below them): shallow
    levels first, so within MAX_LINES the deepest folders are the ones shown as
    counts; a folder wider than COLLAPSE_AT is always a count."""
    root = _Dir(scope.rsplit("/", 1)[-1] if scope else ".")
    for e in kept:
        rel = e.path[len(scope) + 1 :] if scope else e.path
        *dirs, name = rel.split("/")
        node = root
        for d in dirs:
            node = node.dirs.setdefault(d, _Dir(d))
        if e.kind == "blob":
            node.files[name] = e.size
        elif e.kind == "commit":
            node.submodules.add(name)
    # Breadth-first: open a folder while its entries still fit.
    opened = {id(root)}
    lines = root.width()
    queue = list(root.dirs.values())
    while queue:
        folder = _chain_end(queue.pop(0))
        if folder.width() <= COLLAPSE_AT and lines + folder.width() <= MAX_LINES:
            opened.add(id(folder))
            lines += folder.width()
            queue.extend(folder.dirs.values())
    out = [f"{scope}/" if scope else "./"]
    _render(root, opened, 1, out)
    # Only a very wide top folder (always opened) or very long names get here.
    keep, size = 0, 0
    while keep < min(len(out), MAX_LINES + 1) and size + len(out[keep]) < MAX_OUTLINE_BYTES:
        size += len(out[keep].encode()) + 1
        keep += 1
    cut = len(out) - keep
    return "\n".join(out[:keep] + ([f"  … {cut} more lines not shown"] if cut else []))


def _chain_end(d: _Dir) -> _Dir:
    # A folder holding only one folder is shown on one line ("src/main/java/").
    while not d.files and not d.submodules and len(d.dirs) == 1:
        d = next(iter(d.dirs.values()))
    return d


def _render(node: _Dir, opened: set[int], depth: int, out: list[str]) -> None:
    pad = "  " * depth
    for d in sorted(node.dirs.values(), key=lambda x: x.name):
        end, label = d, d.name
        while end is not _chain_end(end):
            end = next(iter(end.dirs.values()))
            label += "/" + end.name
        if id(end) in opened:
            out.append(f"{pad}{label}/")
            _render(end, opened, depth + 1, out)
        else:
            n, b = end.count()
            out.append(f"{pad}{label}/ ({n} files, {human_size(b)})")
    for name in sorted(node.submodules):
        out.append(f"{pad}{name} (submodule)")
    for name, size in sorted(node.files.items()):
        out.append(f"{pad}{name} ({human_size(size)})")


def summarize_skipped(skipped: Mapping[Category, Sequence[str]], scope: str = "") -> list[str]:
    """One line per left-out category: the count and a few examples."""
    lines = []
    for cat, (one, many) in CATEGORY_LABELS.items():
        paths = skipped.get(cat, ())
        if not paths:
            continue
        if cat in ("vendored", "hidden"):
            # Name the folders, not the thousands of files inside them.
            tops = Counter(_skipped_dir(p, scope) for p in paths)
            examples = [f"`{d}/`" for d, _ in tops.most_common(3)]
            more = ", …" if len(tops) > 3 else ""
        else:
            examples = [f"`{p}`" for p in sorted(paths)[:3]]
            more = ", …" if len(paths) > 3 else ""
        label = one if len(paths) == 1 else many
        lines.append(f"{len(paths)} {label}: {', '.join(examples)}{more}")
    return lines


def _skipped_dir(path: str, scope: str) -> str:
    """The folder that made ``path`` vendored or hidden."""
    parts = path.split("/")
    start = len(scope.split("/")) if scope else 0
    for i in range(start, len(parts) - 1):
        d = parts[i]
        if d in VENDORED_DIRS or (d.startswith(".") and d != ".github"):
            return "/".join(parts[: i + 1])
    return posixpath.dirname(path)
