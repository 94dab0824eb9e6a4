"""Text budgeting of a run's input, pure and settings-free: the subject cap, the
context budget (``condense``, ``assemble_context``) and repository-relative
paths (``check_ref``). Plans, reviews, the repository brief and every feature
use it; it imports neither settings nor pydantic, so the brief stays pure.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Mapping

from bot.core.errors import ConfigError
from bot.engine.types import ContextFile

__all__ = [
    "SUBJECT_MAX_BYTES",
    "assemble_context",
    "cap_subject",
    "check_ref",
    "condense",
    "split_sections",
]

SUBJECT_MAX_BYTES = 24 * 1024


def check_ref(path: str) -> str:
    """The normalized repo-relative path, or ConfigError if it leaves the root."""
    p = path.strip().replace("\\", "/")
    if not p or "\x00" in p:
        raise ConfigError(f"`{path}`: not a valid path")
    if p.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", p):
        raise ConfigError(
            f"`{path}`: absolute paths are not allowed; use a path inside the repository"
        )
    norm = posixpath.normpath(p)
    if norm in (".", "..") or norm.startswith("../"):
        raise ConfigError(f"`{path}`: the path leaves the repository root")
    return norm


# --- context budget ---------------------------------------------------------

_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "into",
        "are",
        "was",
        "were",
        "will",
        "would",
        "should",
        "could",
        "have",
        "has",
        "not",
        "but",
        "all",
        "any",
        "can",
        "our",
        "you",
        "your",
        "its",
        "their",
        "them",
        "then",
        "than",
        "there",
        "here",
        "what",
        "which",
        "who",
        "how",
        "why",
        "when",
        "use",
        "using",
        "used",
        "also",
        "only",
        "more",
        "most",
        "some",
        "such",
        "each",
        "other",
    ]
)
_WORD = re.compile(r"[a-z0-9_]{3,}")
_MD_HEADING = re.compile(r"^#{1,6}\s")
_TOP_DEF = re.compile(
    r"^(?:async\s+def|def|class|function|func|fn|pub\s+fn|impl|struct|interface|"
    r"export\s+(?:default\s+)?(?:async\s+)?(?:function|class|const|interface|type))\b"
)
_PROSE_EXT = (".md", ".markdown", ".rst", ".txt", ".adoc")
_MIN_USEFUL_BYTES = 512


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def split_sections(text: str, path: str = "") -> list[str]:
    """Markdown headings, else top-level definitions, else blank-line blocks."""
    lines = text.splitlines(keepends=True)
    starts: re.Pattern[str] | None = None
    prose = path.lower().endswith(_PROSE_EXT)
    order = (_MD_HEADING, _TOP_DEF) if prose else (_TOP_DEF, _MD_HEADING)
    for pattern in order:
        if any(pattern.match(ln) for ln in lines):
            starts = pattern
            break
    sections: list[list[str]] = [[]]
    for ln in lines:
        boundary = starts.match(ln) if starts else (not ln.strip() and sections[-1])
        if boundary and sections[-1] and any(x.strip() for x in sections[-1]):
            sections.append([])
        sections[-1].append(ln)
    return ["".join(s) for s in sections if "".join(s).strip()]


def condense(text: str, subject: str, max_bytes: int, path: str = "") -> str:
    """The sections of ``text`` most relevant to ``subject`` that fit in
    ``max_bytes``, in their original order. Relevance is word overlap with the
    subject (normalized by section vocabulary, ties by position); sections
    sharing no word with the subject are left out unless none share any, in
    which case the file's first sections are kept."""
    wanted = _words(subject)
    sections = split_sections(text, path)
    scored = []
    for i, s in enumerate(sections):
        ws = _words(s)
        scored.append((-(len(ws & wanted) / math.sqrt(len(ws) + 1)), i))
    ranked = [x for x in sorted(scored) if x[0] < 0] or sorted(scored, key=lambda x: x[1])
    sep = "\n[…]\n"
    sep_bytes = len(sep.encode())
    chosen: list[int] = []
    used = 0
    for _, i in ranked:
        size = len(sections[i].encode()) + sep_bytes
        if used + size <= max_bytes:
            chosen.append(i)
            used += size
    if not chosen and ranked:
        return _cut(sections[ranked[0][1]], max_bytes - sep_bytes) + sep
    return sep.join(sections[i].rstrip("\n") for i in sorted(chosen)).strip("\n") + "\n"


def _cut(text: str, max_bytes: int) -> str:
    raw = text.encode()[: max(0, max_bytes)]
    cut = raw.decode("utf-8", errors="ignore")
    nl = cut.rfind("\n")
    # Prefer a line boundary, unless that would throw away a fifth of the room.
    return cut[:nl] if nl > 0.8 * len(cut) else cut


def assemble_context(
    subject: str, loaded: Mapping[str, str | None], budget_kb: int
) -> tuple[tuple[ContextFile, ...], tuple[str, ...]]:
    """Embed files in order within ``budget_kb``; a file over the remaining
    budget is condensed (``[CONDENSED]``); a missing file (None) is a warning."""
    remaining = budget_kb * 1024
    files: list[ContextFile] = []
    warnings: list[str] = []
    for path, text in loaded.items():
        if text is None:
            warnings.append(f"`{path}`: file not found; skipped")
            continue
        if budget_kb <= 0:
            warnings.append(f"`{path}`: not embedded (context_budget_kb is 0)")
            continue
        size = len(text.encode())
        if size <= remaining:
            files.append(ContextFile(path=path, text=text, size_bytes=size))
            remaining -= size
            continue
        if remaining < _MIN_USEFUL_BYTES:
            warnings.append(
                f"`{path}`: not embedded; the context budget ({budget_kb} KB) is used up"
            )
            continue
        short = condense(text, subject, remaining, path)
        files.append(ContextFile(path=path, text=short, size_bytes=size, condensed=True))
        remaining -= len(short.encode())
    return tuple(files), tuple(warnings)


def cap_subject(text: str, max_bytes: int = SUBJECT_MAX_BYTES) -> tuple[str, bool]:
    """Bound the subject; a cut subject ends with a visible truncation note."""
    if len(text.encode()) <= max_bytes:
        return text, False
    note = f"\n\n[… truncated: the subject exceeded {max_bytes // 1024} KiB]"
    body = _cut(text, max_bytes - len(note.encode())).rstrip()
    return body + note, True
