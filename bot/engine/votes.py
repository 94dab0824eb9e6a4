"""The vote sub-protocol of proposal stalemates, as pure functions of the view.

A stalemate's holders get labels A, B, … in ledger order (what maintainers see);
voters see the same holders shuffled with a seed from the spec, anonymized, and
a voter never votes on a point where one of the positions is its own model's.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence

from bot.engine.stances import holders
from bot.engine.text import clip
from bot.engine.types import Decision, Turn
from bot.engine.view import Labels, RoundRecord, RunView, VoteResult


def _labelled(names: Sequence[str]) -> Labels:
    return tuple((chr(ord("A") + i), h) for i, h in enumerate(names))


def stalemate_labels(last: RoundRecord) -> dict[int, Labels]:
    """The open points of the last round and who holds a position on each."""
    return {p: _labelled(holders(last.ledger, p)) for p in last.open}


def ballot_labels(run: RunView, point: int) -> Labels:
    """(label, holder) for voters: the holders shuffled with a seed from the
    spec, so labels carry no information about seat order."""
    holders_ = [h for _, h in run.stalemate_labels.get(point, ())]
    digest = hashlib.sha256(f"{run.spec.seed}:vote:{point}".encode()).digest()
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(holders_)
    return _labelled(holders_)


def voter_panel(run: RunView) -> tuple[str, ...]:
    refs = list(run.spec.voters)
    if not refs:
        refs = [run.judge[0]] if run.judge else []
        refs += [run.seat_models(s, run.tier)[0] for s in run.seats if run.seat_models(s, run.tier)]
    available = run.spec.available_providers
    out: list[str] = []
    for r in refs:
        if r and r not in out and (not available or r.split("/", 1)[0] in available):
            out.append(r)
    return tuple(out)


def holder_models(run: RunView, point: int) -> set[str]:
    models: set[str] = set()
    for _, name in run.stalemate_labels.get(point, ()):
        models.update(run.seat_models(run.seat(name), run.tier))
        t = run.latest_ok(name)
        if t is not None:
            models.add(t.model)
    return models


def voter_points(run: RunView) -> list[tuple[str, str, tuple[int, ...]]]:
    """(slot, model, points it may vote on)."""
    panel = []
    for i, ref in enumerate(voter_panel(run), 1):
        pts = tuple(p for p in run.stalemates if ref not in holder_models(run, p))
        panel.append((f"voter-{i}", ref, pts))
    return panel


def position_text(run: RunView, point: int, name: str) -> str:
    """The holder's position on ``point`` in the last round, with every persona
    and model name redacted (voters must not know whose position it is)."""
    last = run.rounds[-1]
    entry = last.ledger.get(name, {}).get(point)
    text = entry.reason if entry and entry.reason else ""
    if not text:
        t = last.turns.get(name)
        text = run.reply(t).clipped_position() if t is not None and t.status == "ok" else ""
    return _anonymize(run, text or "(no position stated)")


def _anonymize(run: RunView, text: str) -> str:
    names = {s.name for s in run.seats}
    for s in run.seats:
        for m in run.seat_models(s, run.tier):
            names.add(m)
            names.add(m.split("/", 1)[-1])
    names.update(run.judge)
    for name in sorted((n for n in names if n), key=lambda n: (-len(n), n)):
        text = re.sub(re.escape(name), "[redacted]", text, flags=re.I)
    return text


def tally(
    run: RunView, point: int, ballots: Sequence[Turn], eligible: Mapping[str, tuple[int, ...]]
) -> VoteResult:
    """Counts of the ok ballots of voters eligible on ``point``; a label is accepted
    with strictly more than ``vote_threshold`` of them and no tie at the top."""
    labels = ballot_labels(run, point)
    counts = {lb: 0 for lb, _ in labels}
    answered = 0
    for t in ballots:
        if point not in eligible[t.key.slot] or t.status != "ok":
            continue
        answered += 1
        choice = run.reply(t).votes.get(point)
        if choice in counts:
            counts[choice] += 1
    winners = [
        lb for lb, c in counts.items() if answered and c / answered > run.spec.vote_threshold
    ]
    best = max(counts.values(), default=0)
    top = [lb for lb in winners if counts[lb] == best]
    return VoteResult(
        point, labels, tuple(counts.items()), answered, top[0] if len(top) == 1 else None
    )


def decide(run: RunView) -> tuple[dict[int, Decision], list[str]]:
    """The maintainers' decisions that settle a stalemate, and a note for each
    one ignored (not a stalemate, or an unknown choice)."""
    decided: dict[int, Decision] = {}
    notes: list[str] = []
    for d in run.spec.decisions:
        labels = {lb for lb, _ in run.stalemate_labels.get(d.point, ())}
        choice = d.choice.strip()
        if d.point not in run.stalemate_labels:
            notes.append(f"A decision for point {d.point} was ignored: it is not a stalemate.")
        elif choice.lower() == "both" or choice.upper() in labels:
            decided[d.point] = Decision(
                d.point, "both" if choice.lower() == "both" else choice.upper(), d.by
            )
        else:
            notes.append(f"A decision for point {d.point} was ignored: unknown choice.")
    return decided, notes


def resolutions(run: RunView) -> list[str]:
    """How each stalemate was settled, one line each (for the synthesis and the
    proposal); a stalemate still pending has none."""
    out = []
    for p in run.stalemates:
        head = f"Point {p} ({clip(run.points[p - 1], 120)}):"
        labels = dict(run.stalemate_labels[p])
        if p in run.decided:
            d = run.decided[p]
            if d.choice == "both":
                out.append(
                    f"{head} the maintainer chose both — combine the positions of "
                    + " and ".join(labels.values())
                    + "."
                )
            else:
                who = labels[d.choice]
                out.append(
                    f"{head} the maintainer chose {who}'s position: {position_text(run, p, who)}"
                )
        elif p in run.votes:
            v = run.votes[p]
            if v.accepted is not None:
                who = dict(v.labels)[v.accepted]
                out.append(
                    f"{head} the voter panel accepted {who}'s position: "
                    f"{position_text(run, p, who)}"
                )
            else:
                out.append(
                    f"{head} no position reached the voters' acceptance threshold; "
                    "record it as an open question."
                )
    return out
