"""A turn's text is read once, when the replay takes it (``read_reply``): the
outcome, the digests and the votes read the ``Reply`` the view keeps."""

from __future__ import annotations

import inspect
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from types import CodeType, FrameType, ModuleType
from typing import Any

import pytest

from bot.engine import personas, replies, stances
from bot.engine.fold import replay
from bot.engine.outcomes import outcome_parts
from bot.engine.render import render_rounds, render_transcript
from bot.engine.replies import (
    NO_REPLY,
    Arbitration,
    CritiqueSynthesis,
    DebateVerdict,
    ProposalDraft,
    ReviewSynthesis,
    read_reply,
)
from bot.engine.types import DebateSpec, Turn, TurnKey
from bot.engine.view import Final
from testkit.harness.engine import ATLAS, BEACON, FORGE, Run, spec_for


def _parsers(*modules: ModuleType) -> frozenset[CodeType]:
    """Every function of ``modules`` that reads a ``text``."""
    return frozenset(
        f.__code__
        for m in modules
        for _, f in inspect.getmembers(m, inspect.isfunction)
        if f.__module__ == m.__name__ and "text" in inspect.signature(f).parameters
    )


PARSERS = _parsers(stances, replies, personas)


@contextmanager
def parses() -> Iterator[Counter[int]]:
    """Outermost parser calls while inside, by the ``id`` of the text parsed."""
    counts: Counter[int] = Counter()
    depth = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal depth
        if frame.f_code not in PARSERS:
            return
        if event == "call":
            if depth == 0:
                counts[id(frame.f_locals["text"])] += 1
            depth += 1
        elif event == "return":
            depth -= 1

    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)


def _once_each(counts: Counter[int], used: Sequence[Turn]) -> None:
    """Each ok turn's text parsed once (turns may share a text object), and nothing else."""
    expected = Counter(id(t.text) for t in used if t.status == "ok")
    assert counts == expected


CASES = {
    "debate": spec_for("debate"),
    "critique, auto-picked personas": spec_for("critique", personas=()),
    "design review": spec_for("critique", subject_kind="repository"),
    "arbitrate": spec_for("arbitrate"),
    "proposal, voted": spec_for("proposal", personas=(ATLAS, FORGE, BEACON), vote_stalemates=True),
    "proposal, pending": spec_for("proposal", personas=(ATLAS, FORGE, BEACON)),
}


@pytest.mark.parametrize("spec", CASES.values(), ids=CASES.keys())
def test_a_replay_reads_each_turn_once_and_rendering_reads_none(spec: DebateSpec) -> None:
    run = Run(spec)
    outcome = run.go()
    fresh = replace(spec)  # a spec of its own: the replay is not one kept from the run
    with parses() as counts:
        view = replay(fresh, run.turns)
    assert isinstance(view.stop, Final)
    _once_each(counts, view.used)
    assert {t.key for t in view.used} == set(view.replies)

    with parses() as counts:
        outcome_parts(view, view.stop)
    assert not counts

    rounds = sorted({(r.tier, r.round) for r in view.rounds})
    for render in (
        lambda s: render_rounds(s, run.turns, rounds),
        lambda s: render_transcript(s, run.turns, outcome, date="2024-05-01"),
    ):
        with parses() as counts:
            render(replace(spec))
        _once_each(counts, view.used)  # its own replay's reading, and no more


def test_a_persona_turn_reads_its_position_and_stances() -> None:
    text = "intro\n**Position:**   REST,  plainly\nPOINT 2: CONCEDE — fair\nPOINT 7: AGREE"
    r = read_reply(spec_for("debate"), Turn(TurnKey("opening", 1, "Atlas"), text, "m"), 2)
    assert r.position == "REST,  plainly"
    assert r.clipped_position() == "REST, plainly"
    assert r.clipped_position(8) == "REST, p…"
    assert [(p, e.stance, e.explicit) for p, e in r.stances.items()] == [
        (1, "HOLD", False),
        (2, "CONCEDE", True),
    ]
    assert r.votes == {} and r.synthesis is None


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        (spec_for("debate"), DebateVerdict),
        (spec_for("critique"), CritiqueSynthesis),
        (spec_for("critique", subject_kind="repository"), ReviewSynthesis),
        (spec_for("arbitrate"), Arbitration),
        (spec_for("proposal"), ProposalDraft),
    ],
)
def test_the_synthesis_is_read_in_its_modes_format(spec: DebateSpec, kind: type) -> None:
    turn = Turn(TurnKey("synthesis", 0, "judge"), "VERDICT: CONFIRMED\nCONCLUSION: real", "m")
    got = read_reply(spec, turn, 1).synthesis
    assert isinstance(got, kind)
    if isinstance(got, Arbitration):
        assert got == Arbitration("CONFIRMED", "real")


def test_ballots_dropped_and_frame_turns() -> None:
    spec = spec_for("proposal")
    ballot = Turn(TurnKey("vote", 2, "voter-1"), "VOTE 1: B\nVOTE 2: A", "m")
    assert read_reply(spec, ballot, 2).votes == {1: "B", 2: "A"}
    dropped = replace(ballot, status="dropped", drop_class="timeout")
    assert read_reply(spec, dropped, 2) is NO_REPLY
    # The frame stage reads its turns itself, into the view's points and classification.
    frame = Turn(TurnKey("frame", 0, "judge-issues"), "1. a\n2. b", "m")
    assert read_reply(spec, frame, 0) is NO_REPLY
