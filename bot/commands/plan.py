"""Plan input: frontmatter, ``@path`` references, context budget (all pure).

The caller reads files; these functions only parse text and decide what to
embed. Errors are ``ConfigError`` with a message for the person who wrote the
plan (YAML errors name the line of the file).
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.config import PersonaConfig, format_validation_error, parse_yaml_mapping
from bot.debate.protocol import choose_mode
from bot.debate.types import ContextFile, Mode, is_reserved_name
from bot.errors import ConfigError

__all__ = [
    "Plan",
    "PlanFrontmatter",
    "assemble_context",
    "cap_subject",
    "check_personas",
    "check_ref",
    "choose_mode",  # re-exported: callers parse a plan and pick its mode together
    "condense",
    "find_refs",
    "parse_plan",
    "split_frontmatter",
    "split_sections",
]

SUBJECT_MAX_BYTES = 24 * 1024


class PlanFrontmatter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rounds: int = Field(default=3, ge=1, le=10)
    response_scale: float = Field(default=1.5, gt=0, le=10)
    context_budget_kb: int = Field(default=100, ge=0, le=1024)
    synthesizer: str = "judge"
    output_dir: str | None = None
    mode: Mode | None = None
    personas: list[PersonaConfig] = Field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    source: str
    title: str
    body: str  # the markdown after the frontmatter
    mode: Mode
    rounds: int = 3
    response_scale: float = 1.5
    context_budget_kb: int = 100
    synthesizer: str = "judge"
    output_dir: str | None = None
    personas: tuple[PersonaConfig, ...] = ()
    refs: tuple[str, ...] = ()  # raw @path references, in order
    frontmatter_keys: tuple[str, ...] = ()  # keys the file set (they override the repo config)


def split_frontmatter(text: str, *, source: str) -> tuple[str | None, str]:
    """(frontmatter YAML padded so its line numbers are the file's, body)."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            return "\n" + "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise ConfigError(f"{source}: the frontmatter opened on line 1 is never closed with '---'")


def parse_plan(text: str, *, source: str, mode: Mode | None = None) -> Plan:
    """Parse a plan file; ``mode`` (a CLI flag) wins over the frontmatter's
    ``mode``, which wins over the 50-word rule."""
    if "\x00" in text:
        raise ConfigError(f"{source}: looks like a binary file, not markdown")
    fm_text, body = split_frontmatter(text, source=source)
    data = parse_yaml_mapping(fm_text, source=source) if fm_text is not None else {}
    try:
        fm = PlanFrontmatter.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source=source, text=fm_text)) from exc
    if not body.strip():
        raise ConfigError(f"{source}: the plan is empty (nothing after the frontmatter)")
    resolved: Mode = mode or fm.mode or choose_mode(body)
    check_personas(fm.personas, resolved, source=source)
    synth = (
        "judge"
        if fm.synthesizer.strip().lower() in ("judge", "host", "")
        else fm.synthesizer.strip()
    )
    if synth != "judge" and fm.personas and synth not in {p.name for p in fm.personas}:
        raise ConfigError(
            f"{source}: synthesizer must be 'judge' or one of the persona names, got {synth!r}"
        )
    return Plan(
        source=source,
        title=plan_title(body, source),
        body=body,
        mode=resolved,
        rounds=fm.rounds,
        response_scale=fm.response_scale,
        context_budget_kb=fm.context_budget_kb,
        synthesizer=synth,
        output_dir=fm.output_dir,
        personas=tuple(fm.personas),
        refs=tuple(find_refs(body)),
        frontmatter_keys=tuple(sorted(data)),
    )


def check_personas(
    personas: list[PersonaConfig] | tuple[PersonaConfig, ...], mode: Mode, *, source: str
) -> None:
    n = len(personas)
    if n == 0:
        return  # auto-picked
    if mode == "proposal" and n < 2:
        raise ConfigError(f"{source}: personas: proposal mode needs 2 or more personas, got {n}")
    if mode != "proposal" and n != 2:
        raise ConfigError(f"{source}: personas: {mode} mode needs exactly 2 personas, got {n}")
    names = [p.name.strip().casefold() for p in personas]
    if len(set(names)) != n:
        raise ConfigError(f"{source}: personas: names must be unique")
    bad = [p.name for p in personas if is_reserved_name(p.name.strip())]
    if bad:
        raise ConfigError(f"{source}: personas: the name {bad[0]!r} is reserved")


def plan_title(body: str, source: str) -> str:
    for line in body.splitlines():
        m = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if m:
            return m.group(1)[:120]
    first = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
    return (first[:117] + "…") if len(first) > 120 else (first or source)


# --- @path references -------------------------------------------------------

_REF = re.compile(r"(?:(?<=\s)|^)@([^\s`'\"<>()\[\]{},;|]+)", re.M)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def find_refs(text: str) -> list[str]:
    """``@path`` references: ``@`` after whitespace or at line start, followed
    by a path containing ``/`` or ``.``; none inside fenced code blocks."""
    refs: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if (
                m
                and m.group(1)[0] == fence[0]
                and len(m.group(1)) >= len(fence)
                and not line.strip()[len(m.group(1)) :].strip()
            ):
                fence = None
            continue
        for r in _REF.finditer(line):
            path = r.group(1).rstrip(".,:;!?")
            if ("/" in path or "." in path) and path.strip("./") and path not in refs:
                refs.append(path)
    return refs


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
