"""Rehearsal replies drive every mode to a real outcome, from prompt text alone."""

from __future__ import annotations

import pytest

from bot.engine import rehearsal
from bot.engine.types import Decision, PersonaSpec
from testkit.harness.engine import PLAN, Run, prompt_text, spec_for


@pytest.mark.parametrize(
    ("mode", "kw", "kind"),
    [
        ("debate", {}, "verdict"),
        ("debate", {"personas": ()}, "verdict"),
        ("debate", {"turn_order": "alternating"}, "verdict"),
        ("critique", {"personas": ()}, "critique"),
        ("critique", {}, "critique"),
        ("arbitrate", {}, "arbitration"),
        ("proposal", {}, "pending_decision"),
        ("proposal", {"vote_stalemates": True, "voters": ("mistral/v1",)}, "proposal"),
        ("proposal", {"decisions": (Decision(1, "both"),)}, "proposal"),
    ],
)
def test_full_rehearsal_run_reaches_an_outcome(mode: str, kw: dict[str, object], kind: str) -> None:
    run = Run(spec_for(mode, **kw))
    out = run.go()
    assert out.kind == kind
    assert all(t.text.startswith(rehearsal.MARK) for t in run.turns)
    assert "_Not stated in the synthesis._" not in out.body  # the judge format was parsed
    if mode == "arbitrate":
        assert out.verdict == "CONFIRMED"
    if kind == "critique":
        assert "[CHANGED]" in out.body


def test_rehearsal_is_deterministic_and_text_only() -> None:
    run = Run(spec_for("critique", personas=()))
    run.go()
    for req, turn in zip(run.requests, run.turns, strict=True):
        assert rehearsal.reply(prompt_text(req)) == turn.text


def test_rehearsal_classifies_from_subject_keywords() -> None:
    run = Run(
        spec_for("critique", personas=(), subject=PLAN + "\nThe rollout timeline and milestones.")
    )
    run.go()
    slots = {r.key.slot for r in run.requests if r.key.phase == "opening"}
    assert slots == {"Compass", "Forge"}
    run = Run(spec_for("debate", personas=(), subject="Is it good?", title="Is it good?"))
    run.go()
    assert {r.key.slot for r in run.requests if r.key.phase == "opening"} == {"Quill", "Maintainer"}


def test_rehearsal_extracts_issues_from_headings() -> None:
    run = Run(spec_for("critique"))
    out = run.go()
    assert "1. Token format — is this part sound and complete?" in out.body
    assert "3. Rollout — is this part sound and complete?" in out.body


def test_rehearsal_escalated_tier_converges() -> None:
    tiers = (("openai/a", "anthropic/b"), ("openai/c", "anthropic/d"))
    run = Run(spec_for("debate", rounds=2, tiers=tiers))
    out = run.go()
    assert {r.key.tier for r in run.requests} == {0, 1}
    assert "converged" in out.body


def test_unknown_prompt_gets_a_marked_reply() -> None:
    assert rehearsal.reply("hello").startswith("(scripted rehearsal)")


def test_proposal_three_personas_vote() -> None:
    personas = (
        PersonaSpec("A1", "x", "openai/a"),
        PersonaSpec("B2", "y", "anthropic/b"),
        PersonaSpec("C3", "z", "ollama/c"),
    )
    run = Run(spec_for("proposal", personas=personas, vote_stalemates=True))
    out = run.go()
    assert out.kind == "proposal"
    voters = [r for r in run.requests if r.key.phase == "vote"]
    assert [r.models for r in voters] == [("openai/gpt-judge",)]  # persona models hold positions
