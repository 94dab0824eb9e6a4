"""Where a run stands: the frozen view the replay produces and everything else reads.

``replay(spec, turns)`` (``bot/engine/fold.py``) builds a ``RunView`` stage by
stage; outcomes, the audit block and the renderers only read it. ``stop`` is the
one answer to "did the run stop, and why": the batch of requests still missing,
or the run's end (``Final``). It is ``None`` only inside the replay, between
stages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeVar

from bot.engine.personas import Classification
from bot.engine.replies import Reply
from bot.engine.routing import Routing, base_models, judge_models, single_vendor
from bot.engine.stances import StanceEntry
from bot.engine.types import PERSONA_PHASES, Batch, DebateSpec, Decision, Phase, Turn, TurnKey

S = TypeVar("S")
Labels = tuple[tuple[str, str], ...]  # (label, holder seat name), label order


@dataclass(frozen=True)
class Seat:
    index: int
    name: str
    lens: str


@dataclass(frozen=True)
class RoundRecord:
    tier: int
    round: int
    phase: Phase
    turns: Mapping[str, Turn] = field(default_factory=dict)  # seat name -> turn
    ledger: Mapping[str, Mapping[int, StanceEntry]] = field(default_factory=dict)  # ok turns
    open: tuple[int, ...] = ()


@dataclass(frozen=True)
class VoteResult:
    point: int
    labels: Labels
    counts: tuple[tuple[str, int], ...]
    answered: int  # eligible voters whose turn is ok
    accepted: str | None  # accepted label


@dataclass(frozen=True)
class Final:
    kind: Literal["aborted", "pending_decision", "done"]
    reason: str = ""
    pending: tuple[int, ...] = ()


@dataclass(frozen=True)
class RunView:
    spec: DebateSpec
    used: tuple[Turn, ...] = ()  # turns the replay consumed, in stage order
    replies: Mapping[TurnKey, Reply] = field(default_factory=dict)  # what each used turn says
    seats: tuple[Seat, ...] = ()
    pair_note: str = ""
    classification: Classification | None = None
    points: tuple[str, ...] = ()
    points_from_judge: bool = False
    classify_turn: Turn | None = None
    extract_turn: Turn | None = None
    rounds: tuple[RoundRecord, ...] = ()
    dropped: Mapping[str, Turn] = field(default_factory=dict)  # seat name -> first drop
    routings: Mapping[int, Routing] = field(default_factory=dict)  # tier -> routing
    # Per tier, each seat's configured models before routing: what the run meant
    # to use, against which the models that actually answered are checked.
    planned: Mapping[int, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    capped: bool = False
    tier: int = 0
    summaries: Mapping[int, str] = field(default_factory=dict)  # tier -> the tier before it
    stalemates: tuple[int, ...] = ()
    stalemate_labels: Mapping[int, Labels] = field(default_factory=dict)
    votes: Mapping[int, VoteResult] = field(default_factory=dict)
    decided: Mapping[int, Decision] = field(default_factory=dict)
    synthesis: Turn | None = None
    synthesis_failed: Turn | None = None
    stop: Batch | Final | None = None

    @property
    def degraded(self) -> bool:
        """Within-model debate: a vendor was unavailable before the run (routing),
        or fallbacks put every persona turn of a round on one vendor at run time."""
        return any(r.degraded for r in self.routings.values()) or bool(self.runtime_degraded())

    def runtime_degraded(self) -> list[tuple[RoundRecord, str]]:
        """Rounds whose ok persona turns were meant for two or more vendors (their
        seats' primary models) but were all answered by one, with that vendor."""
        out = []
        for rec in self.rounds:
            routing = self.routings.get(rec.tier)
            if routing is not None and routing.degraded:
                continue  # already degraded by routing, and reported as such
            planned = self.planned.get(rec.tier, ())
            index = {s.name: s.index for s in self.seats}
            meant: list[str] = []
            answered: list[str] = []
            for name, t in rec.turns.items():
                i = index.get(name)
                if t.status != "ok" or i is None or i >= len(planned) or not planned[i]:
                    continue
                meant.append(planned[i][0])
                answered.append(t.model)
            vendor = single_vendor(meant, answered)
            if vendor:
                out.append((rec, vendor))
        return out

    def reply(self, turn: Turn) -> Reply:
        """What ``turn`` (one this view used) says."""
        return self.replies[turn.key]

    def synthesis_as(self, kind: type[S]) -> S | None:
        """The synthesis as read for the run's mode; ``None`` when there is none
        (or it is not a ``kind``)."""
        if self.synthesis is None:
            return None
        read = self.replies[self.synthesis.key].synthesis
        return read if isinstance(read, kind) else None

    @property
    def judge(self) -> tuple[str, ...]:
        return self.routings[0].judge if 0 in self.routings else judge_models(self.spec)

    def seat_models(self, seat: Seat, tier: int) -> tuple[str, ...]:
        routing = self.routings.get(tier) or self.routings.get(0)
        if routing is None or seat.index >= len(routing.seats):
            return base_models(self.spec, seat.index)
        return routing.seats[seat.index]

    def seat(self, name: str) -> Seat:
        return next(s for s in self.seats if s.name == name)

    def live(self) -> list[Seat]:
        return [s for s in self.seats if s.name not in self.dropped]

    def records(self, tier: int) -> list[RoundRecord]:
        return [r for r in self.rounds if r.tier == tier]

    def tokens_used(self) -> int:
        return sum(t.usage.input_tokens + t.usage.output_tokens for t in self.used)

    def cost_used(self) -> float:
        return sum(t.usage.cost_usd for t in self.used)

    def converged(self) -> bool:
        last = self.rounds[-1] if self.rounds else None
        return last is not None and len(last.ledger) >= 2 and not last.open

    def latest_ok(self, name: str, tier: int | None = None) -> Turn | None:
        """The seat's last usable debate turn (in ``tier``, or in any)."""
        for t in reversed(self.used):
            if (
                t.key.slot == name
                and t.status == "ok"
                and t.key.phase in PERSONA_PHASES
                and (tier is None or t.key.tier == tier)
            ):
                return t
        return None


def evolve(run: RunView, **changes: Any) -> RunView:
    """``dataclasses.replace(run, **changes)`` without re-running the frozen
    ``__init__`` (26 fields set one ``object.__setattr__`` at a time): a replay
    copies its view some twenty times, and ``replace`` was a third of its cost.
    ``RunView`` has no ``__post_init__``, so the result is the same."""
    unknown = changes.keys() - _RUN_VIEW_FIELDS
    if unknown:
        raise TypeError(f"RunView has no field {sorted(unknown)[0]!r}")
    new = object.__new__(RunView)
    new.__dict__.update(run.__dict__, **changes)
    return new


_RUN_VIEW_FIELDS = frozenset(f.name for f in fields(RunView))


def noted(run: RunView, *notes: str) -> RunView:
    """``run`` with ``notes`` added to what the audit block reports."""
    return evolve(run, notes=(*run.notes, *notes)) if notes else run
