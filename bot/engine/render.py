"""Markdown rendering of round digests and the CLI transcript (pure).

Everything is a function of ``(spec, turns)``: a re-render after a crash is
byte-identical, so comment upserts stay idempotent. Final outcome bodies are
produced by ``next_step`` (see ``outcomes``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.engine.audit import code
from bot.engine.citations import link_citations
from bot.engine.fold import replay
from bot.engine.outcomes import Parts, outcome_parts
from bot.engine.prompts import word_budget
from bot.engine.routing import DEGRADED
from bot.engine.types import DebateSpec, Outcome, Turn
from bot.engine.view import Final, RunView


def _safe(text: str) -> str:
    # Model text must not be able to close our <details> early.
    return re.sub(r"</details\s*>", "&lt;/details&gt;", text, flags=re.I)


def _details(summary: str, text: str) -> list[str]:
    return [f"<details><summary>{summary}</summary>", "", _safe(text.strip()), "", "</details>"]


def render_round(spec: DebateSpec, turns: Sequence[Turn], round: int, tier: int = 0) -> str:
    """The digest comment of one round: each persona's position in a few lines,
    the full turn folded, stances per point, dropped slots with their class."""
    return _render_round(spec, replay(spec, turns), round, tier)


def render_rounds(
    spec: DebateSpec, turns: Sequence[Turn], rounds: Sequence[tuple[int, int]]
) -> list[str]:
    """``render_round`` for several (tier, round) pairs, replaying the turns once."""
    run = replay(spec, turns)
    return [_render_round(spec, run, rnd, tier) for tier, rnd in rounds]


def _render_round(spec: DebateSpec, run: RunView, round: int, tier: int) -> str:
    rec = next((r for r in run.rounds if r.tier == tier and r.round == round), None)
    phase = (
        rec.phase if rec else ("opening" if round == 1 else "rebuttal" if round == 2 else "counter")
    )
    head = f"## Round {round} of {spec.rounds} — {phase}" + (f" (tier {tier})" if tier else "")
    lines = [head, ""]
    if run.degraded:
        lines += [f"> **{DEGRADED}**", ""]
    if rec is None or not rec.turns:
        return "\n".join([*lines, "_No turns in this round yet._"]) + "\n"
    for s in run.seats:
        t = rec.turns.get(s.name)
        if t is None:
            continue
        if t.status == "dropped":
            lines += [f"### {s.name} — dropped (`{t.drop_class}`)", ""]
            continue
        checks = t.evidence.citations if t.evidence is not None else ()
        lines += [
            f"### {s.name} ({code(t.model)})",
            "",
            f"> {_safe(link_citations(run.reply(t).clipped_position(600), checks))}",
            "",
        ]
        stances = rec.ledger[s.name]
        lines.append("**Stances:**")
        for p, e in stances.items():
            reason = f" — {_safe(' '.join(e.reason.split()))}" if e.reason else ""
            implicit = "" if e.explicit else " _(no stance given)_"
            lines.append(f"- Point {p}: **{e.stance}**{reason}{implicit}")
        if t.truncated:
            lines += ["", "_This turn was cut off at the output limit._"]
        lines += ["", *_details(f"{s.name} — full turn", link_citations(t.text, checks)), ""]
    if rec.open:
        lines.append("**Still contested:** " + ", ".join(f"point {p}" for p in rec.open))
    else:
        lines.append("**Converged:** no point is contested.")
    return "\n".join(lines).rstrip() + "\n"


def render_transcript(
    spec: DebateSpec, turns: Sequence[Turn], outcome: Outcome, *, date: str, plan: str = ""
) -> str:
    """The transcript file of ``debate-bot run``."""
    run = replay(spec, turns)
    final = run.stop if isinstance(run.stop, Final) else None
    parts: Parts | None = outcome_parts(run, final) if final is not None else None
    lines = _transcript_head(spec, run, date=date, plan=plan)
    lines += _personas_table(run)
    lines += _context_section(spec)
    lines += _points_section(spec, run)
    lines += _rounds_section(run)
    lines += _votes_section(run)
    lines += ["", "---", "", "## Synthesis", ""]
    if parts is not None:
        lines += [
            parts.main.strip(),
            "",
            "## Audit",
            "",
            parts.audit.replace("### Audit\n\n", "", 1).strip(),
        ]
    else:
        lines.append(outcome.body.strip())
    return "\n".join(lines).rstrip() + "\n"


def _transcript_head(spec: DebateSpec, run: RunView, *, date: str, plan: str) -> list[str]:
    lines = [
        "# Debate Transcript",
        "",
        f"**Topic:** {spec.title}",
        f"**Plan:** {plan or '(inline)'}",
        f"**Date:** {date}",
        f"**Rounds:** {spec.rounds} (run: {len(run.rounds)})",
        f"**Mode:** {spec.mode}",
        f"**Response scale:** {spec.response_scale} ({word_budget(spec)} words max)",
    ]
    if run.degraded:
        lines.append(f"**{DEGRADED}**")
    return lines


def _personas_table(run: RunView) -> list[str]:
    lines = ["", "## Personas", "", "| Role | Name | Model |", "|------|------|-------|"]
    for s in run.seats:
        models = run.seat_models(s, 0)
        role = f"Persona {chr(ord('A') + s.index)}"
        lines.append(f"| {role} | {s.name} | {code(models[0] if models else '')} |")
    lines.append(f"| Judge | judge | {code(run.judge[0] if run.judge else '')} |")
    return lines


def _context_section(spec: DebateSpec) -> list[str]:
    """The context files, then the spec's warnings."""
    lines = ["", "## Context Files", ""]
    lines += [
        f"- {f.path} ({f.size_bytes:,} bytes)" + (" [CONDENSED]" if f.condensed else "")
        for f in spec.context_files
    ] or ["_None._"]
    if spec.warnings:
        lines += ["", "## Warnings", "", *[f"- {x}" for x in spec.warnings]]
    return lines


def _points_section(spec: DebateSpec, run: RunView) -> list[str]:
    """How the personas were picked, then the judge's points (critique, proposal)."""
    lines = [] if spec.personas else ["", f"_Personas auto-picked: {run.pair_note}._"]
    if spec.mode in ("critique", "proposal"):
        heading = "Issue Extraction" if spec.mode == "critique" else "Decision Points"
        lines += ["", "---", "", f"## {heading}", ""]
        lines += [f"{i}. {p}" for i, p in enumerate(run.points, 1)]
    return lines


def _rounds_section(run: RunView) -> list[str]:
    lines: list[str] = []
    for rec in run.rounds:
        title = f"## Round {rec.round} — {rec.phase}" + (f" (tier {rec.tier})" if rec.tier else "")
        lines += ["", "---", "", title]
        for name, t in rec.turns.items():
            lines += ["", f"### {name}", ""]
            lines.append(f"_Dropped: {t.drop_class}._" if t.status == "dropped" else t.text.strip())
    return lines


def _votes_section(run: RunView) -> list[str]:
    votes = [t for t in run.used if t.key.phase == "vote"]
    if not votes:
        return []
    lines = ["", "---", "", "## Votes"]
    for t in votes:
        lines += [
            "",
            f"### {t.key.slot}",
            "",
            t.text.strip() if t.status == "ok" else f"_Dropped: {t.drop_class}._",
        ]
    return lines
