"""Scripted rehearsal replies: protocol-conformant text from the prompt alone.

``reply(prompt_text)`` reads the task trailer that every prompt ends with
(``TASK: rebuttal``, ``SEAT: 1 of 2`` …) plus the fenced subject, and writes a
deterministic reply in exactly the format the engine parses. It backs the
scripted in-process provider and the loopback fake model server, so it works
from the concatenated prompt text (system + prefix + suffix) only. Its output
always starts with ``(scripted rehearsal)`` so nobody mistakes it for a model.

The script converges on purpose: openings hold every point, in the rebuttal
the second seat concedes the even points, and from the first counter round
the first seat agrees and the others concede. In proposal mode point 1 stays
held by everyone, so a stalemate reaches the decision or the voter panel.
"""

from __future__ import annotations

import re
from typing import cast

from bot.engine.prompts import TASK_HEADER
from bot.engine.stances import stances_verdict
from bot.engine.types import PERSONA_PHASES, Stance

MARK = "(scripted rehearsal)"

_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "architecture",
        (
            "architecture",
            "grpc",
            "rest ",
            "database",
            "microservice",
            "framework",
            "kafka",
            "postgres",
            "queue",
            "monolith",
            "stack",
        ),
    ),
    ("paper", ("paper", "abstract", "contribution", "publication", "related work")),
    ("experiment", ("experiment", "ablation", "control group", "hypothesis", "a/b test")),
    ("result", ("improved", "improvement", "speedup", "accuracy", "benchmark result")),
    ("plan", ("plan", "timeline", "milestone", "roadmap", "scope", "migration", "rollout")),
    ("data", ("dataset", "scrape", "personal data", "consent", "pii", "gdpr")),
    ("math", ("theorem", "proof", "lemma", "bound", "inequality")),
    ("build", ("build our own", "buy", "existing tool", "reinvent", "off-the-shelf")),
)
_HOLD_POSITIONS = (
    "keep it minimal: ship the smallest version first and measure",
    "design for scale from the start, with explicit failure handling",
    "stage it behind a flag and decide after one release cycle",
)


def reply(prompt_text: str) -> str:
    fields = _trailer(prompt_text)
    task = fields.get("TASK", "")
    if task == "classify":
        return _classify(prompt_text)
    if task in ("extract-issues", "extract-points"):
        return _extract(prompt_text, task, _int(fields.get("MAX"), 8))
    if task in PERSONA_PHASES:
        return _persona(prompt_text, task, fields)
    if task == "vote":
        return _vote(fields)
    if task == "synthesis":
        return _synthesis(prompt_text, fields)
    return f"{MARK}\nNo task was recognised in the prompt."


# --- reading the prompt ------------------------------------------------------


def _trailer(text: str) -> dict[str, str]:
    at = text.rfind("\n" + TASK_HEADER + "\n")
    tail = text[at:] if at >= 0 else text[-2000:]
    fields: dict[str, str] = {}
    for line in tail.splitlines():
        m = re.match(r"^([A-Z]+): (.*)$", line)
        if m:
            fields[m.group(1)] = m.group(2).strip()
    return fields


def _int(value: str | None, default: int) -> int:
    m = re.match(r"\d+", value or "")
    return int(m.group(0)) if m else default


def _of(value: str | None) -> tuple[int, int]:
    m = re.match(r"(\d+) of (\d+)", value or "")
    return (int(m.group(1)), int(m.group(2))) if m else (1, 2)


def subject_of(text: str) -> str:
    """The fenced subject of the shared prefix."""
    m = re.search(r"^### Subject \(untrusted data\)\n(`{3,})text\n", text, re.M)
    if m is None:
        return ""
    ticks = m.group(1)
    start = m.end()
    end = text.find("\n" + ticks + "\n", start - 1)
    return text[start:end] if end >= 0 else text[start:]


_FENCE_LINE = re.compile(r"^`{3,}(?:text)?$")


