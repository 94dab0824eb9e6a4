"""The rounds stage: opening, rebuttal and counter rounds, tier after tier.

A tier's rounds stop early once nothing is contested; the run escalates to the
next tier (stronger models, with a summary of the tier before) while points stay
open, the budget allows and the tier's providers are reachable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from bot.engine import prompts
from bot.engine.routing import judge_models, max_tier, route, tier_models
from bot.engine.stages.budget import check_budget
from bot.engine.stages.inputs import Inputs
from bot.engine.stances import open_points
from bot.engine.text import clip
from bot.engine.tools import budget_for
from bot.engine.types import ModelRequest, Phase, Turn, TurnKey
from bot.engine.view import RoundRecord, RunView, evolve, noted


def rounds(run: RunView, inputs: Inputs) -> RunView:
    spec = run.spec
    top = max_tier(spec) if spec.mode != "proposal" else 0
    tier = 0
    while True:
        run = _tier(evolve(run, tier=tier), inputs, tier)
        if run.stop is not None:
            return run
        if len(run.live()) < 2 or run.capped or run.converged() or tier >= top:
            return run
        reached, run = check_budget(run)
        if reached:
            # Checked before routing or summarizing the next tier: a capped run
            # never plans (or reports) an escalation it will not run.
            return noted(
                run, f"Escalation to tier {tier + 1} was not started: the budget cap was reached."
            )
        nxt = tier + 1
        seats_models = [tier_models(spec, nxt, s.index) for s in run.seats]
        routing = route(spec, seats_models, judge_models(spec))
        run = evolve(run, planned={**run.planned, nxt: tuple(seats_models)})
        if routing.abort_reason:
            return noted(run, f"Escalation to tier {nxt} skipped: its providers are unavailable.")
        run = noted(evolve(run, routings={**run.routings, nxt: routing}), *routing.notes)
        run = evolve(run, summaries={**run.summaries, nxt: _summary(run, tier)})
        tier = nxt


def _tier(run: RunView, inputs: Inputs, tier: int) -> RunView:
    spec = run.spec
    for r in range(1, spec.rounds + 1):
        if r >= 3:
            recs = run.records(tier)
            if recs and not recs[-1].open:
                break  # converged: no crux left to counter
        phase: Phase = "opening" if r == 1 else "rebuttal" if r == 2 else "counter"
        live = run.live()
        groups = [live] if spec.turn_order == "parallel" else [[s] for s in live]
        for group in groups:
            if len(run.live()) < 2:
                return run
            keys = [TurnKey(phase, r, s.name, tier) for s in group if s.name not in run.dropped]
            reached, run = check_budget(run, ahead=len(keys))
            if reached:
                return run
            build = partial(_request, inputs, run, phase=phase, r=r)
            run, got = inputs.take(run, keys, build)
            if got is None:
                return run
            run = _record(run, tier, r, phase, got)
    return run


def _record(run: RunView, tier: int, r: int, phase: Phase, got: Sequence[Turn]) -> RunView:
    """``run`` with ``got`` added to round ``r`` of ``tier`` (created if new): the
    turns, the stances of ok turns and the points still open."""
    old = next((x for x in run.rounds if x.tier == tier and x.round == r), None)
    rec = old if old is not None else RoundRecord(tier, r, phase)
    turns = dict(rec.turns)
    ledger = dict(rec.ledger)
    dropped = dict(run.dropped)
    n = len(run.points)
    for t in got:
        turns[t.key.slot] = t
        if t.status == "dropped":
            dropped.setdefault(t.key.slot, t)
        else:
            ledger[t.key.slot] = run.reply(t).stances
    order = {s.name: s.index for s in run.seats}
    turns = dict(sorted(turns.items(), key=lambda kv: order.get(kv[0], 99)))
    ledger = dict(sorted(ledger.items(), key=lambda kv: order.get(kv[0], 99)))
    new = replace(rec, turns=turns, ledger=ledger, open=open_points(ledger, range(1, n + 1)))
    if old is None:
        return evolve(run, rounds=(*run.rounds, new), dropped=dropped)
    recs = tuple(new if x is old else x for x in run.rounds)
    return evolve(run, rounds=recs, dropped=dropped)


def _request(inputs: Inputs, run: RunView, key: TurnKey, phase: Phase, r: int) -> ModelRequest:
    spec = run.spec
    seat = run.seat(key.slot)
    others = [s for s in run.live() if s.name != seat.name]
    quoted = []
    for o in others:
        t = run.latest_ok(o.name, key.tier)
        if t is not None:
            quoted.append(prompts.QuotedTurn(o.name, t.key.round, t.text))
    own = run.latest_ok(seat.name, key.tier)
    recs = run.records(key.tier)
    words = prompts.word_budget(spec)
    view = prompts.PersonaRound(
        phase=phase,
        seat=prompts.SeatView(seat.name, seat.lens),
        seat_no=seat.index + 1,
        n_seats=len(run.seats),
        others=tuple(prompts.SeatView(o.name, o.lens) for o in others),
        points=run.points,
        round_no=r,
        rounds=spec.rounds,
        quoted=tuple(quoted),
        own_last=prompts.QuotedTurn(seat.name, own.key.round, own.text) if own else None,
        contested=recs[-1].open if recs else (),
        words=words,
        tier=key.tier,
        escalation_summary=run.summaries.get(key.tier, ""),
    )
    suffix = prompts.persona_suffix(spec, view)
    return ModelRequest(
        key,
        run.seat_models(seat, key.tier),
        inputs.prompt(suffix),
        prompts.tokens_for(words),
        tools=budget_for(spec, phase),
    )


def _summary(run: RunView, tier: int) -> str:
    recs = run.records(tier)
    last = recs[-1] if recs else None
    contested = last.open if last else ()
    lines = [f"Tier {tier} ran {len(recs)} round(s) without converging."]
    if contested:
        lines.append(
            "Still contested: "
            + "; ".join(f"point {p} ({clip(run.points[p - 1], 120)})" for p in contested)
            + "."
        )
    lines.append("Final positions:")
    for s in run.live():
        t = run.latest_ok(s.name, tier)
        said = run.reply(t).clipped_position(300) if t else "(no turn)"
        lines.append(f"- {s.name}: {said}")
    return "\n".join(lines)
