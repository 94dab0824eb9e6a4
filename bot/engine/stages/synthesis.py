"""The synthesis stage: the configured synthesizer (a persona) writes it, or the
judge when that persona is unknown, dropped or fails."""

from __future__ import annotations

from functools import partial

from bot.engine import prompts
from bot.engine.citations import unverified_lines
from bot.engine.stages.inputs import Inputs
from bot.engine.synthesis_prompt import SynthesisBrief, synthesis_suffix
from bot.engine.text import clip
from bot.engine.tools import budget_for
from bot.engine.types import JUDGE, ModelRequest, TurnKey
from bot.engine.view import RunView, evolve, noted
from bot.engine.votes import resolutions


def synthesize(run: RunView, inputs: Inputs) -> RunView:
    name = run.spec.synthesizer.strip()
    seat = None
    if name and name.lower() != JUDGE:
        seat = next((s for s in run.seats if s.name.casefold() == name.casefold()), None)
        if seat is None:
            run = noted(
                run,
                f"Synthesizer '{clip(name, 40)}' is not a persona of this run; "
                "the judge synthesized.",
            )
        elif seat.name in run.dropped:
            run = noted(run, f"Synthesizer {seat.name} was dropped; the judge synthesized.")
            seat = None
    # The persona first, if any; the judge writes it when the persona cannot.
    for slot in (seat.name, JUDGE) if seat is not None else (JUDGE,):
        key = TurnKey("synthesis", 0, slot, run.tier)
        run, got = inputs.take(run, [key], partial(_request, inputs, run))
        if got is None:
            return run
        turn = got[0]
        if turn.status == "ok":
            return evolve(run, synthesis=turn)
        if slot != JUDGE:
            why = f"Synthesizer {slot} failed ({turn.drop_class}); the judge synthesized."
            run = noted(run, why)
    return noted(
        evolve(run, synthesis_failed=turn),
        f"The synthesis could not be produced ({turn.drop_class}); "
        "this outcome is built from the stance ledger only.",
    )


def synthesis_words(run: RunView) -> int:
    spec = run.spec
    budget = prompts.word_budget(spec)
    n = len(run.points)
    if spec.mode == "critique":
        return max(600, 2 * prompts.subject_words(spec) + 80 * n)
    if spec.mode == "proposal":
        return max(600, budget + 100 * n)
    if spec.mode == "arbitrate":
        return 400
    return max(400, budget)


def ledger_lines(run: RunView) -> list[str]:
    """Each seat's stances round by round, one line per seat."""
    lines = []
    for s in run.seats:
        parts = []
        for rec in run.rounds:
            tag = f"T{rec.tier}R{rec.round}" if run.routings.keys() - {0} else f"R{rec.round}"
            t = rec.turns.get(s.name)
            if t is None:
                continue
            if t.status == "dropped":
                parts.append(f"{tag} dropped ({t.drop_class})")
            else:
                st = rec.ledger[s.name]
                parts.append(f"{tag} " + " ".join(f"{p}={e.stance}" for p, e in st.items()))
        lines.append(f"{s.name}: " + (" · ".join(parts) if parts else "(no turns)"))
    return lines


def _request(inputs: Inputs, run: RunView, key: TurnKey) -> ModelRequest:
    spec = run.spec
    finals = []
    for s in run.live():
        t = run.latest_ok(s.name)
        if t is not None:
            finals.append(prompts.QuotedTurn(s.name, t.key.round, t.text))
    words = synthesis_words(run)
    brief = SynthesisBrief(
        synthesizer=JUDGE if key.slot == JUDGE else key.slot,
        seats=tuple(prompts.SeatView(s.name, s.lens) for s in run.seats),
        points=run.points,
        ledger_lines=tuple(ledger_lines(run)),
        finals=tuple(finals),
        resolutions=tuple(resolutions(run)),
        notes=tuple(
            [n for n in run.notes if n.startswith("Budget:")]
            + [f"{name} was dropped ({t.drop_class})." for name, t in run.dropped.items()]
        ),
        words=words,
        escalation_summary=run.summaries.get(run.tier, ""),
        unverified=tuple((name, tuple(items)) for name, items in unverified_by_persona(run)),
    )
    suffix = synthesis_suffix(spec, brief)
    models = run.judge if key.slot == JUDGE else run.seat_models(run.seat(key.slot), run.tier)
    return ModelRequest(
        key,
        models,
        inputs.prompt(suffix),
        prompts.tokens_for(words),
        tools=budget_for(spec, "synthesis"),
    )


def unverified_by_persona(run: RunView) -> list[tuple[str, list[str]]]:
    """Each persona's citations that could not be verified, over all its turns."""
    out = []
    for s in run.seats:
        checks = [
            ch
            for t in run.used
            if t.key.slot == s.name and t.evidence is not None
            for ch in t.evidence.citations
        ]
        lines = list(dict.fromkeys(unverified_lines(checks)))
        if lines:
            out.append((s.name, lines))
    return out
