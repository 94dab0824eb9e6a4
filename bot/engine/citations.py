"""Code citations: ``path:L12`` / ``path:L12-L20``, checked and linked (pure).

Personas and the judge cite code with the line numbers ``read_file`` printed
and quote the cited line (``bot/engine/tools.py`` ``TOOL_RULES``). The shell
checks each citation against the pinned commit (``check_citations``, given the
snapshot's ``file_lines``) and stores the checks with the turn
(``Evidence.citations``); the renderers then link the verified ones
(``link_citations``). Models misnumber lines, so a citation whose quote sits a
few lines away in the same file is repaired to where the quote is, and says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote as url_quote

from bot.engine.types import CitationCheck, Evidence, Turn

FileLines = Callable[[str], Sequence[str] | None]

REPAIR_WINDOW: Final = 8  # how far (in lines) a quote may sit from the cited lines
MIN_QUOTE_CHARS: Final = 3
MAX_CITATIONS: Final = 60  # per turn; a turn citing more is not checked past this

# GitHub renders these, so a line anchor needs `?plain=1` to show the source lines.
_RENDERED: Final = (".md", ".markdown", ".mdown", ".mkdn", ".mdx", ".rst", ".adoc", ".asciidoc")

# A citation: optional backtick, a relative path, `:L<start>` and optionally
# `-L<end>` (or `-<end>`), optional closing backtick; then, optionally, a quote in
# "…", “…” or `…` after a space, a colon or a dash.
CITATION_RE: Final = re.compile(
    r"(?<![\w/.\-])(?P<cite>(?P<tick>`?)"
    r"(?P<path>[A-Za-z0-9_.\-][A-Za-z0-9_.\-/]*?)"
    r":L(?P<start>\d{1,7})(?:-L?(?P<end>\d{1,7}))?(?![\w])"
    r"(?P=tick))"
    r"(?P<quote>[ \t]*(?:[:\u2014\u2013-][ \t]*)?(?:\"(?P<q1>[^\"\n]{1,300})\""
    r"|\u201c(?P<q2>[^\u201d\n]{1,300})\u201d|`(?P<q3>[^`\n]{1,300})`))?"
)


@dataclass(frozen=True)
class Cited:
    """A citation as written: where it sits in the text and what it claims."""

    cited: str  # "path:L12-L20"
    path: str
    start: int
    end: int
    quote: str  # the quoted line, "" when none was given
    span: tuple[int, int]  # the citation itself (with its backticks), not the quote


def parse_citations(text: str) -> list[Cited]:
    """Every citation of ``text``, in order (at most ``MAX_CITATIONS``)."""
    out: list[Cited] = []
    for m in CITATION_RE.finditer(text):
        path = m["path"]
        if not _plausible_path(path):
            continue
        start = int(m["start"])
        end = int(m["end"]) if m["end"] else start
        cited = f"{path}:L{start}" + (f"-L{end}" if m["end"] else "")
        quote = m["q1"] or m["q2"] or m["q3"] or ""
        out.append(Cited(cited, path, start, end, quote.strip(), m.span("cite")))
        if len(out) >= MAX_CITATIONS:
            break
    return out


def _plausible_path(path: str) -> bool:
    parts = path.split("/")
    if path.endswith(".") or any(p in ("", ".", "..") for p in parts):
        return False
    # A bare word (`Note:L1`) is no path; a file name has a dot, or a folder.
    return "/" in path or "." in path.lstrip(".") or path in _BARE_FILES


_BARE_FILES: Final = frozenset({"Makefile", "Dockerfile", "Justfile", "Procfile", "LICENSE"})


def permalink(html_url: str, sha: str, path: str, start: int, end: int) -> str:
    """``<html_url>/blob/<sha>/<path>#L12-L20``; rendered formats get ``?plain=1``."""
    anchor = f"#L{start}" if end <= start else f"#L{start}-L{end}"
    plain = "?plain=1" if path.lower().endswith(_RENDERED) else ""
    return f"{html_url.rstrip('/')}/blob/{sha}/{url_quote(path, safe='/')}{plain}{anchor}"


def _norm(text: str) -> str:
    text = re.sub(r"^\s*L?\d+\s*[:|]\s", "", text)  # a quote copied with its line number
    return " ".join(text.split())


def _holds(lines: Sequence[str], first: int, last: int, quote: str) -> bool:
    """Whether the quote is on one of lines ``first``..``last`` (1-based, clipped)."""
    lo, hi = max(1, first), min(len(lines), last)
    return any(quote in _norm(lines[i - 1]) for i in range(lo, hi + 1))


