"""replay keeps its last answers: the same spec and turn objects are not replayed
twice, anything else is; a run driven as the worker drives it (the next step,
then the finished rounds' digests) replays once per step; a finished run's view
is not kept."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import anyio
import pytest

from bot.engine import fold
from bot.engine.render import render_rounds
from bot.engine.types import Batch, DebateSpec, ModelRequest, Outcome, Turn
from bot.engine.view import RunView, evolve
from bot.run.execute import NoHooks, execute
from bot.service.worker.driver import persona_rounds
from testkit.harness.engine import Run, rehearse, spec_for


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of turns of each full replay, from a cleared memory."""
    monkeypatch.setattr(fold, "_recent", type(fold._recent)())
    counted: list[int] = []
    real = fold._replay

    def counting(spec: DebateSpec, turns: Sequence[Turn]) -> RunView:
        counted.append(len(turns))
        return real(spec, turns)

    monkeypatch.setattr(fold, "_replay", counting)
    return counted


def test_the_same_spec_and_turns_get_the_kept_view(replays: list[int]) -> None:
    run = Run(spec_for("debate"))
    run.go()
    replays.clear()
    turns = list(run.turns[:4])
    first = fold.replay(run.spec, turns)
    assert fold.replay(run.spec, tuple(turns)) is first  # a list or a tuple of them
    assert replays == [4]

    copies = [replace(t) for t in turns]  # equal turns, other objects: replayed
    again = fold.replay(run.spec, copies)
    assert again is not first and again == first
    assert fold.replay(replace(run.spec), turns) == first  # an equal spec: replayed
    assert fold.replay(run.spec, turns[:3]).stop != first.stop  # a prefix: replayed
    assert replays == [4, 4, 4, 3]


def test_the_memory_is_bounded(replays: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fold, "RECENT_MAX", 3)
    specs = [spec_for("debate", seed=f"run-{i}") for i in range(5)]
    for spec in specs:
        fold.replay(spec, [])
    assert len(fold._recent) == 3
    fold.replay(specs[0], [])  # forgotten: replayed again
    fold.replay(specs[4], [])  # kept
    assert len(replays) == 6


class Digests(NoHooks):
    """The worker's side work: each step renders the rounds finished before it."""

    def __init__(self, spec: DebateSpec) -> None:
        self.spec = spec
        self.posted: list[str] = []

    async def alongside(self, finished: Sequence[Turn], step: Batch | Outcome) -> None:
        pairs = persona_rounds(finished)
        self.posted.extend(render_rounds(self.spec, finished, pairs))


class Rehearsed:
    async def complete(self, request: ModelRequest) -> Turn:
        return rehearse(request)


def test_a_run_driven_with_its_digests_replays_once_per_step(replays: list[int]) -> None:
    spec = spec_for("debate")
    steps = Run(spec_for("debate"))
    steps.go()
    replays.clear()
    hooks = Digests(spec)

    async def drive() -> Outcome:
        return await execute(spec, [], models=Rehearsed(), hooks=hooks)

    outcome = anyio.run(drive)
    assert outcome.kind == "verdict" and len(hooks.posted) == 1 + 2 + 3 + 3  # rounds so far
    # One replay per step, but for the last, whose finished view is not kept: a
    # finished run is not asked about step by step (without the memory, 10).
    assert len(steps.steps) == 5 and len(replays) == 5 + 1
    assert id(spec) not in fold._recent


def test_evolve_is_replace_without_the_init() -> None:
    view = RunView(spec_for("debate"), pair_note="a", tier=1)
    assert evolve(view, pair_note="b") == replace(view, pair_note="b")
    assert view.pair_note == "a"
    with pytest.raises(TypeError, match="no field 'pair_notes'"):
        evolve(view, pair_notes="b")
