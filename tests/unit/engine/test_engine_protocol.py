"""next_step: phases, batch shapes, convergence, resume, drops, caps, routing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.core.errors import ProtocolError
from bot.engine import rehearsal
from bot.engine.protocol import choose_mode, next_step
from bot.engine.render import render_round, render_transcript
from bot.engine.types import JUDGE, Batch, ModelRequest, Outcome, PersonaSpec, Turn, Usage
from testkit.harness.engine import (
    ATLAS,
    BEACON,
    FORGE,
    Run,
    drop,
    phases,
    prompt_text,
    reply_turn,
    spec_for,
    stance_reply,
)


def test_choose_mode_fifty_word_rule() -> None:
    assert choose_mode(" ".join(["w"] * 49)) == "debate"
    assert choose_mode(" ".join(["w"] * 50)) == "critique"
    assert choose_mode("") == "debate"


def test_debate_with_configured_personas_starts_with_parallel_opening() -> None:
    spec = spec_for("debate")
    step = next_step(spec, [])
    assert isinstance(step, Batch)
    assert phases(step.requests) == ["t0:opening:1:Atlas", "t0:opening:1:Forge"]
    assert step.requests[0].models == ("openai/gpt-a", "openai/gpt-a-mini")  # primary, fallbacks
    assert step.requests[1].models == ("anthropic/claude-f",)
    assert all(r.max_output_tokens > 200 for r in step.requests)


def test_full_debate_run_phase_sequence() -> None:
    run = Run(spec_for("debate"))
    out = run.go()
    assert out.kind == "verdict"
    seq = [phases(b.requests) for b in run.batches]
    assert seq == [
        ["t0:opening:1:Atlas", "t0:opening:1:Forge"],
        ["t0:rebuttal:2:Atlas", "t0:rebuttal:2:Forge"],
        ["t0:counter:3:Atlas", "t0:counter:3:Forge"],
        ["t0:synthesis:0:judge"],
    ]
    assert run.batches[-1].requests[0].models == ("openai/gpt-judge",)


def test_rebuttal_asks_for_steelman_and_quotes_opponent() -> None:
    run = Run(spec_for("debate"))
    run.go()
    rebuttal = run.batches[1].requests[0]
    assert "steelman" in rebuttal.prompt.suffix.lower()
    opening_forge = next(t for t in run.turns if t.key.id() == "t0:opening:1:Forge")
    assert opening_forge.text.strip() in rebuttal.prompt.suffix


def test_converged_after_rebuttal_skips_counter_rounds() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.phase == "rebuttal" and req.key.slot == "Forge":
            return reply_turn(req, stance_reply(1, "CONCEDE"))
        if req.key.phase in ("opening", "rebuttal"):
            return reply_turn(req, stance_reply(1, "HOLD"))
        return None

    run = Run(spec_for("debate", rounds=5), answer)
    out = run.go()
    assert [b.requests[0].key.phase for b in run.batches] == ["opening", "rebuttal", "synthesis"]
    assert "converged" in out.body


def test_counter_rounds_run_while_crux_open_up_to_limit() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.phase == "synthesis":
            return None
        return reply_turn(req, stance_reply(1, "HOLD"))

    run = Run(spec_for("debate", rounds=5), answer)
    out = run.go()
    rounds = [
        b.requests[0].key.round for b in run.batches if b.requests[0].key.phase != "synthesis"
    ]
    assert rounds == [1, 2, 3, 4, 5]
    assert "not converged" in out.body
    counter = run.batches[3].requests[0]
    assert "Contested points: 1." in counter.prompt.suffix


def test_alternating_batches_and_visibility() -> None:
    run = Run(spec_for("debate", turn_order="alternating"))
    run.go()
    shapes = [phases(b.requests) for b in run.batches]
    assert shapes[:4] == [
        ["t0:opening:1:Atlas"],
        ["t0:opening:1:Forge"],
        ["t0:rebuttal:2:Atlas"],
        ["t0:rebuttal:2:Forge"],
    ]
    a_open = next(t for t in run.turns if t.key.id() == "t0:opening:1:Atlas")
    b_open_req = run.batches[1].requests[0]
    assert a_open.text.strip() in b_open_req.prompt.suffix  # B sees A's turn of the same round
    b_rebut_req = run.batches[3].requests[0]
    a_rebut = next(t for t in run.turns if t.key.id() == "t0:rebuttal:2:Atlas")
    assert a_rebut.text.strip() in b_rebut_req.prompt.suffix


def test_parallel_personas_do_not_see_each_other_within_a_batch() -> None:
    run = Run(spec_for("debate"))
    run.go()
    opening = run.batches[0].requests
    assert all("latest turn" not in r.prompt.suffix for r in opening)
    rebuttal = run.batches[1].requests
    forge_rebuttal = next(t for t in run.turns if t.key.id() == "t0:rebuttal:2:Forge")
    assert forge_rebuttal.text.strip() not in rebuttal[0].prompt.suffix


@pytest.mark.parametrize("mode", ["debate", "critique", "arbitrate", "proposal"])
def test_resume_on_any_prefix_is_deterministic(mode: str) -> None:
    run = Run(spec_for(mode, personas=() if mode != "proposal" else (ATLAS, FORGE)))
    run.go()
    for seen, step in run.steps:
        assert next_step(run.spec, run.turns[:seen]) == step


def test_partial_batch_resumes_only_missing_requests() -> None:
    run = Run(spec_for("debate"))
    run.go()
    full = run.batches[1]  # rebuttal, two requests
    before = sum(len(b.requests) for b in run.batches[:1])
    turns = run.turns[: before + 1]  # Atlas's rebuttal persisted, Forge's lost in a crash
    again = next_step(run.spec, turns)
    assert isinstance(again, Batch)
    assert again.requests == full.requests[1:]


def test_auto_pick_classification_frame() -> None:
    spec = spec_for("debate", personas=(), default_models=("openai/m1", "anthropic/m2"))
    first = next_step(spec, [])
    assert isinstance(first, Batch)
    assert phases(first.requests) == ["t0:frame:0:judge-classify"]
    req = first.requests[0]
    assert req.models == ("openai/gpt-judge",)
    assert "TASK: classify" in req.prompt.suffix

    def with_reply(text: str) -> Batch:
        step = next_step(spec, [reply_turn(req, text)])
        assert isinstance(step, Batch)
        return step

    step = with_reply("ARTIFACT: result\nWHY: a claimed speedup")
    assert [r.key.slot for r in step.requests] == ["Gauge", "Vera"]
    assert [r.models for r in step.requests] == [("openai/m1",), ("anthropic/m2",)]
    step = with_reply("ARTIFACT: none\nOWNER: Maintainer — defends the roadmap")
    assert [r.key.slot for r in step.requests] == ["Quill", "Maintainer"]
    assert "defends the roadmap" in step.requests[1].prompt.suffix
    step = with_reply("I refuse to classify this.")
    assert [r.key.slot for r in step.requests] == ["Feasibility Reviewer", "Risk Reviewer"]


def test_classification_failure_is_noted_in_outcome() -> None:
    spec = spec_for("debate", personas=())

    def answer(req: ModelRequest) -> Turn | None:
        return drop(req, "provider_error") if req.key.slot == "judge-classify" else None

    out = Run(spec, answer).go()
    assert out.kind == "verdict"
    assert "Feasibility Reviewer" in out.body
    assert "classification was dropped (provider_error)" in out.body


def test_critique_frame_batches_classification_and_extraction_together() -> None:
    spec = spec_for("critique", personas=())
    first = next_step(spec, [])
    assert isinstance(first, Batch)
    assert phases(first.requests) == ["t0:frame:0:judge-classify", "t0:frame:0:judge-issues"]
    with_personas = next_step(spec_for("critique"), [])
    assert isinstance(with_personas, Batch)
    assert phases(with_personas.requests) == ["t0:frame:0:judge-issues"]


def test_arbitrate_needs_no_frame() -> None:
    step = next_step(spec_for("arbitrate"), [])
    assert isinstance(step, Batch)
    assert phases(step.requests) == ["t0:opening:1:Sentry", "t0:opening:1:Author"]


def test_drop_below_quorum_aborts() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        return drop(req, "rate_limited") if req.key.id() == "t0:rebuttal:2:Forge" else None

    run = Run(spec_for("debate"), answer)
    out = run.go()
    assert out.kind == "aborted"
    assert out.reason == "quorum_lost"
    assert "Forge (rate_limited)" in out.body
    assert not any(r.key.phase == "synthesis" for r in run.requests)


def test_dropped_persona_leaves_the_run_but_quorum_holds() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        return drop(req, "timeout") if req.key.id() == "t0:opening:1:Beacon" else None

    run = Run(spec_for("proposal", personas=(ATLAS, FORGE, BEACON), vote_stalemates=True), answer)
    out = run.go()
    assert out.kind == "proposal"
    later = [r for r in run.requests if r.key.slot == "Beacon" and r.key.phase != "opening"]
    assert later == []
    assert "Beacon (opening, tier 0 round 1): timeout" in out.body
    digest = render_round(run.spec, run.turns, 1)
    assert "Beacon — dropped (`timeout`)" in digest


def test_degradation_downgrade_rewrites_and_marks_every_output() -> None:
    spec = spec_for("debate", available_providers=frozenset({"openai"}))
    run = Run(spec)
    out = run.go()
    forge = [r for r in run.requests if r.key.slot == "Forge"]
    assert forge and all(r.models == ("openai/gpt-a",) for r in forge)
    assert "[DEGRADED: within-model debate]" in out.body
    for n in (1, 2, 3):
        assert "[DEGRADED: within-model debate]" in render_round(spec, run.turns, n)


def test_degradation_abort_stops_before_any_request() -> None:
    spec = spec_for("debate", available_providers=frozenset({"openai"}), on_unavailable="abort")
    out = next_step(spec, [])
    assert isinstance(out, Outcome)
    assert out.kind == "aborted"
    assert out.reason == "vendor_unavailable"
    assert "Traceback" not in out.body


def test_available_fallback_is_used_and_same_vendor_is_not_degraded() -> None:
    both = PersonaSpec("Forge", "ship", "anthropic/claude-f", ("openai/gpt-f",))
    spec = spec_for("debate", personas=(ATLAS, both), available_providers=frozenset({"openai"}))
    step = next_step(spec, [])
    assert isinstance(step, Batch)
    assert step.requests[1].models == ("openai/gpt-f",)
    # vendors were meant to differ and now share one: degraded even via a fallback
    out = Run(spec).go()
    assert "[DEGRADED" in out.body
    same = spec_for(
        "debate",
        personas=(ATLAS, PersonaSpec("Forge", "x", "openai/gpt-f")),
        available_providers=frozenset({"openai"}),
    )
    assert "[DEGRADED" not in Run(same).go().body


def test_escalation_over_tiers_at_most_twice() -> None:
    tiers = (
        ("openai/t0a", "anthropic/t0b"),
        ("openai/t1a", "anthropic/t1b"),
        ("openai/t2a", "anthropic/t2b"),
        ("openai/t3a", "anthropic/t3b"),
    )

    def answer(req: ModelRequest) -> Turn | None:
        if req.key.phase == "synthesis":
            return None
        return reply_turn(req, stance_reply(1, "HOLD", position=f"tier {req.key.tier} view"))

    run = Run(spec_for("debate", rounds=2, tiers=tiers), answer)
    out = run.go()
    used_tiers = sorted({r.key.tier for r in run.requests})
    assert used_tiers == [0, 1, 2]
    t1 = [r for r in run.requests if r.key.tier == 1 and r.key.phase == "opening"]
    assert [r.models[0] for r in t1] == ["openai/t1a", "anthropic/t1b"]
    assert "Previous tier (did not converge)" in t1[0].prompt.suffix
    assert "tier 0 view" in t1[0].prompt.suffix
    assert "2 escalation(s)" in out.body
    assert run.requests[-1].key.id() == "t2:synthesis:0:judge"


def test_no_escalation_when_converged() -> None:
    tiers = (("openai/a", "anthropic/b"), ("openai/c", "anthropic/d"))
    run = Run(spec_for("debate", tiers=tiers))
    out = run.go()
    assert {r.key.tier for r in run.requests} == {0}
    assert "**Escalation:** none" in out.body


def test_token_cap_goes_to_synthesis_and_says_so() -> None:
    run = Run(spec_for("debate", max_tokens=2000))  # each turn uses 1,200 tokens
    out = run.go()
    kinds = [b.requests[0].key.phase for b in run.batches]
    assert kinds == ["opening", "synthesis"]
    assert "Budget cap reached" in out.body
    assert "token cap (2,000 tokens)" in out.body
    synth = run.batches[-1].requests[0]
    assert "Budget:" in synth.prompt.suffix


def test_cost_cap() -> None:
    run = Run(spec_for("debate", max_cost_usd=0.02))  # 0.01 per turn
    out = run.go()
    assert [b.requests[0].key.phase for b in run.batches] == ["opening", "synthesis"]
    assert "cost cap ($0.02) was reached;" in out.body


def test_the_cost_cap_stops_before_a_round_that_would_pass_it() -> None:
    # 0.01 per turn: the rebuttal (0.02 + 0.02) fits 0.045, the counter round would not.
    run = Run(spec_for("debate", max_cost_usd=0.045))
    out = run.go()
    assert [b.requests[0].key.phase for b in run.batches] == ["opening", "rebuttal", "synthesis"]
    assert "cost cap ($0.045) was reached: $0.0400 is spent and the next turns" in out.body
    synth = run.batches[-1].requests[0]
    assert "Budget: the cost cap ($0.045)" in synth.prompt.suffix


def test_persona_synthesizer_and_fallback_to_judge() -> None:
    run = Run(spec_for("debate", synthesizer="Forge"))
    run.go()
    synth = run.batches[-1].requests[0]
    assert synth.key.slot == "Forge" and synth.models == ("anthropic/claude-f",)

    def answer(req: ModelRequest) -> Turn | None:
        return drop(req, "timeout") if req.key.id() == "t0:synthesis:0:Forge" else None

    run = Run(spec_for("debate", synthesizer="Forge"), answer)
    out = run.go()
    assert run.batches[-1].requests[0].key.slot == JUDGE
    assert "Synthesizer Forge failed (timeout)" in out.body


def test_judge_synthesis_drop_still_renders_from_ledger() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        return drop(req, "provider_error") if req.key.phase == "synthesis" else None

    out = Run(spec_for("debate"), answer).go()
    assert out.kind == "verdict"
    assert "synthesis is unavailable (provider_error)" in out.body
    assert "### Settled" in out.body


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"personas": (ATLAS, FORGE, BEACON)}, "exactly 2"),
        ({"personas": (ATLAS, PersonaSpec("judge", "x", "openai/x"))}, "reserved"),
        ({"personas": (ATLAS, replace(ATLAS, name="atlas"))}, "unique"),
        ({"rounds": 0}, "at least 1"),
    ],
)
def test_invalid_specs_raise_protocol_error(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        next_step(spec_for("debate", **kw), [])


def test_unknown_turns_are_ignored() -> None:
    spec = spec_for("debate")
    first = next_step(spec, [])
    stray = Turn(replace(first.requests[0].key, phase="vote", slot="voter-9"), "x", "m", Usage())  # type: ignore[union-attr]
    assert next_step(spec, [stray]) == first


def test_prompt_text_helper_concatenates() -> None:
    step = next_step(spec_for("debate"), [])
    assert isinstance(step, Batch)
    assert prompt_text(step.requests[0]).startswith(step.requests[0].prompt.system)


# --- regressions -----------------------------------------------------------------


def _fallback_to_last(req: ModelRequest) -> Turn | None:
    """The primary vendor fails at run time: the router answers with the last model."""
    return Turn(req.key, rehearsal.reply(prompt_text(req)), req.models[-1], Usage(10, 10))


def test_runtime_fallbacks_onto_one_vendor_mark_every_output_degraded() -> None:
    atlas = PersonaSpec("Atlas", "scale", "openai/gpt-a", ("anthropic/claude-h",))
    spec = spec_for(
        "debate",
        personas=(atlas, FORGE),
        available_providers=frozenset({"openai", "anthropic"}),
        rounds=2,
    )
    run = Run(spec, _fallback_to_last)
    out = run.go()
    assert {t.model for t in run.turns if t.key.slot == "Atlas"} == {"anthropic/claude-h"}
    assert "[DEGRADED: within-model debate]" in out.body
    assert "**Degradation:** [DEGRADED: within-model debate]" in out.body
    assert "at run time every persona turn of round 1, round 2 was answered by `anthropic`" in (
        out.body
    )
    for n in (1, 2):
        assert "[DEGRADED: within-model debate]" in render_round(spec, run.turns, n)
    text = render_transcript(spec, run.turns, out, date="d")
    assert "**[DEGRADED: within-model debate]**" in text
    # the same run where the primary answered is not degraded
    ok = Run(spec)
    assert "**Degradation:** none" in ok.go().body
    # meant for one vendor from the start: a shared vendor is no degradation
    same = replace(spec, personas=(atlas, PersonaSpec("Forge", "x", "openai/gpt-f")))
    assert "**Degradation:** none" in Run(same, _fallback_to_last).go().body


def test_token_cap_reached_at_a_tier_end_does_not_escalate() -> None:
    spec = spec_for(
        "debate",
        rounds=1,
        max_tokens=2000,
        tiers=(("openai/t0",), ("openai/t1",)),
    )

    def hold(req: ModelRequest) -> Turn | None:
        text = stance_reply(1, "HOLD") if req.key.slot != JUDGE else "CALL: REST"
        return Turn(req.key, text, req.models[0], Usage(input_tokens=800, output_tokens=200))

    run = Run(spec, hold)
    out = run.go()
    assert [phases(b.requests) for b in run.batches] == [
        ["t0:opening:1:Atlas", "t0:opening:1:Forge"],
        ["t0:synthesis:0:judge"],
    ]
    assert "**Escalation:** none" in out.body
    assert "Escalation to tier 1 was not started: the budget cap was reached." in out.body
    assert "Budget cap reached" in out.body
    assert "Previous tier" not in run.requests[-1].prompt.suffix