def check_one(c: Cited, lines: Sequence[str] | None, *, html_url: str, sha: str) -> CitationCheck:
    def unverified(reason: str) -> CitationCheck:
        return CitationCheck(c.cited, c.path, c.start, c.end, "unverified", reason=reason)

    def linked(first: int, last: int) -> str:
        return permalink(html_url, sha, c.path, first, last) if html_url and sha else ""

    if lines is None:
        return unverified("no such file at the pinned commit")
    if c.start < 1 or c.end < c.start:
        return unverified("not a line range")
    quote = _norm(c.quote)
    if len(quote) < MIN_QUOTE_CHARS:
        quote = ""
    in_file = c.end <= len(lines)
    if in_file and (not quote or _holds(lines, c.start, c.end, quote)):
        return CitationCheck(
            c.cited, c.path, c.start, c.end, "verified", url=linked(c.start, c.end)
        )
    if quote:
        # The nearest line holding the quote within the window; the range keeps its length.
        span = c.end - c.start
        for delta in sorted(range(-REPAIR_WINDOW - span, REPAIR_WINDOW + span + 1), key=abs):
            first = c.start + delta
            if 1 <= first <= len(lines) and quote in _norm(lines[first - 1]):
                lo, hi = first, min(len(lines), first + span)
                return CitationCheck(
                    c.cited,
                    c.path,
                    c.start,
                    c.end,
                    "repaired",
                    url=linked(lo, hi),
                    fixed_start=lo,
                    fixed_end=hi,
                )
        if in_file:
            return unverified(
                f"the quoted line is not at L{c.start} nor within {REPAIR_WINDOW} lines"
            )
    return unverified(f"past the end of the file ({len(lines)} lines)")


def check_citations(
    text: str, file_lines: FileLines, *, html_url: str, sha: str
) -> tuple[CitationCheck, ...]:
    """Each distinct citation of ``text`` checked once against ``file_lines``."""
    seen: dict[tuple[str, str], CitationCheck] = {}
    cache: dict[str, Sequence[str] | None] = {}
    for c in parse_citations(text):
        key = (c.cited, _norm(c.quote))
        if key in seen:
            continue
        if c.path not in cache:
            cache[c.path] = file_lines(c.path)
        seen[key] = check_one(c, cache[c.path], html_url=html_url, sha=sha)
    return tuple(seen.values())


def _label(check: CitationCheck) -> str:
    if check.status != "repaired":
        return check.cited
    a, b = check.fixed_start, check.fixed_end
    return f"{check.path}:L{a}" + (f"-L{b}" if b > a else "")


def link_citations(text: str, checks: Iterable[CitationCheck]) -> str:
    """``text`` with each checked citation linked (verified, repaired) or marked
    ``(unverified)``; citations never checked are left as they are."""
    by_cited: dict[str, CitationCheck] = {}
    for ch in checks:
        # A citation checked twice (different quotes): the worse result shows.
        old = by_cited.get(ch.cited)
        if old is None or old.status != "unverified":
            by_cited[ch.cited] = ch
    if not by_cited:
        return text
    out: list[str] = []
    pos = 0
    for c in parse_citations(text):
        found = by_cited.get(c.cited)
        if found is None:
            continue
        ch = found
        a, b = c.span
        if text[a - 1 : a] == "[" and text[b : b + 2] == "](":
            continue  # already linked
        out.append(text[pos:a])
        if ch.status == "unverified":
            out.append(f"{text[a:b]} (unverified)")
        elif not ch.url:
            out.append(text[a:b])
        elif ch.status == "repaired":
            out.append(f"[{_label(ch)}]({ch.url}) (repaired: cited as L{_range(ch)})")
        else:
            out.append(f"[{ch.cited}]({ch.url})")
        pos = b
    out.append(text[pos:])
    return "".join(out)


def _range(ch: CitationCheck) -> str:
    return f"{ch.start}" + (f"-L{ch.end}" if ch.end > ch.start else "")


# --- what the run did with them ------------------------------------------------


@dataclass(frozen=True)
class Tally:
    tool_calls: int = 0
    files_read: int = 0
    bytes_read: int = 0
    verified: int = 0
    repaired: int = 0
    unverified: int = 0
    static_turns: int = 0  # turns that debated without tools (refused, unsupported)


def tally(turns: Iterable[Turn]) -> Tally:
    calls = bytes_read = verified = repaired = unverified = static = 0
    files: set[str] = set()
    for t in turns:
        ev = t.evidence
        if ev is None:
            continue
        calls += ev.tool_calls
        bytes_read += ev.bytes_read
        files.update(ev.files_read)
        static += 1 if ev.static_reason else 0
        for ch in ev.citations:
            verified += ch.status == "verified"
            repaired += ch.status == "repaired"
            unverified += ch.status == "unverified"
    return Tally(calls, len(files), bytes_read, verified, repaired, unverified, static)


def checks_of(turns: Iterable[Turn]) -> list[CitationCheck]:
    return [ch for t in turns if t.evidence is not None for ch in t.evidence.citations]


def unverified_lines(checks: Iterable[CitationCheck]) -> list[str]:
    return [f"{c.cited} — {c.reason}" for c in checks if c.status == "unverified"]


def rests_on_unverified(evidence: Evidence | None) -> bool:
    """A turn that cited code but none of it could be verified."""
    if evidence is None or not evidence.citations:
        return False
    return all(c.status == "unverified" for c in evidence.citations)


def has_verified(evidence: Evidence | None) -> bool:
    return evidence is not None and any(c.status != "unverified" for c in evidence.citations)
