"""Which files a design review reads, in priority order, and how many.

A folder review reads the folder's own material first; outside the folder it
reads only the repository's front door (the root README, the top-level
manifests and CODEOWNERS), which says what the project is and who owns what.
CI workflows and ``docs/`` at the root are left to whole-repository reviews.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from bot.repo.brief.tree import TreeEntry, in_scope, normalize_scope, skip_reason

Role = Literal[
    "readme", "architecture", "decision", "doc", "manifest", "docker", "ci", "codeowners", "source"
]

MAX_FILES = 25  # content requests per review
# Per-role caps, so forty ADRs cannot crowd out the manifests and the code.
ROLE_CAPS: dict[Role, int] = {
    "readme": 2,
    "architecture": 2,
    "decision": 5,
    "doc": 5,
    "manifest": 4,
    "docker": 2,
    "ci": 3,
    "codeowners": 1,
    "source": 8,
}
# A "source" file this big is almost certainly generated or bundled.
SOURCE_MAX_BYTES = 512 * 1024

PROSE_EXT = (".md", ".markdown", ".rst", ".txt", ".adoc")
MANIFESTS = frozenset(
    {
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "package.json",
        "go.mod",
        "cargo.toml",
        "pom.xml",
        "build.gradle",
        "build.gradle.kts",
        "gemfile",
        "composer.json",
        "mix.exs",
        "deno.json",
        "cmakelists.txt",
    }
)
SOURCE_EXT = frozenset(
    [
        ".py",
        ".pyi",
        ".js",
        ".mjs",
        ".cjs",
        ".jsx",
        ".ts",
        ".tsx",
        ".go",
        ".rs",
        ".java",
        ".kt",
        ".kts",
        ".scala",
        ".rb",
        ".php",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hpp",
        ".cs",
        ".swift",
        ".m",
        ".ex",
        ".exs",
        ".erl",
        ".clj",
        ".hs",
        ".lua",
        ".dart",
        ".sh",
        ".zig",
    ]
)
_DECISION_DIR = re.compile(r"(^|/)(adr|adrs|decisions|decision-records)/", re.I)
_TEST = re.compile(
    r"(^|/)(tests?|spec|specs|__tests__|testdata|fixtures|examples?)/"
    r"|(^|/)test_[^/]*$|_test\.\w+$|\.(test|spec)\.\w+$",
    re.I,
)


@dataclass(frozen=True)
class Candidate:
    path: str
    role: Role
    size: int


def rank(entries: Iterable[TreeEntry], scope: str) -> list[Candidate]:
    """Every file worth reading, best first, uncapped (``entries`` may hold the
    whole repository; ``scope`` is already normalized)."""
    found: dict[Role, list[tuple[tuple[object, ...], Candidate]]] = {r: [] for r in ROLE_CAPS}
    for e in entries:
        if e.kind != "blob":
            continue
        inside = not scope or e.path.startswith(scope + "/")
        if inside and skip_reason(e.path, scope):
            continue
        rel = e.path[len(scope) + 1 :] if scope and inside else e.path
        role, key = _role(rel, e.size, front_door=not inside)
        if role is None:
            continue
        # The folder's own material before the repository's front door.
        found[role].append(((not inside, *key, e.path), Candidate(e.path, role, e.size)))
    return [c for role in ROLE_CAPS for _, c in sorted(found[role], key=lambda x: x[0])]


def _role(rel: str, size: int, *, front_door: bool) -> tuple[Role | None, tuple[object, ...]]:
    """The role of a file at ``rel`` (relative to the scope) and its sort key
    within the role (smaller first)."""
    parts = rel.split("/")
    name, depth = parts[-1].lower(), len(parts) - 1
    stem, ext = posixpath.splitext(name)
    top = depth == 0
    if stem == "readme" and top and (ext in PROSE_EXT or not ext):
        return "readme", ()
    if rel.lower() in (".github/codeowners", "codeowners", "docs/codeowners"):
        return "codeowners", ()
    if top and name in MANIFESTS:
        return "manifest", (sorted(MANIFESTS).index(name),)
    if front_door:
        return None, ()
    if stem in ("architecture", "design") and ext in PROSE_EXT and depth <= 2:
        return "architecture", (depth,)
    if ext in PROSE_EXT and _DECISION_DIR.search(rel):
        # The folder's index first, then the newest records (higher numbers
        # supersede lower ones).
        return "decision", (stem not in ("readme", "index"), _neg(name))
    if ext in PROSE_EXT and parts[0].lower() in ("docs", "doc") and depth >= 1:
        overview = stem in ("readme", "index", "overview", "architecture", "design")
        return "doc", (depth, not overview, -size)
    if (
        name == "dockerfile"
        or name.endswith(".dockerfile")
        or (name.startswith("dockerfile.") and ext != ".dockerignore")
    ):
        return "docker", (depth,)
    if name in ("docker-compose.yml", "docker-compose.yaml", "compose.yml", "compose.yaml"):
        return "docker", (depth + 1,)
    if depth == 2 and rel.lower().startswith(".github/workflows/") and ext in (".yml", ".yaml"):
        return "ci", (-size,)
    if rel.lower() == ".gitlab-ci.yml":
        return "ci", (0,)
    if ext in SOURCE_EXT and 0 < size <= SOURCE_MAX_BYTES and not _TEST.search(rel):
        return "source", (-size,)
    return None, ()


def _neg(name: str) -> tuple[int, ...]:
    # "0012-use-redis.md" sorts before "0003-..." : newest decision first.
    return tuple(-ord(c) for c in name)


def plan_fetches(
    entries: Sequence[TreeEntry], scope: str, *, max_files: int = MAX_FILES, ref: str = ""
) -> list[str]:
    """The paths whose contents to fetch, in priority order, at most
    ``max_files``. Raises ConfigError (a public sentence naming the folder and
    ``ref``) for an empty repository or a folder that is not there, before any
    content is requested."""
    scope = normalize_scope(scope)
    in_scope(entries, scope, ref=ref)
    return [c.path for c in choose(rank(entries, scope), max_files)]


def choose(ranked: Sequence[Candidate], max_files: int) -> list[Candidate]:
    """Apply the per-role caps and the total; a quarter of the requests are kept
    for source files when there are enough of them, since the code's own
    opening comments often say more about its design than stale docs."""
    taken: dict[Role, int] = dict.fromkeys(ROLE_CAPS, 0)
    capped = []
    for c in ranked:
        if taken[c.role] < ROLE_CAPS[c.role]:
            taken[c.role] += 1
            capped.append(c)
    docs = [c for c in capped if c.role != "source"]
    sources = [c for c in capped if c.role == "source"]
    n_src = min(len(sources), max(max_files // 4, max_files - len(docs)))
    return (docs[: max_files - n_src] + sources[:n_src])[:max_files]