def _section(text: str, heading: str) -> list[str]:
    """Non-blank lines under the last ``heading`` line (it may carry a suffix such
    as " (untrusted data)"), up to the next ``## `` heading; fence lines dropped."""
    at = max(text.rfind("\n" + heading + "\n"), text.rfind("\n" + heading + " "))
    if at < 0:
        return []
    body = text[at + 1 :].split("\n", 1)[1] if "\n" in text[at + 1 :] else ""
    out = []
    for line in body.splitlines():
        if line.startswith("## "):
            break
        if line.strip() and not _FENCE_LINE.match(line):
            out.append(line)
    return out


def _words(text: str, n: int) -> str:
    w = text.split()
    return " ".join(w[:n]) + ("…" if len(w) > n else "")


# --- tasks -------------------------------------------------------------------


def _classify(text: str) -> str:
    subject = subject_of(text).lower()
    best, score = "none", 0
    for key, words in _KEYWORDS:
        s = sum(subject.count(w) for w in words)
        if s > score:
            best, score = key, s
    lines = [MARK, f"ARTIFACT: {best}", "WHY: keyword match on the subject (scripted)."]
    if best == "none":
        lines.append(
            "OWNER: Maintainer — the artifact's author, defending its intent and constraints."
        )
    return "\n".join(lines) + "\n"


def _extract(text: str, task: str, max_items: int) -> str:
    subject = subject_of(text)
    heads = [
        re.sub(r"^#+\s*", "", ln).strip()
        for ln in subject.splitlines()
        if re.match(r"^#{2,6}\s+\S", ln)
    ]
    if not heads:
        sentences = [
            s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(subject.split())) if s.strip()
        ]
        heads = [_words(s, 10) for s in sentences]
    heads = heads[: min(3, max_items)] or ["The subject as a whole"]
    what = (
        "is this part sound and complete?"
        if task == "extract-issues"
        else "which approach to take?"
    )
    items = [f"{i}. {h} — {what}" for i, h in enumerate(heads, 1)]
    return "\n".join([MARK, *items]) + "\n"


def _persona(text: str, task: str, f: dict[str, str]) -> str:
    name = f.get("PERSONA", "Persona")
    seat, _ = _of(f.get("SEAT"))
    rnd, _ = _of(f.get("ROUND"))
    tier = _int(f.get("TIER"), 0)
    points = _int(f.get("POINTS"), 1)
    words = _int(f.get("WORDS"), 200)
    proposal = f.get("MODE") == "proposal"
    opponents = re.findall(r"^## (.+?) — latest turn, round \d+", text, re.M)
    lens = next(
        (
            ln.split(": ", 1)[1].strip()
            for ln in _section(text, "## Your role")
            if ln.startswith(f"{name} (you): ")
        ),
        "",
    )
    position = (
        f"POSITION: As {name} ({_words(lens, 8) or 'my lens'}), I hold my reading of the "
        f"subject ({task}, round {rnd})."
    )
    if task == "rebuttal" and opponents:
        argument = (
            f"Steelman: {opponents[0]}'s strongest point, in its best form, is that its "
            "approach lowers risk now. Attack: that holds only if the costs it defers stay small."
        )
    elif task == "counter":
        argument = "On the crux: a single measurable test would settle the remaining disagreement."
    else:
        argument = "The strongest honest case: the subject's own constraints favour this lens."
    lines = [MARK, position, _words(argument, max(20, words - 20 * points))]
    stances = []
    for p in range(1, points + 1):
        stance = _stance(proposal, p, seat, rnd, tier)
        if stance == "HOLD":
            reason = (
                _HOLD_POSITIONS[(seat - 1) % len(_HOLD_POSITIONS)]
                if proposal
                else "not yet answered"
            )
        else:
            reason = "the other side's argument holds" if stance == "CONCEDE" else "we now agree"
        stances.append(f"POINT {p}: {stance} — {reason}")
    return "\n".join(lines) + "\n\n" + "\n".join(stances) + "\n"


