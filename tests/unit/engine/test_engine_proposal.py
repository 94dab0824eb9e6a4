"""Proposal mode: ledgers, stalemates, maintainer decisions, the voter panel."""

from __future__ import annotations

import re

from bot.engine.fold import replay
from bot.engine.protocol import next_step
from bot.engine.types import Batch, Decision, ModelRequest, Outcome, PersonaSpec, Turn
from bot.engine.votes import ballot_labels, holder_models
from testkit.harness.engine import ATLAS, BEACON, FORGE, Run, drop, reply_turn, spec_for

THREE = (ATLAS, FORGE, BEACON)


def test_stalemate_pending_then_decisions_then_proposal() -> None:
    run = Run(spec_for("proposal"))
    pending = run.go()
    assert pending.kind == "pending_decision"
    assert pending.pending_points == (1,)  # the rehearsal script holds point 1 on purpose
    assert "/debate decide <point> <A|B|both>" in pending.body
    assert "**A** — Atlas:" in pending.body and "**B** — Forge:" in pending.body
    assert not any(r.key.phase == "synthesis" for r in run.requests)

    decided = run.with_spec(decisions=(Decision(1, "B", by="maintainer"),))
    out = decided.go()
    assert out.kind == "proposal"
    assert out.title.startswith("[PROPOSAL] ")
    assert "maintainer: B (Forge)" in out.body
    synth = decided.requests[-1]
    assert synth.key.phase == "synthesis"
    assert "the maintainer chose Forge's position" in synth.prompt.suffix
    # the turns of the first part were reused: only the synthesis was new
    assert len(decided.turns) == len(run.turns) + 1


def test_partial_and_invalid_decisions() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.phase in ("opening", "rebuttal", "counter"):
            return reply_turn(
                req, "POSITION: mine\nPOINT 1: HOLD — x1\nPOINT 2: HOLD — x2\nPOINT 3: AGREE"
            )
        return None

    run = Run(spec_for("proposal"), answer)
    first = run.go()
    assert first.pending_points == (1, 2)
    partial = run.with_spec(decisions=(Decision(2, "both"), Decision(1, "Z"), Decision(7, "A")))
    out = partial.go()
    assert out.kind == "pending_decision"
    assert out.pending_points == (1,)
    assert "point 1 was ignored: unknown choice" in out.body
    assert "point 7 was ignored: it is not a stalemate" in out.body
    final = partial.with_spec(decisions=(Decision(2, "both"), Decision(1, "a"))).go()
    assert final.kind == "proposal"
    assert "maintainer: both" in final.body and "maintainer: A (Atlas)" in final.body


def test_no_stalemate_goes_straight_to_proposal() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.phase == "rebuttal" and req.key.slot == "Forge":
            return reply_turn(
                req, "POSITION: fine\nPOINT 1: CONCEDE\nPOINT 2: CONCEDE\nPOINT 3: CONCEDE"
            )
        return None

    out = Run(spec_for("proposal"), answer).go()
    assert out.kind == "proposal"
    assert "| agreed |" in out.body


def _voter_run(**kw: object) -> Run:
    spec = spec_for(
        "proposal",
        personas=THREE,
        vote_stalemates=True,
        voters=("openai/gpt-a", "anthropic/claude-f", "mistral/v1", "google/v2"),
        **kw,
    )
    run = Run(spec)
    run.go()
    return run


