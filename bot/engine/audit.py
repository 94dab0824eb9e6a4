"""The audit block that ends every outcome and transcript."""

from __future__ import annotations

from collections.abc import Sequence

from bot.engine.citations import tally
from bot.engine.routing import DEGRADED
from bot.engine.types import JUDGE, ContextFile, Turn
from bot.engine.view import RunView


def code(ref: str) -> str:
    return f"`{ref.replace('`', '')}`" if ref else "`(none)`"


def answered_by(turns: list[Turn]) -> list[str]:
    out: list[str] = []
    for t in turns:
        if t.status == "ok" and t.model and t.model not in out:
            out.append(t.model)
    return out


def model_specs(configured: tuple[str, ...], answered: list[str]) -> str:
    text = code(configured[0]) if configured else "`(none)`"
    if len(configured) > 1:
        text += " (fallbacks " + ", ".join(code(m) for m in configured[1:]) + ")"
    text += "; answered by " + (", ".join(code(m) for m in answered) if answered else "no model")
    return text


def participant_lines(run: RunView) -> list[str]:
    lines = []
    for s in run.seats:
        turns = [t for t in run.used if t.key.slot == s.name]
        lines.append(f"  - {s.name}: {model_specs(run.seat_models(s, 0), answered_by(turns))}")
    judge_turns = [t for t in run.used if t.key.slot == JUDGE or t.key.slot.startswith("judge-")]
    lines.append(f"  - judge: {model_specs(run.judge, answered_by(judge_turns))}")
    voter_turns = [t for t in run.used if t.key.phase == "vote"]
    if voter_turns:
        lines.append(
            "  - voters: "
            + ", ".join(
                f"{t.key.slot} {code(t.model)}"
                + ("" if t.status == "ok" else f" (dropped: {t.drop_class})")
                for t in voter_turns
            )
        )
    return lines


def warnings(run: RunView) -> list[str]:
    out = list(run.spec.warnings)
    if run.spec.subject_truncated and not any("truncat" in x.lower() for x in out):
        out.append("The subject was truncated to fit the size limit.")
    out.extend(run.notes)
    return out


def degradation_text(run: RunView) -> str:
    if not run.degraded:
        return "none"
    why = []
    if any(r.degraded for r in run.routings.values()):
        why.append("a vendor was unavailable, so seats were moved onto a reachable one")
    runtime = run.runtime_degraded()
    if runtime:
        rounds = ", ".join(
            f"round {rec.round}" + (f" (tier {rec.tier})" if rec.tier else "") for rec, _ in runtime
        )
        vendors = sorted({v for _, v in runtime})
        why.append(
            f"at run time every persona turn of {rounds} was answered by "
            + " / ".join(code(v) for v in vendors)
            + " (model fallbacks)"
        )
    return f"{DEGRADED} — the personas were meant to run on different vendors; " + "; ".join(why)


def evidence_lines(run: RunView) -> list[str]:
    """Tool use and citation checks, when the run could read the repository."""
    if not run.spec.tools:
        return []
    t = tally(run.used)
    lines = [
        f"- **Evidence:** {t.tool_calls} tool call(s), {t.files_read} file(s) read, "
        f"{t.bytes_read:,} bytes read; citations {t.verified} verified, {t.repaired} "
        f"repaired, {t.unverified} unverified"
    ]
    if t.static_turns:
        lines.append(f"  - {t.static_turns} turn(s) answered without tools (tools refused)")
    return lines


def audit_block(run: RunView) -> str:
    spec = run.spec
    drops = [f"{_where(t)}: {t.drop_class}" for t in run.used if t.status == "dropped"]
    cut = [_where(t) for t in run.used if t.truncated]
    warn = warnings(run)
    pick = "configured" if spec.personas else f"auto-picked ({run.pair_note})"
    lines = [
        "### Audit",
        "",
        f"- **Mode:** {spec.mode} · turn order {spec.turn_order} · personas {pick}",
        "- **Participants:**",
        *participant_lines(run),
        f"- **Rounds run:** {_rounds_text(run)}",
        *_usage_lines(run.used),
        "- **Drops:** " + ("; ".join(drops) if drops else "none"),
        *(["- **Cut off at the output limit:** " + "; ".join(cut)] if cut else []),
        f"- **Degradation:** {degradation_text(run)}",
        f"- **Escalation:** {_escalation_text(run)}",
        f"- **Context files:** {_context_files_text(spec.context_files)}",
        *evidence_lines(run),
        "- **Warnings:** " + ("none" if not warn else ""),
        *[f"  - {x}" for x in warn],
    ]
    return "\n".join(lines).rstrip() + "\n"


def _where(t: Turn) -> str:
    return f"{t.key.slot} ({t.key.phase}, tier {t.key.tier} round {t.key.round})"


def _rounds_text(run: RunView) -> str:
    """Rounds run against the limit, per tier when the run escalated."""
    per_tier: dict[int, int] = {}
    for r in run.rounds:
        per_tier[r.tier] = per_tier.get(r.tier, 0) + 1
    rounds = f"{len(run.rounds)} (limit {run.spec.rounds} per tier)"
    if len(per_tier) > 1:
        rounds += " (" + "; ".join(f"tier {t}: {n}" for t, n in sorted(per_tier.items())) + ")"
    if run.rounds:
        rounds += ", converged" if run.converged() else ", not converged"
    return rounds


def _usage_lines(used: Sequence[Turn]) -> list[str]:
    inp = sum(t.usage.input_tokens for t in used)
    out = sum(t.usage.output_tokens for t in used)
    cached = sum(t.usage.cached_tokens for t in used)
    cost = sum(t.usage.cost_usd for t in used)
    seconds = sum(t.usage.latency_ms for t in used) / 1000
    return [
        f"- **Tokens:** {inp:,} input ({cached:,} cached), {out:,} output",
        f"- **Cost estimate:** ${cost:.4f}",
        f"- **Model time:** {seconds:.1f} s (sum of call latencies)",
    ]


def _escalation_text(run: RunView) -> str:
    # Only tiers that ran count: a tier planned but never started is no escalation.
    tiers = [t for t in sorted(run.routings) if t == 0 or run.records(t)]
    if len(tiers) <= 1:
        return "none"
    escalation = " → ".join(
        f"tier {t} (" + ", ".join(code(m[0]) for m in run.routings[t].seats if m) + ")"
        for t in tiers
    )
    return escalation + f"; {len(tiers) - 1} escalation(s)"


def _context_files_text(files: Sequence[ContextFile]) -> str:
    return (
        ", ".join(
            f"{code(f.path)} ({f.size_bytes:,} bytes)" + (" [CONDENSED]" if f.condensed else "")
            for f in files
        )
        or "none"
    )