def _stance(proposal: bool, point: int, seat: int, rnd: int, tier: int) -> str:
    if proposal and point == 1:
        return "HOLD"  # a deliberate stalemate
    if rnd == 1:
        return "HOLD"
    if rnd == 2 and tier == 0:
        return "HOLD" if seat == 1 or point % 2 == 1 else "CONCEDE"
    return "AGREE" if seat == 1 else "CONCEDE"


def _vote(f: dict[str, str]) -> str:
    points = [p.strip() for p in f.get("POINTS", "").split(",") if p.strip()]
    return (
        "\n".join(
            [MARK, *[f"VOTE {p}: A — the clearer of the positions (scripted)" for p in points]]
        )
        + "\n"
    )


def _synthesis(text: str, f: dict[str, str]) -> str:
    mode = f.get("MODE", "debate")
    points = _int(f.get("POINTS"), 1)
    if mode == "critique" and f.get("SUBJECT") == "repository":
        lines = _design_review(points)
    elif mode == "critique":
        lines = _critique_report(subject_of(text), points)
    elif mode == "arbitrate":
        lines = _arbitration_verdict(text)
    elif mode == "proposal":
        lines = _proposal_issue(text)
    else:
        lines = _debate_verdict()
    return "\n".join([MARK, *lines]) + "\n"


def _design_review(points: int) -> list[str]:
    findings = [
        f"FINDING {i} [{('minor', 'major')[i % 2]}] (files: README.md): Question {i} needs "
        "a written decision record and a named owner (scripted)."
        for i in range(1, points + 1)
    ]
    strengths = "- Small modules with one job each (scripted)."
    disagreements = "- Whether to split the service now or later: one persona for, one against."
    return ["FINDINGS:", *findings, "STRENGTHS:", strengths, "DISAGREEMENTS:", disagreements]


def _critique_report(subject: str, points: int) -> list[str]:
    report = [
        f"ISSUE {i}: Keep it, with one fix: add an explicit check and an owner (scripted)."
        for i in range(1, points + 1)
    ]
    change = "[CHANGED] Add a rollback step and a named owner for each milestone."
    revised = [*subject.splitlines(), "", change]
    return ["CRITIQUE REPORT:", *report, "REVISED PLAN:", *revised]


def _arbitration_verdict(text: str) -> list[str]:
    finals: list[Stance] = []
    for line in _section(text, "## Stance ledger (per round)"):
        m = re.findall(r"\b1=(AGREE|HOLD|CONCEDE)\b", line)
        finals.append(cast(Stance, m[-1]) if m else "HOLD")
    # The same reading of the closing stances as the engine's outcome.
    agreed = stances_verdict(finals[0], finals[1]) if len(finals) >= 2 else None
    verdict = agreed or "ESCALATED"
    return [
        f"VERDICT: {verdict}",
        "CONCLUSION: The side that conceded could not answer the other's "
        "strongest argument (scripted).",
    ]


def _proposal_issue(text: str) -> list[str]:
    subject = subject_of(text)
    first = next((ln.strip("# ").strip() for ln in subject.splitlines() if ln.strip()), "the issue")
    resolved = _section(text, "## Stalemates and their resolution")
    agenda = _section(text, "## Points")
    body = [
        "### Proposed solution",
        *[f"- {ln}" for ln in agenda],
        "",
        "### Stalemates",
        *([f"- {ln.removeprefix('- ')}" for ln in resolved] or ["- none"]),
    ]
    return [
        f"TITLE: {_words(first, 10)}",
        "SUMMARY: The panel agreed on most points; stalemates were resolved as listed (scripted).",
        "PROPOSAL:",
        *body,
    ]


def _debate_verdict() -> list[str]:
    return [
        "SETTLED:",
        "- Both sides accept the subject's constraints (scripted).",
        "OPEN:",
        "- The long-term cost remains uncertain.",
        "CALL: Take the conceded side's opponent's position, revisiting after one release.",
        "FLIP CONDITION: Measured costs exceeding the estimate by 2x.",
        "DECISIVE FACTOR: One side conceded the crux in the counter round.",
    ]