def test_voter_panel_is_anonymous_and_never_votes_on_its_own_position() -> None:
    run = _voter_run()
    votes = [r for r in run.requests if r.key.phase == "vote"]
    assert votes, "stalemates must reach the voter panel"
    view = replay(run.spec, run.turns)
    forbidden = {
        "Atlas",
        "Forge",
        "Beacon",
        "gpt-a",
        "claude-f",
        "llama-b",
        "openai/",
        "anthropic/",
    }
    for req in votes:
        assert len(req.models) == 1
        text = req.prompt.suffix
        for word in forbidden:
            assert word.lower() not in text.lower(), (word, req.key.slot)
        voted_points = [int(p) for p in re.findall(r"^## Point (\d+):", text, re.M)]
        for p in voted_points:
            assert req.models[0] not in holder_models(view, p)
    slots = {r.key.slot: r.models[0] for r in votes}
    # gpt-a (Atlas) and claude-f (Forge) hold positions on point 1: they may not vote on it
    assert "openai/gpt-a" not in slots.values() or all(
        "## Point 1:" not in r.prompt.suffix for r in votes if r.models[0] == "openai/gpt-a"
    )
    assert {"mistral/v1", "google/v2"} <= set(slots.values())


def test_vote_labels_are_seeded_shuffles() -> None:
    def labels(seed: str) -> tuple[tuple[str, str], ...]:
        run = _voter_run(seed=seed)
        return ballot_labels(replay(run.spec, run.turns), 1)

    assert labels("run-1") == labels("run-1")
    seen = {tuple(h for _, h in labels(f"seed-{i}")) for i in range(12)}
    assert len(seen) > 1  # the order depends on the seed, not on seat order


def test_vote_outcome_and_threshold() -> None:
    run = _voter_run()
    out = next_step(run.spec, run.turns)
    assert isinstance(out, Outcome) and out.kind == "proposal"
    # every eligible rehearsal voter picks label A: accepted by all who voted
    assert re.search(r"\| vote: \w+ \((\d) of \1\) \|", out.body)

    def split(req: ModelRequest) -> Turn | None:
        if req.key.phase == "vote":
            label = "A" if req.models[0] in ("mistral/v1",) else "B"
            return reply_turn(req, f"VOTE 1: {label}")
        return None

    spec = spec_for(
        "proposal", personas=THREE, vote_stalemates=True, voters=("mistral/v1", "google/v2")
    )
    out = Run(spec, split).go()
    assert "vote: no position over the threshold (2 voted)" in out.body


def test_no_eligible_voter_is_reported() -> None:
    spec = spec_for(
        "proposal",
        vote_stalemates=True,
        voters=("openai/gpt-a",),
        personas=(ATLAS, PersonaSpec("Forge", "ship", "openai/gpt-a")),
    )
    run = Run(spec)
    out = run.go()
    assert out.kind == "proposal"
    assert not any(r.key.phase == "vote" for r in run.requests)
    assert "no voter was eligible" in out.body


def test_vote_batch_resumes_deterministically() -> None:
    run = _voter_run()
    for seen, step in run.steps:
        again = next_step(run.spec, run.turns[:seen])
        assert again == step
        if isinstance(step, Batch) and step.requests[0].key.phase == "vote":
            assert len(step.requests) >= 2


def test_failed_synthesis_aborts_instead_of_filing_an_empty_proposal() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.phase == "synthesis":
            return drop(req, "timeout")
        if req.key.phase in ("opening", "rebuttal", "counter"):
            return reply_turn(req, "POSITION: p\nPOINT 1: AGREE\nPOINT 2: AGREE\nPOINT 3: AGREE")
        return None

    run = Run(spec_for("proposal"), answer)
    out = run.go()
    assert out.kind == "aborted"
    assert out.reason == "synthesis_failed"
    assert "[PROPOSAL]" not in out.title
    assert out.body.startswith("## Debate aborted\n\nThe synthesis of the proposal could not")
    assert "no `[PROPOSAL]` issue was filed" in out.body
    assert "Synthesis: judge (timeout)" in out.body
    assert "### Audit" in out.body
    # a synthesis that ignored the format is still used as the proposal text
    loose = Run(
        spec_for("proposal"),
        lambda r: reply_turn(r, "We propose X.") if r.key.phase == "synthesis" else answer(r),
    )
    done = loose.go()
    assert done.kind == "proposal" and "We propose X." in done.body
