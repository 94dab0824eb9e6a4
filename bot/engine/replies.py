"""Parsing the judge's and voters' replies (formats asked for in ``prompts``).

All parsers are lenient and total: a reply that does not follow the format
yields empty fields or ``None``, which the outcome renders visibly (and, in
arbitration, turns into ``ESCALATED``) rather than guessing.

A turn is read once, when the replay takes it (``read_reply``, called by
``Inputs.take``): the view keeps the ``Reply``, and the stages, outcomes and
renderers read it instead of the text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from bot.engine.stances import POSITION_CHARS, StanceEntry, read_persona
from bot.engine.text import clip
from bot.engine.types import (
    PERSONA_PHASES,
    SEVERITIES,
    ArbitrationVerdict,
    DebateSpec,
    Finding,
    Severity,
    Turn,
)

_NUMBERED = re.compile(r"^\s*(?:[-*]\s*)?\**(\d{1,2})[.)]\**\s+(.+?)\s*$")


def parse_numbered_list(text: str, *, max_items: int) -> list[str]:
    """Items of the first numbered list (``1. …``), renumbered in order."""
    items: list[str] = []
    for line in text.splitlines():
        m = _NUMBERED.match(line)
        if m and m.group(2).strip(" *_"):
            items.append(" ".join(m.group(2).split()))
            if len(items) >= max_items:
                break
    return items


def _label_re(label: str) -> re.Pattern[str]:
    words = r"\s+".join(re.escape(w) for w in label.split())
    # "LABEL: rest", "## Label", "**Label:** rest"
    return re.compile(rf"^[\s#>*_]*{words}[*_]*\s*(?::[*_]*\s*(.*?)|[*_]*)\s*$", re.I)


def parse_sections(
    text: str, labels: Sequence[str], *, terminal: str | None = None
) -> dict[str, str]:
    """Split ``text`` at lines that start with one of ``labels``; once ``terminal``
    starts, everything after it belongs to it (a rewritten plan may contain
    lines that look like labels)."""
    patterns = [(label, _label_re(label)) for label in labels]
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if current != terminal or current is None:
            hit = next(((lb, m) for lb, p in patterns if (m := p.match(line))), None)
            if hit is not None and hit[0] not in found:
                current = hit[0]
                rest = hit[1].group(1)
                found[current] = [rest] if rest else []
                continue
        if current is not None:
            found[current].append(line)
    return {k: "\n".join(v).strip() for k, v in found.items()}


def bullets(section: str) -> list[str]:
    """Bullet items of a section (or its non-empty lines when not bulleted)."""
    out = []
    for line in section.splitlines():
        s = line.strip()
        if not s:
            continue
        out.append(re.sub(r"^(?:[-*•]|\d+[.)])\s+", "", s))
    return out


@dataclass(frozen=True)
class DebateVerdict:
    settled: tuple[str, ...] = ()
    open: tuple[str, ...] = ()
    call: str = ""
    flip: str = ""
    decisive: str = ""


_DEBATE_LABELS = ("SETTLED", "OPEN", "CALL", "FLIP CONDITION", "DECISIVE FACTOR")


def parse_debate_verdict(text: str) -> DebateVerdict:
    s = parse_sections(text, _DEBATE_LABELS)
    return DebateVerdict(
        settled=tuple(bullets(s.get("SETTLED", ""))),
        open=tuple(bullets(s.get("OPEN", ""))),
        call=s.get("CALL", ""),
        flip=s.get("FLIP CONDITION", ""),
        decisive=s.get("DECISIVE FACTOR", ""),
    )


@dataclass(frozen=True)
class CritiqueSynthesis:
    report: dict[int, str] = field(default_factory=dict)
    revised_plan: str = ""
    preamble: str = ""  # report text not attributed to an issue


_ISSUE = re.compile(r"^[\s#>*_-]*ISSUE\s*#?\s*(\d{1,2})[*_]*\s*[:.)\-—–]?[*_]*\s*(.*)$", re.I)


def parse_critique(text: str) -> CritiqueSynthesis:
    s = parse_sections(text, ("CRITIQUE REPORT", "REVISED PLAN"), terminal="REVISED PLAN")
    report: dict[int, list[str]] = {}
    preamble: list[str] = []
    current: int | None = None
    for line in s.get("CRITIQUE REPORT", "").splitlines():
        m = _ISSUE.match(line)
        if m:
            current = int(m.group(1))
            report.setdefault(current, []).append(m.group(2))
        elif current is not None:
            report[current].append(line)
        else:
            preamble.append(line)
    return CritiqueSynthesis(
        report={k: "\n".join(v).strip() for k, v in report.items()},
        revised_plan=s.get("REVISED PLAN", ""),
        preamble="\n".join(preamble).strip(),
    )


@dataclass(frozen=True)
class ReviewSynthesis:
    findings: tuple[Finding, ...] = ()  # most severe first, then as numbered
    strengths: str = ""
    disagreements: str = ""


_FINDING = re.compile(
    r"^[\s#>*_-]*FINDING\s*#?\s*(\d{1,2})[*_]*\s*\[?\s*(critical|major|minor)\s*\]?"
    r"\s*(?:\(\s*(?:files?\s*:\s*)?([^)]*)\))?[*_]*\s*[:.\-—–]?\s*(.*)$",
    re.I,
)


def parse_review(text: str) -> ReviewSynthesis:
    """A repository design review's synthesis; lines under a finding continue it."""
    s = parse_sections(text, ("FINDINGS", "STRENGTHS", "DISAGREEMENTS"))
    found: list[tuple[int, Severity, str, list[str]]] = []
    for line in s.get("FINDINGS", "").splitlines():
        m = _FINDING.match(line)
        if m:
            files = ",".join(m.group(3).split()) if m.group(3) else ""
            severity = cast(Severity, m.group(2).lower())
            found.append((int(m.group(1)), severity, files, [m.group(4).strip()]))
        elif found and line.strip():
            found[-1][3].append(line.strip())
    findings = [
        Finding(
            n,
            severity,
            " ".join(parts).strip(),
            tuple(f.strip("`' ") for f in files.split(",") if f.strip("`' ")),
        )
        for n, severity, files, parts in found
    ]
    findings.sort(key=lambda f: (SEVERITIES.index(f.severity), f.number))
    return ReviewSynthesis(tuple(findings), s.get("STRENGTHS", ""), s.get("DISAGREEMENTS", ""))


