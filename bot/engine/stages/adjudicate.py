"""The adjudication stage (proposal mode): the stalemates of the last round go
to the voter panel (``vote_stalemates``) or wait for maintainer decisions."""

from __future__ import annotations

from functools import partial

from bot.engine import prompts
from bot.engine.stages.budget import check_budget
from bot.engine.stages.inputs import Inputs
from bot.engine.types import ModelRequest, Turn, TurnKey
from bot.engine.view import Final, RoundRecord, RunView, VoteResult, evolve, noted
from bot.engine.votes import (
    ballot_labels,
    decide,
    position_text,
    stalemate_labels,
    tally,
    voter_points,
)


def adjudicate(run: RunView, inputs: Inputs) -> RunView:
    last = run.rounds[-1] if run.rounds else None
    if run.spec.mode != "proposal" or last is None or not last.open:
        return run
    run = evolve(run, stalemates=last.open, stalemate_labels=stalemate_labels(last))
    if run.spec.vote_stalemates:
        reached, run = check_budget(run)
        if not reached:
            return _vote(run, inputs, last)
    decided, ignored = decide(run)
    run = noted(evolve(run, decided=decided), *ignored)
    pending = tuple(p for p in run.stalemates if p not in run.decided)
    if pending:
        return evolve(run, stop=Final("pending_decision", pending=pending))
    return run


def _vote(run: RunView, inputs: Inputs, last: RoundRecord) -> RunView:
    panel = voter_points(run)
    keys = [TurnKey("vote", last.round, slot, run.tier) for slot, _, pts in panel if pts]
    by_slot = {slot: (ref, pts) for slot, ref, pts in panel}
    ballots: tuple[Turn, ...] = ()
    if keys:
        build = partial(_request, inputs, run, by_slot)
        run, got = inputs.take(run, keys, build)
        if got is None:
            return run
        ballots = got
    eligible = {slot: pts for slot, (_, pts) in by_slot.items()}
    votes: dict[int, VoteResult] = {}
    for p in run.stalemates:
        if not any(p in pts for _, _, pts in panel):
            run = noted(
                run,
                f"Point {p}: no voter was eligible (each voter's model holds one of the "
                "positions); it stays open.",
            )
        votes[p] = tally(run, p, ballots, eligible)
    return evolve(run, votes=votes)


def _request(
    inputs: Inputs, run: RunView, by_slot: dict[str, tuple[str, tuple[int, ...]]], key: TurnKey
) -> ModelRequest:
    ref, pts = by_slot[key.slot]
    ballots = [
        prompts.Ballot(
            p,
            run.points[p - 1],
            tuple((lb, position_text(run, p, h)) for lb, h in ballot_labels(run, p)),
        )
        for p in pts
    ]
    return ModelRequest(key, (ref,), inputs.prompt(prompts.vote_suffix(run.spec, ballots)), 400)
