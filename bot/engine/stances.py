"""Stance blocks: parsing persona replies and deciding convergence.

Every persona reply ends with one line per point::

    POINT <n>: AGREE | HOLD | CONCEDE — <reason>

Parsing is lenient on purpose: models vary separators, case and markdown
decoration, and a reply without a usable block is still a valid turn whose
stances all count as ``HOLD`` (never an error).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, cast

from bot.engine.text import clip
from bot.engine.types import Stance

# Leading markdown decoration (bullets, bold, quotes) is tolerated, as are the
# separators ':', '-', '—', '–', '.', ')' around the number and the stance.
_STANCE_LINE = re.compile(
    r"^[\s>*_`#\-•]*POINT\s*#?\s*(\d{1,3})\s*\**\s*(?:[:.)\-—–]\s*)?[*_`\s]*"
    r"(AGREE|HOLD|CONCEDE)\b[*_`]*\s*(?:[:\-—–]+\s*)?(.*?)\s*$",
    re.IGNORECASE,
)
_POSITION_LINE = re.compile(r"^[\s>*_`#\-•]*POSITION\s*\**\s*[:\-—–]\s*\**\s*(.+?)\s*$", re.I)


@dataclass(frozen=True)
class StanceEntry:
    stance: Stance
    reason: str = ""
    explicit: bool = False  # False: the reply had no usable line for this point


POSITION_CHARS = 400  # a position's width where a reader gives none


def read_persona(text: str, n_points: int) -> tuple[str, dict[int, StanceEntry]]:
    """A persona reply in one pass: its position, unclipped (the ``POSITION:``
    line, else the first line of prose that is not a stance line), and its
    stances on points 1..n_points (a later line for the same point wins: the
    block sits at the end, so it overrides any mention in the body)."""
    found: dict[int, StanceEntry] = {}
    position: str | None = None
    fallback = ""
    for line in text.splitlines():
        m = _STANCE_LINE.match(line)
        if m is not None:
            point = int(m.group(1))
            if 1 <= point <= n_points:
                stance = cast(Stance, m.group(2).upper())
                found[point] = StanceEntry(stance, reason=m.group(3).strip(), explicit=True)
            continue
        if position is not None:
            continue
        p = _POSITION_LINE.match(line)
        if p is not None:
            position = p.group(1)
        elif not fallback:
            fallback = line.strip().strip("#*_> ").strip()
    stances = {p: found.get(p, StanceEntry("HOLD")) for p in range(1, n_points + 1)}
    return (fallback if position is None else position), stances


def parse_stances(text: str, n_points: int) -> dict[int, StanceEntry]:
    """Stances for points 1..n_points (``read_persona``)."""
    return read_persona(text, n_points)[1]


def parse_position(text: str, *, max_chars: int = POSITION_CHARS) -> str:
    """The persona's one-line position, clipped (``read_persona``)."""
    return clip(read_persona(text, 0)[0], max_chars)


def own_position_summary(text: str) -> str:
    """A persona's last position as it is handed back to it: the POSITION line
    and the stance lines only. Its opponents already answered the full turn, and
    re-sending it would cost a whole turn of input per request (DESIGN §2)."""
    stance_lines = [line.strip() for line in text.splitlines() if _STANCE_LINE.match(line)]
    return "\n".join([f"POSITION: {parse_position(text)}", *stance_lines])


def strip_stance_block(text: str) -> str:
    """The reply without its stance lines (for digests that show stances apart)."""
    kept = [line for line in text.splitlines() if not _STANCE_LINE.match(line)]
    return "\n".join(kept).strip()


def open_points(
    ledger: Mapping[str, Mapping[int, StanceEntry]], points: Iterable[int]
) -> tuple[int, ...]:
    """Points still contested: two or more personas HOLD a position on them.

    A point where at most one persona holds out is settled (the others agreed
    or conceded), so a two-persona debate converges as soon as one side moves.
    """
    result = []
    for p in points:
        holders = sum(
            1 for stances in ledger.values() if stances.get(p, StanceEntry("HOLD")).stance == "HOLD"
        )
        if holders >= 2:
            result.append(p)
    return tuple(result)


def holders(ledger: Mapping[str, Mapping[int, StanceEntry]], point: int) -> tuple[str, ...]:
    """Personas (in ledger order) holding a position on ``point``."""
    return tuple(
        name
        for name, stances in ledger.items()
        if stances.get(point, StanceEntry("HOLD")).stance == "HOLD"
    )


def _reading(seat: int, stance: Stance) -> bool | None:
    """Arbitration, point 1: does this closing stance say the concern is real?
    Seat 0 argues it is, seat 1 that it is a false positive. HOLD keeps the
    seat's own side, CONCEDE takes the other side's; AGREE ("the sides now
    agree") has no direction of its own (``None``)."""
    if stance == "AGREE":
        return None
    own = seat == 0
    return own if stance == "HOLD" else not own


def stances_verdict(concern: Stance, answer: Stance) -> Literal["CONFIRMED", "DISMISSED"] | None:
    """What the two closing stances of an arbitration say together (``concern``:
    the seat arguing the concern is real): CONFIRMED or DISMISSED when they read
    the concern the same way, ``None`` when they still differ (both HOLD) or
    contradict each other (both CONCEDE). AGREE takes the other seat's reading;
    when both AGREE they accept point 1 as stated: the concern is real."""
    a, b = _reading(0, concern), _reading(1, answer)
    if a is None and b is None:
        a = b = True
    a = b if a is None else a
    b = a if b is None else b
    if a != b:
        return None
    return "CONFIRMED" if a else "DISMISSED"
