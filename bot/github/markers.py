"""Marker lines that tag every bot comment, and splitting of long bodies.

Every comment the bot posts starts with one marker line (docs/architecture.md, "Markers")::

    <!-- debate-bot:round run=<id> round=<n> -->
    <!-- debate-bot:verdict run=<id> -->
    <!-- debate-bot:status run=<id> -->
    <!-- debate-bot:aborted run=<id> -->
    <!-- debate-bot:proposal-link run=<id> -->

and a continuation of a long comment repeats it with ``part=<k>`` (k ≥ 2). The
bot finds its own comments by that line, so it is only ever read from the first
line of a body, and ``sanitize`` escapes look-alikes anywhere in content.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Final, Literal, get_args

from bot.github.sanitize import sanitize

MarkerKind = Literal["round", "verdict", "status", "aborted", "proposal-link"]
MARKER_KINDS: Final[tuple[MarkerKind, ...]] = get_args(MarkerKind)

MAX_BODY: Final = 65_536  # GitHub rejects longer comment bodies with 422
CONTINUED_NOTE: Final = "_(continued)_\n\n"
MIN_LIMIT: Final = 256

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
_MARKER_LINE = re.compile(
    r"<!-- debate-bot:(?P<kind>[a-z-]+) run=(?P<run>[A-Za-z0-9][A-Za-z0-9_.-]{0,79})"
    r"(?: round=(?P<round>[1-9][0-9]{0,5}))?(?: part=(?P<part>[1-9][0-9]{0,5}))? -->"
)


@dataclass(frozen=True)
class Marker:
    kind: MarkerKind
    run_id: str
    round: int | None = None
    part: int = 1

    @property
    def line(self) -> str:
        return marker(self.kind, self.run_id, round=self.round, part=self.part)


def marker(kind: MarkerKind, run_id: str, *, round: int | None = None, part: int = 1) -> str:
    """The exact marker line (no trailing newline)."""
    if kind not in MARKER_KINDS:
        raise ValueError(f"unknown marker kind {kind!r}")
    if not _RUN_ID.fullmatch(run_id):
        raise ValueError("run id must be 1-80 characters of [A-Za-z0-9_.-]")
    if (kind == "round") != (round is not None):
        raise ValueError("a round number is required for, and only for, round markers")
    if round is not None and round < 1:
        raise ValueError("round numbers start at 1")
    if part < 1:
        raise ValueError("part numbers start at 1")
    text = f"<!-- debate-bot:{kind} run={run_id}"
    if round is not None:
        text += f" round={round}"
    if part >= 2:
        text += f" part={part}"
    return text + " -->"


def parse_marker(body: str) -> Marker | None:
    """The marker on the first line of ``body``, or None (strict: only our format)."""
    first = body.split("\n", 1)[0].rstrip("\r \t")
    m = _MARKER_LINE.fullmatch(first)
    if m is None or m["kind"] not in MARKER_KINDS:
        return None
    kind: MarkerKind = m["kind"]
    round_ = int(m["round"]) if m["round"] else None
    part = int(m["part"]) if m["part"] else 1
    if (kind == "round") != (round_ is not None) or m["part"] == "1":
        return None  # marker() never writes these, so they are not ours
    return Marker(kind=kind, run_id=m["run"], round=round_, part=part)


# --- splitting -------------------------------------------------------------------

_FENCE_OPEN = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_DETAILS_TAG = re.compile(r"<(/?)details\b[^>]*>", re.IGNORECASE)
_MAX_TRACKED_DEPTH = 16


@dataclass(frozen=True)
class _State:
    """Open structure at a point of the text: `<details>` tags, then a code fence."""

    details: tuple[str, ...] = ()  # the opening tags, outermost first
    fence: str | None = None  # the fence's opening line (indent, fence chars, info)

    @property
    def empty(self) -> bool:
        return not self.details and self.fence is None


def _fence_chars(opening: str) -> str:
    m = _FENCE_OPEN.fullmatch(opening)
    assert m is not None
    return m[1] + m[2]


def _closes_fence(line: str, opening: str) -> bool:
    fence = _fence_chars(opening).lstrip(" ")
    stripped = line.strip()
    indent = len(line) - len(line.lstrip(" "))
    return indent <= 3 and len(stripped) >= len(fence) and set(stripped) == {fence[0]}


def _advance(state: _State, line: str) -> _State:
    if state.fence is not None:
        return _State(state.details, None) if _closes_fence(line, state.fence) else state
    m = _FENCE_OPEN.fullmatch(line)
    if m and not (m[2][0] == "`" and "`" in m[3]):
        return _State(state.details, line)
    details = list(state.details)
    for tag in _DETAILS_TAG.finditer(line):
        if tag[1]:
            if details:
                details.pop()
        elif len(details) < _MAX_TRACKED_DEPTH:
            details.append(tag[0])
    return _State(tuple(details), None)


@dataclass(frozen=True)
class _Boundary:
    offset: int  # a cut here starts the next part at a line start
    state: _State  # structure open at that offset
    paragraph: bool  # the line just ended was blank


def _boundaries(text: str) -> list[_Boundary]:
    out: list[_Boundary] = []
    state = _State()
    pos = 0
    while (nl := text.find("\n", pos)) >= 0:
        line = text[pos:nl]
        state = _advance(state, line)
        out.append(_Boundary(nl + 1, state, not line.strip()))
        pos = nl + 1
    return out


def _reopen(state: _State) -> str:
    text = "".join(f"{tag}\n<summary>(continued)</summary>\n\n" for tag in state.details)
    if state.fence is not None:
        text += state.fence + "\n"
    return text


def _close(state: _State, *, at_line_start: bool) -> str:
    if state.empty:
        return ""
    text = "" if at_line_start else "\n"
    if state.fence is not None:
        text += _fence_chars(state.fence) + "\n"
    text += "\n</details>\n" * len(state.details)
    return text


def _state_at(bounds: list[_Boundary], offsets: list[int], cut: int) -> _State:
    i = bisect.bisect_right(offsets, cut) - 1
    return bounds[i].state if i >= 0 else _State()


def _choose_cut(
    text: str, bounds: list[_Boundary], offsets: list[int], pos: int, budget: int
) -> int:
    """Where the part starting at ``pos`` ends, at most ``budget`` characters on.

    Preference: a paragraph boundary outside any `<details>`/fence, then a line
    boundary outside them, then a paragraph or line boundary inside them, then
    whitespace - all keeping the part at least a quarter full - and only then
    an earlier boundary or a cut anywhere.
    """
    hi = pos + budget
    if hi >= len(text):
        return len(text)
    lo_good = pos + budget // 4
    last = bisect.bisect_right(offsets, hi) - 1
    first_good = bisect.bisect_left(offsets, lo_good)
    for want_empty, want_para in ((True, True), (True, False), (False, True), (False, False)):
        for i in range(last, first_good - 1, -1):
            b = bounds[i]
            if (not want_empty or b.state.empty) and (not want_para or b.paragraph):
                return b.offset
    window = text[lo_good:hi]
    space = max(window.rfind(" "), window.rfind("\t"))
    if space >= 0:
        return lo_good + space + 1
    if last >= 0 and offsets[last] > pos:
        return offsets[last]
    return hi


def split_body(
    marker_kind: MarkerKind,
    run_id: str,
    body: str,
    *,
    round: int | None = None,
    limit: int = MAX_BODY,
    sanitize_parts: bool = True,
) -> list[str]:
    """Full comment bodies (marker line + content), each at most ``limit`` characters.

    ``body`` is sanitized first (and each part again, since cutting can change
    how a part's markdown parses), unless ``sanitize_parts`` is False. Parts are
    cut on paragraph or line boundaries where possible; a `<details>` block or
    code fence open at a cut is closed and reopened in the next part, which
    starts with the ``part=k`` marker and a short "(continued)" note.
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"limit must be at least {MIN_LIMIT}")
    clean = sanitize if sanitize_parts else (lambda s: s)
    content = clean(body)
    first_line = marker(marker_kind, run_id, round=round)
    if len(first_line) + 1 + len(content) <= limit:
        return [f"{first_line}\n{content}"]

    bounds = _boundaries(content)
    offsets = [b.offset for b in bounds]
    parts: list[str] = []
    pos = 0
    state = _State()
    while pos < len(content):
        k = len(parts) + 1
        line = marker(marker_kind, run_id, round=round, part=k)
        reopen = _reopen(state)
        if len(reopen) > limit // 4:  # pathological nesting: give up on structure
            reopen, state = "", _State()
        head = CONTINUED_NOTE + reopen if k > 1 else reopen
        overhead = len(line) + 1 + len(head)
        slack = 0
        while True:
            budget = max(limit - overhead - slack, 1)
            cut = _choose_cut(content, bounds, offsets, pos, budget)
            end_state = _state_at(bounds, offsets, cut) if cut < len(content) else _State()
            close = _close(end_state, at_line_start=content[cut - 1] == "\n")
            if len(close) > limit // 4:
                close, end_state = "", _State()
            part_content = clean(head + content[pos:cut] + close)
            total = len(line) + 1 + len(part_content)
            if total <= limit:
                break
            slack += total - limit + 16
        parts.append(f"{line}\n{part_content}")
        pos, state = cut, end_state
    return parts
