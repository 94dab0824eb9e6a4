"""The functional core: ``next_step(spec, turns) -> Batch | Outcome``.

Given the spec and every turn completed so far it returns the requests to run
next or the final outcome. It never calls anything, reads no clock and draws
randomness only from ``spec.seed``, so resuming a run is: load the turns, call
``next_step``, carry on.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.engine.fold import replay
from bot.engine.outcomes import build_outcome
from bot.engine.types import Batch, DebateSpec, Mode, Outcome, Turn
from bot.engine.view import Final

DEBATE_WORD_LIMIT = 50


def choose_mode(text: str) -> Mode:
    """The 50-word rule: a short question is debated, a longer text critiqued."""
    return "debate" if len(text.split()) < DEBATE_WORD_LIMIT else "critique"


def next_step(spec: DebateSpec, turns: Sequence[Turn]) -> Batch | Outcome:
    run = replay(spec, turns)
    if isinstance(run.stop, Final):
        return build_outcome(run, run.stop)
    assert isinstance(run.stop, Batch), "a replay always ends stopped"
    return run.stop
