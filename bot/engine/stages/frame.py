"""The frame stage: who debates (seats) and what about (points).

Configured personas are the seats; without any, the judge classifies the
subject and a pair is picked for it. Debate and arbitration have one fixed
point; critique and proposal runs have the judge extract the points.
"""

from __future__ import annotations

from functools import partial

from bot.engine import prompts
from bot.engine.personas import (
    ARBITRATION_PAIR,
    LENS_MAX,
    LENSES,
    Classification,
    parse_classification,
    pick_pair,
)
from bot.engine.replies import parse_numbered_list
from bot.engine.stages.inputs import Inputs
from bot.engine.text import clip
from bot.engine.types import ModelRequest, Turn, TurnKey
from bot.engine.view import RunView, Seat, evolve, noted

CLASSIFY_SLOT = "judge-classify"
EXTRACT_SLOT = "judge-issues"
MAX_ISSUES = 8

DEBATE_POINT = "The answer to the question in the title and subject: which side is right?"
ARBITRATE_POINT = (
    "The review concern identifies a real problem in this change that should be fixed."
)
CRITIQUE_FALLBACK = "The plan as a whole: is it sound as written?"
PROPOSAL_FALLBACK = "The proposal as a whole: which approach should be taken?"


def frame(run: RunView, inputs: Inputs) -> RunView:
    spec = run.spec
    keys: list[TurnKey] = []
    if not spec.personas and spec.mode != "arbitrate":
        keys.append(TurnKey("frame", 0, CLASSIFY_SLOT))
    if spec.mode in ("critique", "proposal"):
        keys.append(TurnKey("frame", 0, EXTRACT_SLOT))
    if keys:
        run, got = inputs.take(run, keys, partial(_request, inputs, run))
        if got is None:
            return run
        by_slot = {t.key.slot: t for t in got}
        run = evolve(
            run, classify_turn=by_slot.get(CLASSIFY_SLOT), extract_turn=by_slot.get(EXTRACT_SLOT)
        )
    return _points(_seats(run))


def _request(inputs: Inputs, run: RunView, key: TurnKey) -> ModelRequest:
    if key.slot == CLASSIFY_SLOT:
        return ModelRequest(key, run.judge, inputs.prompt(prompts.classify_suffix(run.spec)), 300)
    suffix = prompts.extract_suffix(run.spec, max_items=MAX_ISSUES)
    return ModelRequest(key, run.judge, inputs.prompt(suffix), 1200)


def _seats(run: RunView) -> RunView:
    spec = run.spec
    if spec.personas:
        pairs = [
            (p.name, p.perspective or LENSES.get(p.name, "An independent reviewer's judgement."))
            for p in spec.personas
        ]
        note = "configured"
    elif spec.mode == "arbitrate":
        pairs = list(ARBITRATION_PAIR)
        note = "arbitration: the concern is real vs a false positive"
    else:
        t = run.classify_turn
        c = (
            parse_classification(t.text)
            if t is not None and t.status == "ok"
            else Classification(None)
        )
        pair, note = pick_pair(c)
        run = evolve(run, classification=c)
        # Bounded again here: the owner's name and lens are the judge's output.
        pairs = [(clip(name, 40), clip(lens, LENS_MAX)) for name, lens in pair]
        if c.kind is None:
            why = _failure(t, "unparseable")
            run = noted(
                run,
                f"Persona auto-pick: the classification was {why}; "
                "two generic reviewers debate instead.",
            )
    seats = tuple(Seat(i, name, lens) for i, (name, lens) in enumerate(pairs))
    return evolve(run, seats=seats, pair_note=note)


def _points(run: RunView) -> RunView:
    spec = run.spec
    if spec.mode == "debate":
        return evolve(run, points=(DEBATE_POINT,))
    if spec.mode == "arbitrate":
        return evolve(run, points=(ARBITRATE_POINT,))
    t = run.extract_turn
    items = parse_numbered_list(t.text, max_items=MAX_ISSUES) if t and t.status == "ok" else []
    items = [clip(i, 240) for i in items]
    if items:
        return evolve(run, points=tuple(items), points_from_judge=True)
    fallback = CRITIQUE_FALLBACK if spec.mode == "critique" else PROPOSAL_FALLBACK
    what = "issue extraction" if spec.mode == "critique" else "decision-point extraction"
    return noted(
        evolve(run, points=(fallback,)),
        f"The {what} {_failure(t, 'gave no numbered list')}; the debate covers the subject "
        "as a whole.",
    )


def _failure(t: Turn | None, unusable: str) -> str:
    """Why a frame turn gave nothing to use: its drop, else ``unusable``."""
    return f"dropped ({t.drop_class})" if t is not None and t.status == "dropped" else unusable
