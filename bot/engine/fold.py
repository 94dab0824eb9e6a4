"""Replaying a run: from (spec, turns) to the ``RunView`` of where it stands.

The replay re-derives the whole state of a run from the spec and the turns
completed so far, stage by stage (``bot/engine/stages``): routing, frame,
rounds per tier, quorum, adjudication, synthesis. The first stage with a
missing turn stops the replay at the batch of the missing requests; after the
last stage the run is done. ``replay`` on a prefix of turns returns what it
returned before.

A shell asks about the same turns more than once (the next step, then the
finished rounds' digests, each a full replay): the last answers are kept, for
the very same spec and turn objects only, while the run still has steps to
take. ``replay`` is pure, so a kept answer is the answer; views are read, never
changed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from bot.core.errors import ProtocolError
from bot.engine.routing import base_models, judge_models, route
from bot.engine.stages.adjudicate import adjudicate
from bot.engine.stages.frame import frame
from bot.engine.stages.inputs import Inputs
from bot.engine.stages.rounds import rounds
from bot.engine.stages.synthesis import synthesize
from bot.engine.types import Batch, DebateSpec, Turn, is_reserved_name
from bot.engine.view import Final, RunView, evolve, noted

Stage = Callable[[RunView, Inputs], RunView]


# A worker's runs in flight at once (its default worker_concurrency): a burst's
# runs ask for their next steps together, then for their digests.
RECENT_MAX = 256
_recent: OrderedDict[int, tuple[DebateSpec, tuple[Turn, ...], RunView]] = OrderedDict()
_recent_lock = threading.Lock()


def replay(spec: DebateSpec, turns: Sequence[Turn]) -> RunView:
    """The view of the run; its ``stop`` is the next batch or the run's end."""
    with _recent_lock:
        kept = _recent.get(id(spec))
    if kept is not None and kept[0] is spec and _same(kept[1], turns):
        return kept[2]
    view = _replay(spec, turns)
    with _recent_lock:
        if not isinstance(view.stop, Batch):  # finished: not asked again step by step
            _recent.pop(id(spec), None)  # a kept spec's id is its own: it is held
            return view
        _recent[id(spec)] = (spec, tuple(turns), view)  # holding spec keeps its id unique
        _recent.move_to_end(id(spec))
        while len(_recent) > RECENT_MAX:
            _recent.popitem(last=False)
    return view


def _same(kept: tuple[Turn, ...], turns: Sequence[Turn]) -> bool:
    return len(kept) == len(turns) and all(a is b for a, b in zip(kept, turns, strict=True))


def _replay(spec: DebateSpec, turns: Sequence[Turn]) -> RunView:
    _validate(spec)
    inputs = Inputs(spec, turns)
    run = RunView(spec)
    stages: tuple[Stage, ...] = (_route, frame, rounds, _quorum, adjudicate, synthesize)
    for stage in stages:
        run = stage(run, inputs)
        if run.stop is not None:
            return run
    return evolve(run, stop=Final("done"))


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
    run = noted(evolve(run, planned={0: base}, routings={0: routing}), *routing.notes)
    if routing.abort_reason:
        return evolve(run, stop=Final("aborted", reason=routing.abort_reason))
    return run


def _quorum(run: RunView, inputs: Inputs) -> RunView:
    if len(run.live()) < 2:
        return evolve(run, stop=Final("aborted", reason="quorum_lost"))
    return run
