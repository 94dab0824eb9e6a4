"""Final outcomes of a run, one renderer per kind, all pure.

Bodies are markdown without any marker line (the shell adds the
``<!-- debate-bot:… -->`` marker) and end with the audit block.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.engine.audit import answered_by, audit_block, code, model_specs
from bot.engine.citations import checks_of, has_verified, link_citations, rests_on_unverified
from bot.engine.replies import (
    Arbitration,
    CritiqueSynthesis,
    DebateVerdict,
    ProposalDraft,
    ReviewSynthesis,
)
from bot.engine.routing import DEGRADED
from bot.engine.stances import stances_verdict
from bot.engine.text import clip
from bot.engine.types import JUDGE, ArbitrationVerdict, Finding, Outcome, OutcomeKind
from bot.engine.view import Final, RoundRecord, RunView
from bot.engine.votes import position_text, resolutions


@dataclass(frozen=True)
class Parts:
    kind: OutcomeKind
    title: str
    main: str  # everything above the audit block
    audit: str
    verdict: ArbitrationVerdict | None = None
    pending: tuple[int, ...] = ()
    reason: str = ""
    findings: tuple[Finding, ...] = ()


def build_outcome(run: RunView, final: Final) -> Outcome:
    p = outcome_parts(run, final)
    body = p.main.rstrip() + "\n\n" + p.audit
    return Outcome(
        kind=p.kind,
        title=p.title,
        body=body,
        verdict=p.verdict,
        pending_points=p.pending,
        reason=p.reason,
        findings=p.findings,
    )


def outcome_parts(run: RunView, final: Final) -> Parts:
    p = _outcome_parts(run, final)
    return replace(p, main=with_evidence(run, p.main)) if p.kind != "aborted" else p


def _outcome_parts(run: RunView, final: Final) -> Parts:
    audit = audit_block(run)
    if final.kind == "aborted":
        main = _aborted(run, final.reason)
        return Parts("aborted", run.spec.title, main, audit, reason=final.reason)
    if final.kind == "pending_decision":
        return Parts(
            "pending_decision",
            run.spec.title,
            _pending(run, final.pending),
            audit,
            pending=final.pending,
        )
    mode = run.spec.mode
    if mode == "debate":
        return Parts("verdict", run.spec.title, _debate(run), audit)
    if mode == "critique" and run.spec.subject_kind == "repository":
        main, findings = _design_review(run)
        return Parts("critique", run.spec.title, main, audit, findings=findings)
    if mode == "critique":
        return Parts("critique", run.spec.title, _critique(run), audit)
    if mode == "arbitrate":
        verdict, main = _arbitration(run)
        return Parts("arbitration", run.spec.title, main, audit, verdict=verdict)
    if run.synthesis is None or not run.synthesis.text.strip():
        # No synthesis, no proposal: filing a `[PROPOSAL]` issue without one would
        # publish an empty proposal.
        reason = "synthesis_failed"
        return Parts("aborted", run.spec.title, _aborted(run, reason), audit, reason=reason)
    title, main = _proposal(run)
    return Parts("proposal", title, main, audit)


# --- shared pieces -----------------------------------------------------------


def cell(text: str, n: int = 220) -> str:
    """``text`` clipped for a markdown table cell (pipes escaped)."""
    return clip(text.replace("|", "\\|"), n)


def banner(run: RunView) -> list[str]:
    lines = []
    if run.degraded:
        lines.append(
            f"> **{DEGRADED}** The personas were meant to run on different model "
            "vendors; one was unavailable, so they share a vendor."
        )
    if run.capped:
        lines.append(
            "> **Budget cap reached:** no new persona turns were started after it; "
            "the synthesis is built from the turns that exist."
        )
    return [*lines, ""] if lines else []


def phase_label(rec: RoundRecord) -> str:
    return f"{rec.round} · {rec.phase}" + (f" (tier {rec.tier})" if rec.tier else "")


def key_arguments(run: RunView) -> list[str]:
    names = [s.name for s in run.seats]
    lines = [
        "| Round | " + " | ".join(cell(n, 60) for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for rec in run.rounds:
        cells = []
        for n in names:
            t = rec.turns.get(n)
            if t is None:
                cells.append("—")
            elif t.status == "dropped":
                cells.append(f"_dropped ({t.drop_class})_")
            else:
                cells.append(cell(run.reply(t).clipped_position()))
        lines.append(f"| {phase_label(rec)} | " + " | ".join(cells) + " |")
    return lines


def final_stances(run: RunView, point: int) -> str:
    if not run.rounds:
        return "no turns"
    rec = run.rounds[-1]
    parts = []
    for name, stances in rec.ledger.items():
        e = stances[point]
        parts.append(f"{name} {e.stance}" + (f" — {cell(e.reason, 160)}" if e.reason else ""))
    return " · ".join(parts) if parts else "no stances"


def _fallback_text(run: RunView) -> str:
    if run.synthesis_failed is not None:
        why = run.synthesis_failed.drop_class
        return f"_The synthesis is unavailable ({why}); see the stance ledger._"
    return "_Not stated in the synthesis._"


# --- debate ------------------------------------------------------------------


def _debate(run: RunView) -> str:
    v = run.synthesis_as(DebateVerdict) or DebateVerdict()
    settled = list(v.settled)
    open_ = list(v.open)
    if not settled and not open_ and run.rounds:
        # Without a usable synthesis the ledger still says what is settled.
        for i, point in enumerate(run.points, 1):
            (open_ if i in run.rounds[-1].open else settled).append(
                f"{point} ({final_stances(run, i)})"
            )
    names = " vs ".join(s.name for s in run.seats)
    lines = [
        f"## Verdict: {cell(run.spec.title, 200)}",
        "",
        *banner(run),
        f"**Personas:** {names} · **Rounds:** {len(run.rounds)}",
        "",
    ]
    lines += ["### Settled", *(f"- {x}" for x in settled or ["_Nothing settled._"]), ""]
    lines += ["### Open", *(f"- {x}" for x in open_ or ["_Nothing left open._"]), ""]
    lines += ["### Call", v.call or _fallback_text(run), ""]
    lines += ["### Flip condition", v.flip or _fallback_text(run), ""]
    lines += ["### Key arguments by round", *key_arguments(run), ""]
    lines += ["### Decisive factor", v.decisive or _fallback_text(run), ""]
    return "\n".join(lines)


# --- critique ----------------------------------------------------------------


def _critique(run: RunView) -> str:
    c = run.synthesis_as(CritiqueSynthesis)
    lines = [f"## Critique: {cell(run.spec.title, 200)}", "", *banner(run), "### Issues"]
    lines += [f"{i}. {p}" for i, p in enumerate(run.points, 1)]
    lines += ["", "### Critique report"]
    if c and c.preamble:
        lines += ["", c.preamble]
    for i, p in enumerate(run.points, 1):
        lines += [
            "",
            f"#### {i}. {cell(p, 200)}",
            "",
            (c.report.get(i) if c else None) or _fallback_text(run),
            "",
            f"_Final stances:_ {final_stances(run, i)}",
        ]
    lines += ["", "### Revised plan", ""]
    if c and c.revised_plan:
        lines.append(c.revised_plan)
        if "[CHANGED]" not in c.revised_plan:
            lines += ["", "_The revised plan marks no line as `[CHANGED]`._"]
    else:
        lines.append(_fallback_text(run))
    return "\n".join(lines) + "\n"


def _design_review(run: RunView) -> tuple[str, tuple[Finding, ...]]:
    """Findings ranked by severity with the files they concern, what the design does
    well, and where the personas still disagree; then the points examined."""
    r = run.synthesis_as(ReviewSynthesis)
    title = cell(run.spec.title, 200)
    heading = title if title.lower().startswith("design review") else f"Design review: {title}"
    lines = [f"## {heading}", "", *banner(run), "### Findings"]
    if r and r.findings:
        for i, f in enumerate(r.findings, 1):
            files = ", ".join(f"`{cell(path, 120)}`" for path in f.files)
            lines.append(f"{i}. **{f.severity}** — {f.text}" + (f" ({files})" if files else ""))
    elif r is not None and run.synthesis is not None and run.synthesis.status == "ok":
        lines.append("_The panel agreed on no finding._")
    else:
        lines.append(_fallback_text(run))
    lines += ["", "### What the design does well", ""]
    lines.append((r.strengths if r else "") or "_The panel named nothing here._")
    lines += ["", "### Where the personas disagree", ""]
    lines.append((r.disagreements if r else "") or "_Nowhere: the panel settled every point._")
    lines += ["", "### Questions examined"]
    lines += [f"{i}. {cell(p, 200)} — {final_stances(run, i)}" for i, p in enumerate(run.points, 1)]
    return "\n".join(lines) + "\n", (r.findings if r else ())


# --- arbitration -------------------------------------------------------------


def arbitration_verdict(run: RunView) -> tuple[ArbitrationVerdict, str]:
    """The verdict and, when it had to be escalated, why. Never a silent default:
    an unparseable judge, personas still split, closing stances that contradict
    each other, or a judge contradicting the closing stances all give ESCALATED."""
    read = run.synthesis_as(Arbitration)
    if run.synthesis is None or read is None:
        return "ESCALATED", "the judge's synthesis is unavailable"
    judged = read.verdict
    if judged is None:
        return (
            "ESCALATED",
            "the judge's verdict could not be parsed (it must be exactly one of "
            "DISMISSED, CONFIRMED or ESCALATED)",
        )
    last = run.rounds[-1] if run.rounds else None
    if last is None or len(run.seats) < 2:
        return "ESCALATED", "no debate rounds were completed"
    if 1 in last.open:
        return "ESCALATED", "the personas did not converge: both still hold their positions"
    concern, answer = run.seats[0].name, run.seats[1].name
    s0 = last.ledger.get(concern, {}).get(1)
    s1 = last.ledger.get(answer, {}).get(1)
    if s0 is None or s1 is None:
        return "ESCALATED", "a persona has no closing stance"
    closing = f"{concern} {s0.stance}, {answer} {s1.stance}"
    panel = stances_verdict(s0.stance, s1.stance)
    if panel is None:
        return "ESCALATED", f"the closing stances contradict each other ({closing})"
    if judged != "ESCALATED" and panel != judged:
        return (
            "ESCALATED",
            f"the judge said {judged} but the closing stances ({closing}) point to {panel}",
        )
    spec = run.spec
    needs = judged != "ESCALATED" and spec.tools and spec.require_evidence
    if needs and not has_verified(run.synthesis.evidence):
        return (
            "ESCALATED",
            f"the judge said {judged} without a verified citation of the code it rests "
            "on (a verdict must cite code that checks out at the pinned commit)",
        )
    return judged, ""


def evidence_notes(run: RunView) -> list[str]:
    """One line per persona whose case rested on citations that could not be verified."""
    out = []
    for s in run.seats:
        t = run.latest_ok(s.name)
        if t is not None and rests_on_unverified(t.evidence):
            assert t.evidence is not None
            cited = ", ".join(code(c.cited) for c in t.evidence.citations[:6])
            out.append(f"{s.name}'s case rested on citations that could not be verified ({cited}).")
    return out


def with_evidence(run: RunView, main: str) -> str:
    """``main`` with every checked citation linked or marked ``(unverified)``, and a
    note for each persona whose case rested on unverified ones."""
    checks = checks_of(run.used)
    if checks:
        main = link_citations(main, checks)
    notes = evidence_notes(run)
    if notes:
        main = main.rstrip() + "\n\n### Evidence\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    return main


def _arbitration(run: RunView) -> tuple[ArbitrationVerdict, str]:
    verdict, why = arbitration_verdict(run)
    read = run.synthesis_as(Arbitration)
    conclusion = read.conclusion if read else ""
    lines = [f"**Arbitration result: {verdict}.**", "", *banner(run), "### Participants"]
    for s in run.seats:
        turns = [t for t in run.used if t.key.slot == s.name]
        lines.append(
            f"- **{s.name}** ({cell(s.lens, 160)}): "
            f"{model_specs(run.seat_models(s, 0), answered_by(turns))}"
        )
    judge_turns = [t for t in run.used if t.key.slot == JUDGE]
    lines.append(f"- **Judge**: {model_specs(run.judge, answered_by(judge_turns))}")
    arb = run.spec.arbitration
    lines += ["", "### Concern"]
    if arb is not None:
        where = code(arb.path) + (f" line {arb.line}" if arb.line is not None else "")
        who = code(arb.concern_author) + (" (bot)" if arb.concern_author_is_bot else "")
        lines += [f"By {who} on {where}:", ""]
        lines += ["> " + line for line in arb.concern.strip().splitlines()[:40]] or ["> (empty)"]
    else:
        lines += ["> " + line for line in run.spec.subject.strip().splitlines()[:40]]
    lines += ["", "### Debate summary"]
    for rec in run.rounds:
        lines += ["", f"#### Round {phase_label(rec)}"]
        for name, t in rec.turns.items():
            if t.status == "dropped":
                lines.append(f"- **{name}** — dropped ({t.drop_class})")
            else:
                stance = rec.ledger[name][1].stance
                lines.append(
                    f"- **{name}** ({code(t.model)}, {stance}): "
                    f"{cell(run.reply(t).clipped_position(), 300)}"
                )
    lines += ["", "### Conclusion", "", conclusion or _fallback_text(run)]
    if why:
        lines += ["", f"**Escalated to a human:** {why}."]
    return verdict, "\n".join(lines) + "\n"


# --- proposal ----------------------------------------------------------------


def _ledger_table(run: RunView) -> list[str]:
    names = [s.name for s in run.seats]
    lines = [
        "| # | Point | " + " | ".join(cell(n, 60) for n in names) + " | Resolution |",
        "|---|---|" + "---|" * len(names) + "---|",
    ]
    last = run.rounds[-1] if run.rounds else None
    for i, p in enumerate(run.points, 1):
        stances = []
        for n in names:
            e = last.ledger.get(n, {}).get(i) if last else None
            stances.append(e.stance if e else "—")
        lines.append(
            f"| {i} | {cell(p, 160)} | " + " | ".join(stances) + f" | {_resolution(run, i)} |"
        )
    return lines


def _resolution(run: RunView, point: int) -> str:
    if point not in run.stalemates:
        return "agreed"
    if point in run.decided:
        d = run.decided[point]
        labels = dict(run.stalemate_labels[point])
        return (
            "maintainer: both"
            if d.choice == "both"
            else f"maintainer: {d.choice} ({labels[d.choice]})"
        )
    v = run.votes.get(point)
    if v is not None:
        counts = dict(v.counts)
        if v.accepted is not None:
            who = dict(v.labels)[v.accepted]
            return f"vote: {who} ({counts[v.accepted]} of {v.answered})"
        return f"vote: no position over the threshold ({v.answered} voted)"
    return "pending"


def _proposal(run: RunView) -> tuple[str, str]:
    draft = run.synthesis_as(ProposalDraft)
    title = "[PROPOSAL] " + cell(
        (draft.title if draft and draft.title else "") or run.spec.title, 120
    )
    lines = [*banner(run)]
    if draft and draft.summary:
        lines += [draft.summary, ""]
    if draft and draft.body:
        lines += [draft.body, ""]
    elif draft and not draft.summary and run.synthesis is not None:
        # The synthesis ignored the format: its text is still the proposal.
        lines += [run.synthesis.text.strip(), ""]
    else:
        lines += [_fallback_text(run), ""]
    lines += ["### Points and final stances", "", *_ledger_table(run), ""]
    res = resolutions(run)
    if res:
        lines += ["### Stalemates", "", *[f"- {r}" for r in res], ""]
    return title, "\n".join(lines)


def _pending(run: RunView, pending: tuple[int, ...]) -> str:
    lines = [
        f"## Decision needed: {cell(run.spec.title, 200)}",
        "",
        *banner(run),
        f"The personas could not agree on {len(pending)} point(s). A maintainer can settle "
        "each one with `/debate decide <point> <A|B|both>`; the proposal is filed once every "
        "point is decided.",
        "",
    ]
    for p in pending:
        lines += [f"### Point {p}: {cell(run.points[p - 1], 200)}", ""]
        for label, name in run.stalemate_labels[p]:
            lines.append(f"- **{label}** — {name}: {cell(position_text(run, p, name), 400)}")
        lines += ["- **both** — combine the positions", ""]
    lines += ["### All points", "", *_ledger_table(run), ""]
    return "\n".join(lines)


# --- aborted -----------------------------------------------------------------

_ABORT_TEXT = {
    "quorum_lost": "Fewer than two personas were left, so the debate stopped.",
    "vendor_unavailable": "The personas were meant to run on different model vendors and at "
    "least one vendor is unavailable; the repository config does not allow a within-model "
    "debate (`on_unavailable: abort`), or no configured model is reachable.",
    "synthesis_failed": "The synthesis of the proposal could not be produced, so no "
    "`[PROPOSAL]` issue was filed. Run the debate again to retry.",
}


def _aborted(run: RunView, reason: str) -> str:
    lines = [
        "## Debate aborted",
        "",
        _ABORT_TEXT.get(reason, "The debate could not continue."),
        "",
        f"Reason: `{reason}`",
    ]
    failed = run.synthesis_failed
    if reason == "synthesis_failed" and failed is not None:
        lines += ["", f"Synthesis: {failed.key.slot} ({failed.drop_class})"]
    drops = [f"{name} ({t.drop_class})" for name, t in run.dropped.items()]
    if drops:
        lines += ["", "Dropped: " + ", ".join(drops)]
    return "\n".join(lines) + "\n"
