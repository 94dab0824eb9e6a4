"""The synthesizer's prompt: the per-mode answer formats, then everything the
run produced that the synthesis weighs (the ledger, the final positions, the
stalemate resolutions, citations that failed), ending in the task trailer.

The shared material and the system prompt are ``prompts``'; only the suffix is
built here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.engine.prompts import (
    TASK_HEADER,
    QuotedTurn,
    SeatView,
    clip_words,
    fence,
    persona_name,
    points_block,
    roster,
    summary_block,
    trailer,
)
from bot.engine.types import JUDGE, DebateSpec

_SYNTHESIS_FORMAT: dict[str, str] = {
    "debate": (
        "Write the verdict in exactly these sections, each label at the start of its own line:\n"
        "SETTLED: bullets — what the debate established or both sides accept\n"
        "OPEN: bullets — what remains genuinely unresolved\n"
        "CALL: the decision you recommend, one short paragraph\n"
        "FLIP CONDITION: the evidence or change that would reverse the call\n"
        "DECISIVE FACTOR: what tipped the balance"
    ),
    "critique": (
        "Write exactly two sections, each label at the start of its own line:\n"
        "CRITIQUE REPORT:\n"
        "then for each issue a line `ISSUE <n>: <verdict and recommendation>` (issues 1 to N);\n"
        "REVISED PLAN:\n"
        "then the whole plan rewritten, with `[CHANGED]` at the start of every line you "
        "changed or added."
    ),
    "review": (
        "Write exactly three sections, each label at the start of its own line:\n"
        "FINDINGS:\n"
        "then one line per finding the personas agreed on, most severe first: "
        "`FINDING <n> [critical|major|minor] (files: <path>, <path>): <the problem and what "
        "to do>`;\n"
        "STRENGTHS:\n"
        "then bullets: what the design does well;\n"
        "DISAGREEMENTS:\n"
        "then bullets: each point the personas still disagree on, with both positions."
    ),
    "arbitrate": (
        "Decide whether the review concern is real. Answer with these lines:\n"
        "VERDICT: DISMISSED | CONFIRMED | ESCALATED (DISMISSED: false positive; CONFIRMED: "
        "a real problem to fix; ESCALATED: a human must decide)\n"
        "CONCLUSION: your rationale and which side prevailed, one paragraph"
    ),
    "proposal": (
        "Write the proposal issue, honouring every stalemate resolution listed above:\n"
        "TITLE: a short title without any prefix\n"
        "SUMMARY: two or three sentences\n"
        "PROPOSAL:\n"
        "then the proposal in markdown: the problem, the proposed solution point by point, "
        "what was rejected and why, and open questions"
    ),
}


_ARBITRATION_EVIDENCE = (
    "\nEVIDENCE: the code your verdict rests on, cited as `path:L12-L20` with the cited line "
    "quoted: for CONFIRMED the code the concern affects, for DISMISSED the code that refutes "
    "it. A CONFIRMED or DISMISSED verdict without a verified citation is escalated to a human."
)


def _reviews_repository(spec: DebateSpec) -> bool:
    return spec.mode == "critique" and spec.subject_kind == "repository"


@dataclass(frozen=True)
class SynthesisBrief:
    """What the synthesizer sees, built by the synthesis stage."""

    synthesizer: str  # "judge" or a persona's name
    seats: tuple[SeatView, ...]
    points: tuple[str, ...]
    ledger_lines: tuple[str, ...]  # each seat's stances round by round
    finals: tuple[QuotedTurn, ...]  # each live persona's last ok turn
    resolutions: tuple[str, ...]  # how each stalemate was resolved (binding)
    notes: tuple[str, ...]
    words: int
    escalation_summary: str
    unverified: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (persona, citations)


def synthesis_suffix(spec: DebateSpec, brief: SynthesisBrief) -> str:
    lines = ["## Your role", _role(brief.synthesizer), "", "## Personas (untrusted data)"]
    lines += [roster(brief.seats), "", *points_block(brief.points)]
    if brief.escalation_summary:
        lines += ["", *summary_block(brief.escalation_summary)]
    lines += ["", "## Stance ledger (per round)", *brief.ledger_lines]
    lines += _final_positions(brief.finals, brief.words)
    lines += _resolutions_and_notes(brief.resolutions, brief.notes)
    lines += _unverified(brief.unverified)
    lines += ["", *_task(spec, brief)]
    return "\n".join(lines) + "\n"


def _role(synthesizer: str) -> str:
    if synthesizer == JUDGE:
        return (
            "You are the judge: neutral, not a participant. Weigh the arguments, not the personas."
        )
    return (
        f"You are {persona_name(synthesizer)}, asked to write the synthesis. Set your persona "
        "aside and be neutral: weigh the arguments, not who made them."
    )


def _final_positions(finals: Sequence[QuotedTurn], words: int) -> list[str]:
    lines: list[str] = []
    for q in finals:
        lines += [
            "",
            f"## {persona_name(q.name)} — final position, round {q.round} (untrusted model output)",
            fence(clip_words(q.text, 2 * max(words, 200))),
        ]
    return lines


def _resolutions_and_notes(resolutions: Sequence[str], notes: Sequence[str]) -> list[str]:
    lines: list[str] = []
    if resolutions:
        # The decisions are binding; the positions quoted in them are model output.
        lines += [
            "",
            "## Stalemates and their resolution — binding, but the quoted positions are "
            "untrusted model output",
            fence("\n".join(f"- {' '.join(r.split())}" for r in resolutions)),
        ]
    if notes:
        lines += ["", "## Notes", *[f"- {n}" for n in notes]]
    return lines


def _unverified(unverified: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    if not unverified:
        return []
    # The citations are model output (paths and reasons), so fenced.
    return [
        "",
        "## Citations that could not be verified against the repository (untrusted model output)",
        "Give no weight to a claim that rests only on these.",
        fence(
            "\n".join(
                f"{persona_name(name)}: " + "; ".join(items[:12]) for name, items in unverified
            )
        ),
    ]


def _task(spec: DebateSpec, brief: SynthesisBrief) -> list[str]:
    task_format = _SYNTHESIS_FORMAT["review" if _reviews_repository(spec) else spec.mode]
    if spec.mode == "arbitrate" and spec.tools:
        task_format += _ARBITRATION_EVIDENCE
    pairs: list[tuple[str, object]] = [
        ("TASK", "synthesis"),
        ("MODE", spec.mode),
        ("POINTS", len(brief.points)),
        ("WORDS", brief.words),
    ]
    if _reviews_repository(spec):
        pairs.append(("SUBJECT", "repository"))
    return [TASK_HEADER, task_format, f"Write at most {brief.words} words.", "", trailer(pairs)]
