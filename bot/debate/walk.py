"""Replaying a run: from (spec, turns) to where the run stands.

``Walker`` re-derives the whole state of a run from the spec and the turns
completed so far, stage by stage (frame, rounds per tier, votes, synthesis).
At the first stage with a missing turn it stops and exposes the missing
requests as a ``Batch``; after the last stage it exposes a ``Final``. Every
stage's requests depend only on the turns of earlier stages, so a partial
batch (a crash mid-batch) resumes with exactly the requests still missing and
``next_step`` on a prefix of turns returns what it returned before.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from bot.debate import prompts
from bot.debate.personas import (
    ARBITRATION_PAIR,
    LENS_MAX,
    LENSES,
    Classification,
    parse_classification,
    pick_pair,
)
from bot.debate.replies import parse_numbered_list, parse_votes
from bot.debate.routing import (
    Routing,
    base_models,
    judge_models,
    max_tier,
    route,
    single_vendor,
    tier_models,
)
from bot.debate.stances import StanceEntry, holders, open_points, parse_position, parse_stances
from bot.debate.types import (
    JUDGE,
    Batch,
    DebateSpec,
    Decision,
    ModelRequest,
    Phase,
    Prompt,
    Turn,
    TurnKey,
    is_reserved_name,
)
from bot.errors import ProtocolError

CLASSIFY_SLOT = "judge-classify"
EXTRACT_SLOT = "judge-issues"
MAX_ISSUES = 8

DEBATE_POINT = "The answer to the question in the title and subject: which side is right?"
ARBITRATE_POINT = (
    "The review concern identifies a real problem in this change that should be fixed."
)
CRITIQUE_FALLBACK = "The plan as a whole: is it sound as written?"
PROPOSAL_FALLBACK = "The proposal as a whole: which approach should be taken?"


@dataclass(frozen=True)
class Seat:
    index: int
    name: str
    lens: str


@dataclass
class RoundRecord:
    tier: int
    round: int
    phase: Phase
    turns: dict[str, Turn] = field(default_factory=dict)  # seat name -> turn
    ledger: dict[str, dict[int, StanceEntry]] = field(default_factory=dict)  # ok turns
    open: tuple[int, ...] = ()


@dataclass(frozen=True)
class VoteResult:
    point: int
    labels: tuple[tuple[str, str], ...]  # (label, holder seat name), label order
    counts: tuple[tuple[str, int], ...]
    answered: int  # eligible voters whose turn is ok
    accepted: str | None  # accepted label


@dataclass(frozen=True)
class Final:
    kind: Literal["aborted", "pending_decision", "done"]
    reason: str = ""
    pending: tuple[int, ...] = ()


class Walker:
    def __init__(self, spec: DebateSpec, turns: Sequence[Turn]) -> None:
        self.spec = spec
        self.by_id: dict[str, Turn] = {}
        for t in turns:
            self.by_id.setdefault(t.key.id(), t)
        self.used: list[Turn] = []
        self.seats: tuple[Seat, ...] = ()
        self.pair_note = ""
        self.classification: Classification | None = None
        self.points: tuple[str, ...] = ()
        self.points_from_judge = False
        self.classify_turn: Turn | None = None
        self.extract_turn: Turn | None = None
        self.rounds: list[RoundRecord] = []
        self.dropped: dict[str, Turn] = {}
        self.routings: dict[int, Routing] = {}
        # Per tier, each seat's configured models before routing: what the run meant
        # to use, against which the models that actually answered are checked.
        self.planned: dict[int, tuple[tuple[str, ...], ...]] = {}
        self.notes: list[str] = []
        self.capped = False
        self.tier = 0
        self.summaries: dict[int, str] = {}  # tier -> summary of the tier before it
        self.stalemates: tuple[int, ...] = ()
        self.stalemate_labels: dict[int, tuple[tuple[str, str], ...]] = {}
        self.votes: dict[int, VoteResult] = {}
        self.decided: dict[int, Decision] = {}
        self.synthesis: Turn | None = None
        self.synthesis_failed: Turn | None = None
        self.result: Batch | Final = Final("aborted", reason="internal")
        self._prefix = ""
        self._validate()
        self.result = self._run()

    # --- public views ------------------------------------------------------

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

    @property
    def judge(self) -> tuple[str, ...]:
        return self.routings[0].judge if 0 in self.routings else judge_models(self.spec)

    def seat_models(self, seat: Seat, tier: int) -> tuple[str, ...]:
        routing = self.routings.get(tier) or self.routings.get(0)
        if routing is None or seat.index >= len(routing.seats):
            return base_models(self.spec, seat.index)
        return routing.seats[seat.index]

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

    # --- validation and stages ---------------------------------------------

    def _validate(self) -> None:
        spec = self.spec
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

    def _stage(
        self, keys: Sequence[TurnKey], build: Callable[[TurnKey], ModelRequest]
    ) -> list[Turn] | None:
        missing = [k for k in keys if k.id() not in self.by_id]
        if missing:
            self.result = Batch(tuple(build(k) for k in missing))
            return None
        got = [self.by_id[k.id()] for k in keys]
        self.used.extend(got)
        return got

    def _prompt(self, suffix: str) -> Prompt:
        if not self._prefix:
            self._prefix = prompts.shared_prefix(self.spec)
        return Prompt(system=prompts.SYSTEM, prefix=self._prefix, suffix=suffix)

    def _cap_reached(self) -> bool:
        spec = self.spec
        if spec.max_tokens is not None and self.tokens_used() >= spec.max_tokens:
            reason = f"the token cap ({spec.max_tokens:,} tokens) was reached"
        elif spec.max_cost_usd is not None and self.cost_used() >= spec.max_cost_usd:
            reason = f"the cost cap (${spec.max_cost_usd:g}) was reached"
        else:
            return False
        if not self.capped:
            self.capped = True
            self.notes.append(
                f"Budget: {reason}; no new persona turns were started and the "
                "synthesis uses what exists."
            )
        return True

    # --- the run -----------------------------------------------------------

    def _run(self) -> Batch | Final:
        spec = self.spec
        n_seats = len(spec.personas) or 2
        base = [base_models(spec, i) for i in range(n_seats)]
        self.planned[0] = tuple(base)
        routing = route(spec, base, judge_models(spec))
        self.routings[0] = routing
        if routing.abort_reason:
            self.notes.extend(routing.notes)
            return Final("aborted", reason=routing.abort_reason)
        self.notes.extend(routing.notes)

        if not self._frame():
            return self.result
        if not self._rounds():
            return self.result
        if len(self.live()) < 2:
            return Final("aborted", reason="quorum_lost")
        if spec.mode == "proposal":
            stop = self._adjudicate()
            if stop is not None:
                return stop
        if not self._synthesize():
            return self.result
        return Final("done")

    # --- frame -------------------------------------------------------------

    def _frame(self) -> bool:
        spec = self.spec
        keys: list[TurnKey] = []
        if not spec.personas and spec.mode != "arbitrate":
            keys.append(TurnKey("frame", 0, CLASSIFY_SLOT))
        if spec.mode in ("critique", "proposal"):
            keys.append(TurnKey("frame", 0, EXTRACT_SLOT))
        if keys:
            got = self._stage(keys, self._frame_request)
            if got is None:
                return False
            for t in got:
                if t.key.slot == CLASSIFY_SLOT:
                    self.classify_turn = t
                else:
                    self.extract_turn = t
        self._resolve_seats()
        self._resolve_points()
        return True

    def _frame_request(self, key: TurnKey) -> ModelRequest:
        if key.slot == CLASSIFY_SLOT:
            return ModelRequest(
                key, self.judge, self._prompt(prompts.classify_suffix(self.spec)), 300
            )
        suffix = prompts.extract_suffix(self.spec, max_items=MAX_ISSUES)
        return ModelRequest(key, self.judge, self._prompt(suffix), 1200)

    def _resolve_seats(self) -> None:
        spec = self.spec
        if spec.personas:
            pairs = [
                (
                    p.name,
                    p.perspective or LENSES.get(p.name, "An independent reviewer's judgement."),
                )
                for p in spec.personas
            ]
            self.pair_note = "configured"
        elif spec.mode == "arbitrate":
            pairs = list(ARBITRATION_PAIR)
            self.pair_note = "arbitration: the concern is real vs a false positive"
        else:
            t = self.classify_turn
            c = (
                parse_classification(t.text)
                if t is not None and t.status == "ok"
                else Classification(None)
            )
            self.classification = c
            pair, self.pair_note = pick_pair(c)
            # Bounded again here: the owner's name and lens are the judge's output.
            pairs = [(_clip(name, 40), _clip(lens, LENS_MAX)) for name, lens in pair]
            if c.kind is None:
                why = (
                    f"dropped ({t.drop_class})"
                    if t is not None and t.status == "dropped"
                    else "unparseable"
                )
                self.notes.append(
                    f"Persona auto-pick: the classification was {why}; "
                    "two generic reviewers debate instead."
                )
        self.seats = tuple(Seat(i, name, lens) for i, (name, lens) in enumerate(pairs))

    def _resolve_points(self) -> None:
        spec = self.spec
        if spec.mode == "debate":
            self.points = (DEBATE_POINT,)
            return
        if spec.mode == "arbitrate":
            self.points = (ARBITRATE_POINT,)
            return
        t = self.extract_turn
        items = parse_numbered_list(t.text, max_items=MAX_ISSUES) if t and t.status == "ok" else []
        items = [_clip(i, 240) for i in items]
        if items:
            self.points = tuple(items)
            self.points_from_judge = True
            return
        self.points = (CRITIQUE_FALLBACK if spec.mode == "critique" else PROPOSAL_FALLBACK,)
        what = "issue extraction" if spec.mode == "critique" else "decision-point extraction"
        why = (
            f"dropped ({t.drop_class})"
            if t is not None and t.status == "dropped"
            else "gave no numbered list"
        )
        self.notes.append(f"The {what} {why}; the debate covers the subject as a whole.")

    # --- rounds and tiers --------------------------------------------------

    def _rounds(self) -> bool:
        top = max_tier(self.spec) if self.spec.mode != "proposal" else 0
        tier = 0
        while True:
            self.tier = tier
            if not self._tier(tier):
                return False
            if len(self.live()) < 2 or self.capped or self.converged() or tier >= top:
                return True
            if self._cap_reached():
                # Checked before routing or summarizing the next tier: a capped run
                # never plans (or reports) an escalation it will not run.
                self.notes.append(
                    f"Escalation to tier {tier + 1} was not started: the budget cap was reached."
                )
                return True
            nxt = tier + 1
            seats_models = [tier_models(self.spec, nxt, s.index) for s in self.seats]
            routing = route(self.spec, seats_models, judge_models(self.spec))
            self.planned[nxt] = tuple(seats_models)
            if routing.abort_reason:
                self.notes.append(
                    f"Escalation to tier {nxt} skipped: its providers are unavailable."
                )
                return True
            self.routings[nxt] = routing
            self.notes.extend(routing.notes)
            self.summaries[nxt] = self._summary(tier)
            tier = nxt

    def _tier(self, tier: int) -> bool:
        spec = self.spec
        for r in range(1, spec.rounds + 1):
            if r >= 3:
                recs = self.records(tier)
                if recs and not recs[-1].open:
                    break  # converged: no crux left to counter
            phase: Phase = "opening" if r == 1 else "rebuttal" if r == 2 else "counter"
            live = self.live()
            groups = [live] if spec.turn_order == "parallel" else [[s] for s in live]
            for group in groups:
                if len(self.live()) < 2:
                    return True
                if self._cap_reached():
                    return True
                group = [s for s in group if s.name not in self.dropped]
                keys = [TurnKey(phase, r, s.name, tier) for s in group]
                got = self._stage(keys, partial(self._persona_request, phase=phase, r=r))
                if got is None:
                    return False
                self._record(tier, r, phase, got)
        return True

    def _record(self, tier: int, r: int, phase: Phase, got: Sequence[Turn]) -> None:
        rec = next((x for x in self.rounds if x.tier == tier and x.round == r), None)
        if rec is None:
            rec = RoundRecord(tier, r, phase)
            self.rounds.append(rec)
        n = len(self.points)
        for t in got:
            rec.turns[t.key.slot] = t
            if t.status == "dropped":
                self.dropped.setdefault(t.key.slot, t)
            else:
                rec.ledger[t.key.slot] = parse_stances(t.text, n)
        order = {s.name: s.index for s in self.seats}
        rec.turns = dict(sorted(rec.turns.items(), key=lambda kv: order.get(kv[0], 99)))
        rec.ledger = dict(sorted(rec.ledger.items(), key=lambda kv: order.get(kv[0], 99)))
        rec.open = open_points(rec.ledger, range(1, n + 1))

    def latest_ok(self, name: str, tier: int | None = None) -> Turn | None:
        for t in reversed(self.used):
            if (
                t.key.slot == name
                and t.status == "ok"
                and t.key.phase in ("opening", "rebuttal", "counter")
                and (tier is None or t.key.tier == tier)
            ):
                return t
        return None

    def _persona_request(self, key: TurnKey, phase: Phase, r: int) -> ModelRequest:
        spec = self.spec
        seat = next(s for s in self.seats if s.name == key.slot)
        others = [s for s in self.live() if s.name != seat.name]
        quoted = []
        for o in others:
            t = self.latest_ok(o.name, key.tier)
            if t is not None:
                quoted.append(prompts.QuotedTurn(o.name, t.key.round, t.text))
        own = self.latest_ok(seat.name, key.tier)
        recs = self.records(key.tier)
        words = prompts.word_budget(spec)
        suffix = prompts.persona_suffix(
            spec=spec,
            phase=phase,
            seat=prompts.SeatView(seat.name, seat.lens),
            seat_no=seat.index + 1,
            n_seats=len(self.seats),
            others=[prompts.SeatView(o.name, o.lens) for o in others],
            points=self.points,
            round_no=r,
            rounds=spec.rounds,
            quoted=quoted,
            own_last=prompts.QuotedTurn(seat.name, own.key.round, own.text) if own else None,
            contested=recs[-1].open if recs else (),
            words=words,
            tier=key.tier,
            escalation_summary=self.summaries.get(key.tier, ""),
        )
        return ModelRequest(
            key, self.seat_models(seat, key.tier), self._prompt(suffix), prompts.tokens_for(words)
        )

    def _summary(self, tier: int) -> str:
        recs = self.records(tier)
        last = recs[-1] if recs else None
        contested = last.open if last else ()
        lines = [f"Tier {tier} ran {len(recs)} round(s) without converging."]
        if contested:
            lines.append(
                "Still contested: "
                + "; ".join(f"point {p} ({_clip(self.points[p - 1], 120)})" for p in contested)
                + "."
            )
        lines.append("Final positions:")
        for s in self.live():
            t = self.latest_ok(s.name, tier)
            lines.append(
                f"- {s.name}: {parse_position(t.text, max_chars=300) if t else '(no turn)'}"
            )
        return "\n".join(lines)

    # --- proposal adjudication ---------------------------------------------

    def _adjudicate(self) -> Batch | Final | None:
        """Stalemates of the last round go to the voter panel (``vote_stalemates``)
        or wait for maintainer decisions; returns where the run must stop, if anywhere."""
        spec = self.spec
        last = self.rounds[-1] if self.rounds else None
        if last is None or not last.open:
            return None
        self.stalemates = last.open
        for p in self.stalemates:
            hs = holders(last.ledger, p)
            self.stalemate_labels[p] = tuple((chr(ord("A") + i), h) for i, h in enumerate(hs))
        if spec.vote_stalemates and not self._cap_reached():
            return self._vote(last)
        for d in spec.decisions:
            labels = {lb for lb, _ in self.stalemate_labels.get(d.point, ())}
            choice = d.choice.strip()
            if d.point not in self.stalemate_labels:
                self.notes.append(
                    f"A decision for point {d.point} was ignored: it is not a stalemate."
                )
            elif choice.lower() == "both" or choice.upper() in labels:
                self.decided[d.point] = Decision(
                    d.point, "both" if choice.lower() == "both" else choice.upper(), d.by
                )
            else:
                self.notes.append(f"A decision for point {d.point} was ignored: unknown choice.")
        pending = tuple(p for p in self.stalemates if p not in self.decided)
        if pending:
            return Final("pending_decision", pending=pending)
        return None

    def voter_panel(self) -> tuple[str, ...]:
        refs = list(self.spec.voters)
        if not refs:
            refs = [self.judge[0]] if self.judge else []
            refs += [
                self.seat_models(s, self.tier)[0]
                for s in self.seats
                if self.seat_models(s, self.tier)
            ]
        available = self.spec.available_providers
        out: list[str] = []
        for r in refs:
            if r and r not in out and (not available or r.split("/", 1)[0] in available):
                out.append(r)
        return tuple(out)

    def holder_models(self, point: int) -> set[str]:
        models: set[str] = set()
        for _, name in self.stalemate_labels.get(point, ()):
            seat = next(s for s in self.seats if s.name == name)
            models.update(self.seat_models(seat, self.tier))
            t = self.latest_ok(name)
            if t is not None:
                models.add(t.model)
        return models

    def ballot_labels(self, point: int) -> tuple[tuple[str, str], ...]:
        """(label, holder) for voters: the holders shuffled with a seed from the
        spec, so labels carry no information about seat order."""
        holders_ = [h for _, h in self.stalemate_labels.get(point, ())]
        digest = hashlib.sha256(f"{self.spec.seed}:vote:{point}".encode()).digest()
        random.Random(int.from_bytes(digest[:8], "big")).shuffle(holders_)
        return tuple((chr(ord("A") + i), h) for i, h in enumerate(holders_))

    def position_text(self, point: int, name: str) -> str:
        last = self.rounds[-1]
        entry = last.ledger.get(name, {}).get(point)
        text = entry.reason if entry and entry.reason else ""
        if not text:
            t = last.turns.get(name)
            text = parse_position(t.text) if t is not None and t.status == "ok" else ""
        return self._anonymize(text or "(no position stated)")

    def _anonymize(self, text: str) -> str:
        names = {s.name for s in self.seats}
        for s in self.seats:
            for m in self.seat_models(s, self.tier):
                names.add(m)
                names.add(m.split("/", 1)[-1])
        names.update(self.judge)
        for name in sorted((n for n in names if n), key=lambda n: (-len(n), n)):
            text = re.sub(re.escape(name), "[redacted]", text, flags=re.I)
        return text

    def voter_points(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """(slot, model, points it may vote on): a voter never votes on a point
        where one of the positions is its own model's."""
        panel = []
        for i, ref in enumerate(self.voter_panel(), 1):
            pts = tuple(p for p in self.stalemates if ref not in self.holder_models(p))
            panel.append((f"voter-{i}", ref, pts))
        return panel

    def _vote(self, last: RoundRecord) -> Batch | None:
        panel = self.voter_points()
        keys = [TurnKey("vote", last.round, slot, self.tier) for slot, _, pts in panel if pts]
        by_slot = {slot: (ref, pts) for slot, ref, pts in panel}
        got: list[Turn] = []
        if keys:
            res = self._stage(keys, lambda k: self._vote_request(k, by_slot[k.slot]))
            if res is None:
                assert isinstance(self.result, Batch)
                return self.result
            got = res
        for p in self.stalemates:
            if not any(p in pts for _, _, pts in panel):
                self.notes.append(
                    f"Point {p}: no voter was eligible (each voter's model holds one of the "
                    "positions); it stays open."
                )
            labels = self.ballot_labels(p)
            counts = {lb: 0 for lb, _ in labels}
            answered = 0
            for t in got:
                if p not in by_slot[t.key.slot][1] or t.status != "ok":
                    continue
                answered += 1
                choice = parse_votes(t.text).get(p)
                if choice in counts:
                    counts[choice] += 1
            winners = [
                lb
                for lb, c in counts.items()
                if answered and c / answered > self.spec.vote_threshold
            ]
            best = max(counts.values(), default=0)
            top = [lb for lb in winners if counts[lb] == best]
            self.votes[p] = VoteResult(
                p, labels, tuple(counts.items()), answered, top[0] if len(top) == 1 else None
            )
        return None

    def _vote_request(self, key: TurnKey, voter: tuple[str, tuple[int, ...]]) -> ModelRequest:
        ref, pts = voter
        ballots = [
            prompts.Ballot(
                p,
                self.points[p - 1],
                tuple((lb, self.position_text(p, h)) for lb, h in self.ballot_labels(p)),
            )
            for p in pts
        ]
        return ModelRequest(key, (ref,), self._prompt(prompts.vote_suffix(self.spec, ballots)), 400)

    # --- synthesis ---------------------------------------------------------

    def _synthesize(self) -> bool:
        spec = self.spec
        name = spec.synthesizer.strip()
        seat = None
        if name and name.lower() != JUDGE:
            seat = next((s for s in self.seats if s.name.casefold() == name.casefold()), None)
            if seat is None:
                self.notes.append(
                    f"Synthesizer '{_clip(name, 40)}' is not a persona of this run; "
                    "the judge synthesized."
                )
            elif seat.name in self.dropped:
                self.notes.append(f"Synthesizer {seat.name} was dropped; the judge synthesized.")
                seat = None
        if seat is not None:
            got = self._stage(
                [TurnKey("synthesis", 0, seat.name, self.tier)], self._synthesis_request
            )
            if got is None:
                return False
            if got[0].status == "ok":
                self.synthesis = got[0]
                return True
            self.notes.append(
                f"Synthesizer {seat.name} failed ({got[0].drop_class}); the judge synthesized."
            )
        got = self._stage([TurnKey("synthesis", 0, JUDGE, self.tier)], self._synthesis_request)
        if got is None:
            return False
        if got[0].status == "ok":
            self.synthesis = got[0]
        else:
            self.synthesis_failed = got[0]
            self.notes.append(
                f"The synthesis could not be produced ({got[0].drop_class}); "
                "this outcome is built from the stance ledger only."
            )
        return True

    def synthesis_words(self) -> int:
        spec = self.spec
        budget = prompts.word_budget(spec)
        n = len(self.points)
        if spec.mode == "critique":
            return max(600, 2 * prompts.subject_words(spec) + 80 * n)
        if spec.mode == "proposal":
            return max(600, budget + 100 * n)
        if spec.mode == "arbitrate":
            return 400
        return max(400, budget)

    def ledger_lines(self) -> list[str]:
        lines = []
        for s in self.seats:
            parts = []
            for rec in self.rounds:
                tag = f"T{rec.tier}R{rec.round}" if self.routings.keys() - {0} else f"R{rec.round}"
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

    def resolutions(self) -> list[str]:
        out = []
        for p in self.stalemates:
            head = f"Point {p} ({_clip(self.points[p - 1], 120)}):"
            labels = dict(self.stalemate_labels[p])
            if p in self.decided:
                d = self.decided[p]
                if d.choice == "both":
                    out.append(
                        f"{head} the maintainer chose both — combine the positions of "
                        + " and ".join(labels.values())
                        + "."
                    )
                else:
                    who = labels[d.choice]
                    out.append(
                        f"{head} the maintainer chose {who}'s position: "
                        f"{self.position_text(p, who)}"
                    )
            elif p in self.votes:
                v = self.votes[p]
                if v.accepted is not None:
                    who = dict(v.labels)[v.accepted]
                    out.append(
                        f"{head} the voter panel accepted {who}'s position: "
                        f"{self.position_text(p, who)}"
                    )
                else:
                    out.append(
                        f"{head} no position reached the voters' acceptance threshold; "
                        "record it as an open question."
                    )
        return out

    def _synthesis_request(self, key: TurnKey) -> ModelRequest:
        spec = self.spec
        finals = []
        for s in self.live():
            t = self.latest_ok(s.name)
            if t is not None:
                finals.append(prompts.QuotedTurn(s.name, t.key.round, t.text))
        words = self.synthesis_words()
        suffix = prompts.synthesis_suffix(
            spec=spec,
            synthesizer=JUDGE if key.slot == JUDGE else key.slot,
            seats=[prompts.SeatView(s.name, s.lens) for s in self.seats],
            points=self.points,
            ledger_lines=self.ledger_lines(),
            finals=finals,
            resolutions=self.resolutions(),
            notes=[n for n in self.notes if n.startswith("Budget:")]
            + [f"{name} was dropped ({t.drop_class})." for name, t in self.dropped.items()],
            words=words,
            escalation_summary=self.summaries.get(self.tier, ""),
        )
        if key.slot == JUDGE:
            models = self.judge
        else:
            seat = next(s for s in self.seats if s.name == key.slot)
            models = self.seat_models(seat, self.tier)
        return ModelRequest(key, models, self._prompt(suffix), prompts.tokens_for(words))


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"
