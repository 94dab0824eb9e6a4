"""Replaying a run: from (spec, turns) to the ``RunView`` of where it stands.

The replay re-derives the whole state of a run from the spec and the turns
completed so far, stage by stage (``bot/debate/stages``): routing, frame,
rounds per tier, quorum, adjudication, synthesis. The first stage with a
missing turn stops the replay at the batch of the missing requests; after the
last stage the run is done. ``replay`` on a prefix of turns returns what it
returned before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from bot.debate.routing import base_models, judge_models, route
from bot.debate.stages.adjudicate import adjudicate
from bot.debate.stages.frame import frame
from bot.debate.stages.inputs import Inputs
from bot.debate.stages.rounds import rounds
from bot.debate.stages.synthesis import synthesize
from bot.debate.types import DebateSpec, Turn, is_reserved_name
from bot.debate.view import Final, RunView, noted
from bot.errors import ProtocolError

Stage = Callable[[RunView, Inputs], RunView]


def replay(spec: DebateSpec, turns: Sequence[Turn]) -> RunView:
    """The view of the run; its ``stop`` is the next batch or the run's end."""
    _validate(spec)
    inputs = Inputs(spec, turns)
    run = RunView(spec)
    stages: tuple[Stage, ...] = (_route, frame, rounds, _quorum, adjudicate, synthesize)
    for stage in stages:
        run = stage(run, inputs)
        if run.stop is not None:
            return run
    return replace(run, stop=Final("done"))


def _validate(spec: DebateSpec) -> None:
    n = len(spec.personas)
    if n and spec.mode != "proposal" and n != 2:
        raise ProtocolError(f"{spec.mode} mode needs exactly 2 personas, got {n}")
    if n == 1:
        raise ProtocolError("proposal mode needs 2 or more personas, got 1")
    names = [p.name.casefold() for p in spec.personas]
    if len(set(names)) != len(names):
        raise ProtocolError("persona names must be unique")
    if any(is_reserved_name(p.name) or not p.name.strip() for p in spec.personas):
        raise ProtocolError("persona names 'judge', 'judge-*' and 'voter-<n>' are reserved")
    if spec.rounds < 1:
        raise ProtocolError("rounds must be at least 1")
    if not judge_models(spec):
        raise ProtocolError("no model configured for the judge or the personas")


def _route(run: RunView, inputs: Inputs) -> RunView:
    """Tier 0's models per seat, moved onto reachable vendors (or the run aborted)."""
    spec = run.spec
    base = tuple(base_models(spec, i) for i in range(len(spec.personas) or 2))
    routing = route(spec, base, judge_models(spec))
    run = noted(replace(run, planned={0: base}, routings={0: routing}), *routing.notes)
    if routing.abort_reason:
        return replace(run, stop=Final("aborted", reason=routing.abort_reason))
    return run


def _quorum(run: RunView, inputs: Inputs) -> RunView:
    if len(run.live()) < 2:
        return replace(run, stop=Final("aborted", reason="quorum_lost"))
    return run