# A line labelled VERDICT ("VERDICT: x", "**Verdict:** x", "## Verdict"); the
# label must be followed by a separator or the end of the line.
_VERDICT_LINE = re.compile(r"^[\s#>*_`]*VERDICT[*_`]*\s*(?:[:\-—–][*_`]*(.*)|[*_`]*\s*)$", re.I)
# The value: exactly one verdict word, optionally in emphasis or backticks, then
# nothing, or a separator and a free-form reason.
_VERDICT_VALUE = re.compile(
    r"^[*_`\s]*(DISMISSED|CONFIRMED|ESCALATED)[*_`]*\s*(?:$|[:\-—–.,;(]\s*.*$)", re.I
)


def parse_verdict(text: str) -> ArbitrationVerdict | None:
    """The judge's verdict, or ``None`` (absent, ambiguous or contradictory).

    Only a VERDICT line whose value is exactly one verdict word counts ("Not
    CONFIRMED", "DISMISSED or CONFIRMED" and the format line itself do not). A
    bare "## Verdict" heading takes its value from the next non-blank line.
    Every VERDICT line must parse and agree, so a reply that states two
    verdicts is not resolved by picking one."""
    lines = text.splitlines()
    found: set[str] = set()
    for i, line in enumerate(lines):
        m = _VERDICT_LINE.match(line)
        if m is None:
            continue
        value = (m.group(1) or "").strip()
        if not value:
            value = next((x.strip() for x in lines[i + 1 :] if x.strip()), "")
        v = _VERDICT_VALUE.match(value)
        if v is None:
            return None
        found.add(v.group(1).upper())
    if len(found) != 1:
        return None
    return cast(ArbitrationVerdict, found.pop())


@dataclass(frozen=True)
class Arbitration:
    verdict: ArbitrationVerdict | None  # None: absent or ambiguous
    conclusion: str


def parse_arbitration(text: str) -> tuple[ArbitrationVerdict | None, str]:
    """The judge's verdict (``None`` when absent or ambiguous) and conclusion."""
    conclusion = parse_sections(text, ("CONCLUSION",), terminal="CONCLUSION").get("CONCLUSION", "")
    return parse_verdict(text), conclusion


@dataclass(frozen=True)
class ProposalDraft:
    title: str
    summary: str
    body: str


def parse_proposal(text: str) -> ProposalDraft:
    s = parse_sections(text, ("TITLE", "SUMMARY", "PROPOSAL"), terminal="PROPOSAL")
    title = " ".join(s.get("TITLE", "").split())
    title = re.sub(r"^\[PROPOSAL\]\s*", "", title, flags=re.I)[:120]
    return ProposalDraft(title=title, summary=s.get("SUMMARY", ""), body=s.get("PROPOSAL", ""))


_VOTE = re.compile(
    r"^[\s>*_-]*VOTE\s*#?\s*(\d{1,2})[*_]*\s*[:\-—–]\s*[*_]*(?:POSITION\s+)?([A-Z])\b", re.I
)


def parse_votes(text: str) -> dict[int, str]:
    """Point → label; a point voted twice with different labels is an abstention."""
    seen: dict[int, set[str]] = {}
    for line in text.splitlines():
        m = _VOTE.match(line)
        if m:
            seen.setdefault(int(m.group(1)), set()).add(m.group(2).upper())
    return {p: next(iter(labels)) for p, labels in seen.items() if len(labels) == 1}


Synthesis = DebateVerdict | CritiqueSynthesis | ReviewSynthesis | Arbitration | ProposalDraft


def read_synthesis(spec: DebateSpec, text: str) -> Synthesis:
    """The synthesis in the format its mode asked for (``synthesis_prompt``)."""
    if spec.mode == "debate":
        return parse_debate_verdict(text)
    if spec.mode == "critique":
        return parse_review(text) if spec.subject_kind == "repository" else parse_critique(text)
    if spec.mode == "arbitrate":
        return Arbitration(*parse_arbitration(text))
    return parse_proposal(text)


@dataclass(frozen=True)
class Reply:
    """What an ok turn's text says, by the turn's phase; a dropped turn's and a
    frame turn's are empty (the frame stage reads its two turns itself)."""

    position: str = ""  # a persona's, unclipped: read it with ``clipped_position``
    stances: Mapping[int, StanceEntry] = field(default_factory=dict)  # a persona's, 1..n points
    votes: Mapping[int, str] = field(default_factory=dict)  # a voter's: point -> label
    synthesis: Synthesis | None = None

    def clipped_position(self, max_chars: int = POSITION_CHARS) -> str:
        return clip(self.position, max_chars)


NO_REPLY = Reply()


def read_reply(spec: DebateSpec, turn: Turn, n_points: int) -> Reply:
    """``turn``'s text parsed once, the way its phase's readers need it."""
    if turn.status != "ok":
        return NO_REPLY
    phase = turn.key.phase
    if phase in PERSONA_PHASES:
        position, stances = read_persona(turn.text, n_points)
        return Reply(position=position, stances=stances)
    if phase == "vote":
        return Reply(votes=parse_votes(turn.text))
    if phase == "synthesis":
        return Reply(synthesis=read_synthesis(spec, turn.text))
    return NO_REPLY
