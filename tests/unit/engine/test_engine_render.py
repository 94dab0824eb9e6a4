"""Rendering: round digests, outcome bodies of every kind, audit, transcript."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from bot.engine.render import render_round, render_rounds, render_transcript
from bot.engine.types import ContextFile, ModelRequest, Turn, Usage
from testkit.harness.engine import Run, drop, reply_turn, spec_for, stance_reply

DEBATE_SYNTHESIS = """Here is my verdict.
SETTLED:
- Latency matters less than tooling for this team.
- Both agree on protobuf schemas.
OPEN:
- Browser clients.
CALL: Use REST with OpenAPI now.
FLIP CONDITION: More than 10k internal RPS.
DECISIVE FACTOR: Forge showed the team has no gRPC experience.
"""


def _judge(text: str):
    def answer(req: ModelRequest) -> Turn | None:
        return reply_turn(req, text) if req.key.phase == "synthesis" else None

    return answer


def test_rounds_rendered_together_match_each_rendered_alone() -> None:
    run = Run(spec_for("debate"))
    run.go()
    pairs = [(0, 1), (0, 2), (0, 3)]
    together = render_rounds(run.spec, run.turns, pairs)
    assert together == [render_round(run.spec, run.turns, rnd, tier) for tier, rnd in pairs]
    assert [body.split("\n", 1)[0] for body in together] == [
        "## Round 1 of 3 — opening",
        "## Round 2 of 3 — rebuttal",
        "## Round 3 of 3 — counter",
    ]


def test_round_digest_contents_and_byte_identity() -> None:
    run = Run(spec_for("debate"))
    run.go()
    a = render_round(run.spec, run.turns, 2)
    b = render_round(run.spec, list(run.turns), 2)
    assert a == b
    assert a.startswith("## Round 2 of 3 — rebuttal")
    assert "### Atlas (`openai/gpt-a`)" in a
    assert "<details><summary>Atlas — full turn</summary>" in a
    assert "- Point 1: **HOLD**" in a
    assert "**Still contested:** point 1" in a
    assert "<!-- debate-bot" not in a
    r3 = render_round(run.spec, run.turns, 3)
    assert "**Converged:** no point is contested." in r3
    assert "_No turns in this round yet._" in render_round(run.spec, run.turns[:2], 2)


def test_round_digest_marks_drops_and_missing_stances() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.slot == "Forge" and req.key.phase == "opening":
            return reply_turn(req, "No block here.</details><script>")
        if req.key.slot == "Forge" and req.key.phase == "rebuttal":
            return drop(req, "unusable_output")
        return None

    run = Run(spec_for("debate"), answer)
    run.go()
    r1 = render_round(run.spec, run.turns, 1)
    assert "_(no stance given)_" in r1
    assert r1.count("</details>") == 2  # the turn's own closing tag was escaped
    assert "&lt;/details&gt;" in r1
    r2 = render_round(run.spec, run.turns, 2)
    assert "### Forge — dropped (`unusable_output`)" in r2
    assert "cut off" not in r1 + r2


def test_a_turn_cut_off_at_the_output_limit_says_so() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.slot == "Atlas" and req.key.phase == "opening":
            return replace(reply_turn(req, stance_reply(1, "HOLD")), truncated=True)
        return None

    run = Run(spec_for("debate"), answer)
    out = run.go()
    assert "_This turn was cut off at the output limit._" in render_round(run.spec, run.turns, 1)
    assert "- **Cut off at the output limit:** Atlas (opening, tier 0 round 1)" in out.body


def test_debate_verdict_sections_and_key_arguments() -> None:
    run = Run(spec_for("debate"), _judge(DEBATE_SYNTHESIS))
    out = run.go()
    body = out.body
    order = [
        "### Settled",
        "### Open",
        "### Call",
        "### Flip condition",
        "### Key arguments by round",
        "### Decisive factor",
        "### Audit",
    ]
    positions = [body.index(h) for h in order]
    assert positions == sorted(positions)
    assert "- Latency matters less than tooling for this team." in body
    assert "Use REST with OpenAPI now." in body
    assert "| Round | Atlas | Forge |" in body
    assert re.search(r"^\| 1 · opening \| .+ \| .+ \|$", body, re.M)
    assert re.search(r"^\| 3 · counter \| .+ \|$", body, re.M)
    assert "Forge showed the team has no gRPC experience." in body
    assert "<!--" not in body
    assert out.title == run.spec.title


def test_audit_block_numbers_and_warnings() -> None:
    spec = spec_for(
        "debate",
        context_files=(
            ContextFile("docs/a.md", "x", 2340),
            ContextFile("src/b.py", "y", 99999, True),
        ),
        warnings=("@docs/missing.md: file not found; skipped",),
        subject_truncated=True,
    )
    run = Run(spec)
    out = run.go()
    n = len(run.turns)
    assert f"- **Tokens:** {1000 * n:,} input ({400 * n:,} cached), {200 * n:,} output" in out.body
    assert f"- **Cost estimate:** ${0.01 * n:.4f}" in out.body
    assert f"- **Model time:** {1.5 * n:.1f} s" in out.body
    assert "`docs/a.md` (2,340 bytes), `src/b.py` (99,999 bytes) [CONDENSED]" in out.body
    assert "@docs/missing.md: file not found; skipped" in out.body
    assert "truncated" in out.body
    assert (
        "Atlas: `openai/gpt-a` (fallbacks `openai/gpt-a-mini`); answered by `openai/gpt-a`"
        in out.body
    )
    assert "- **Rounds run:** 3 (limit 3 per tier), converged" in out.body


def test_audit_reports_model_that_actually_answered() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.slot == "Atlas":
            t = reply_turn(req, "POSITION: x\nPOINT 1: HOLD")
            return Turn(t.key, t.text, "openai/gpt-a-mini", Usage(10, 10))
        return None

    out = Run(spec_for("debate"), answer).go()
    assert "answered by `openai/gpt-a-mini`" in out.body


def test_critique_outcome() -> None:
    synthesis = """CRITIQUE REPORT:
ISSUE 1: Keep the format; shorten the lifetime to 5 minutes.
ISSUE 2: The deny list must be replicated.
Extra detail for issue 2.
REVISED PLAN:
# Move sessions to JWT
[CHANGED] Issue 5-minute JWTs.
CALL: this line looks like a label but belongs to the plan
"""
    out = Run(spec_for("critique"), _judge(synthesis)).go()
    assert out.kind == "critique"
    body = out.body
    assert re.search(r"^### Issues\n1\. .+\n2\. .+", body, re.M)
    assert "#### 1. " in body and "shorten the lifetime" in body
    assert "The deny list must be replicated.\nExtra detail for issue 2." in body
    assert "[CHANGED] Issue 5-minute JWTs." in body
    assert "CALL: this line looks like a label but belongs to the plan" in body
    assert "_Final stances:_ Atlas" in body
    assert body.index("### Revised plan") < body.index("### Audit")


def test_critique_without_changed_marks_is_flagged() -> None:
    out = Run(
        spec_for("critique"), _judge("CRITIQUE REPORT:\nISSUE 1: ok\nREVISED PLAN:\nsame")
    ).go()
    assert "marks no line as `[CHANGED]`" in out.body


@pytest.mark.parametrize(
    ("judge", "expected"),
    [
        ("VERDICT: CONFIRMED\nCONCLUSION: Sentry showed the crash.", "CONFIRMED"),
        ("The verdict is unclear to me.", "ESCALATED"),
        ("VERDICT: DISMISSED | CONFIRMED | ESCALATED", "ESCALATED"),
        ("VERDICT: ESCALATED\nCONCLUSION: needs a human", "ESCALATED"),
        # the personas' concessions (Author conceded) contradict the judge
        ("VERDICT: DISMISSED\nCONCLUSION: fine", "ESCALATED"),
    ],
)
def test_arbitration_verdicts(judge: str, expected: str) -> None:
    out = Run(spec_for("arbitrate"), _judge(judge)).go()
    assert out.kind == "arbitration"
    assert out.verdict == expected
    assert out.body.startswith(f"**Arbitration result: {expected}.**")
    if expected == "ESCALATED" and "ESCALATED\n" not in judge:
        assert "**Escalated to a human:**" in out.body


def test_arbitration_split_personas_escalate() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.phase == "synthesis":
            return reply_turn(req, "VERDICT: CONFIRMED\nCONCLUSION: x")
        return reply_turn(req, "POSITION: mine\nPOINT 1: HOLD — no")

    out = Run(spec_for("arbitrate"), answer).go()
    assert out.verdict == "ESCALATED"
    assert "did not converge" in out.body


def _closing(sentry: str, author: str, judge: str):
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.phase == "synthesis":
            return reply_turn(req, judge)
        stance = {"Sentry": sentry, "Author": author}[req.key.slot]
        return reply_turn(req, f"POSITION: mine\nPOINT 1: {stance} — r")

    return answer


@pytest.mark.parametrize(
    ("sentry", "author", "judge", "expected", "why"),
    [
        # "Not CONFIRMED" is no verdict, whatever the stances say
        ("HOLD", "CONCEDE", "VERDICT: Not CONFIRMED — a false positive", "ESCALATED", "parsed"),
        ("CONCEDE", "HOLD", "VERDICT: Not CONFIRMED — a false positive", "ESCALATED", "parsed"),
        # both conceded: contradictory
        ("CONCEDE", "CONCEDE", "VERDICT: DISMISSED", "ESCALATED", "contradict each other"),
        # the concern seat conceded, the judge confirms anyway
        ("CONCEDE", "HOLD", "VERDICT: CONFIRMED", "ESCALATED", "point to DISMISSED"),
        # the author agrees the concern is real, the judge dismisses it
        ("HOLD", "AGREE", "VERDICT: DISMISSED", "ESCALATED", "point to CONFIRMED"),
        ("AGREE", "AGREE", "VERDICT: DISMISSED", "ESCALATED", "point to CONFIRMED"),
        ("AGREE", "AGREE", "VERDICT: CONFIRMED — real", "CONFIRMED", ""),
        ("HOLD", "AGREE", "VERDICT: CONFIRMED", "CONFIRMED", ""),
        ("CONCEDE", "HOLD", "VERDICT: **DISMISSED**", "DISMISSED", ""),
        # AGREE follows the other seat: the author agrees the concern was withdrawn
        ("CONCEDE", "AGREE", "VERDICT: DISMISSED", "DISMISSED", ""),
        ("AGREE", "HOLD", "VERDICT: CONFIRMED", "ESCALATED", "point to DISMISSED"),
    ],
)
def test_arbitration_verdict_must_match_the_closing_stances(
    sentry: str, author: str, judge: str, expected: str, why: str
) -> None:
    out = Run(
        spec_for("arbitrate", rounds=2), _closing(sentry, author, judge + "\nCONCLUSION: x")
    ).go()
    assert out.verdict == expected
    if why:
        assert "**Escalated to a human:**" in out.body and why in out.body
    else:
        assert "**Escalated to a human:**" not in out.body


def test_arbitration_body_sections() -> None:
    out = Run(spec_for("arbitrate"), _judge("VERDICT: CONFIRMED\nCONCLUSION: It crashes.")).go()
    body = out.body
    for heading in (
        "### Participants",
        "### Concern",
        "### Debate summary",
        "#### Round 1 · opening",
        "### Conclusion",
        "### Audit",
    ):
        assert heading in body
    assert "`review-bot` (bot) on `app/views.py` line 12" in body
    assert "> `user` may be None here; this dereference can crash." in body
    assert "It crashes." in body
    assert "- **Judge**: `openai/gpt-judge`" in body
    assert "**Sentry**" in body and "**Author**" in body


def test_aborted_body_is_short_and_fixed() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        return drop(req, "timeout") if req.key.slot == "Atlas" else None

    out = Run(spec_for("debate"), answer).go()
    assert out.kind == "aborted"
    assert out.body.startswith("## Debate aborted\n\nFewer than two personas were left")
    assert "Reason: `quorum_lost`" in out.body
    assert "### Audit" in out.body


@pytest.mark.parametrize("mode", ["debate", "critique", "arbitrate", "proposal"])
def test_outcome_rerender_is_byte_identical(mode: str) -> None:
    run = Run(spec_for(mode))
    out = run.go()
    again = Run(spec_for(mode))
    again.turns = list(run.turns)
    assert again.go() == out


def test_transcript() -> None:
    spec = spec_for(
        "critique",
        context_files=(ContextFile("src/b.py", "y", 4096, True),),
        warnings=("@x.md: file not found; skipped",),
    )
    run = Run(spec)
    out = run.go()
    text = render_transcript(spec, run.turns, out, date="2026-02-10 14:30:00", plan="docs/plan.md")
    assert text == render_transcript(
        spec, run.turns, out, date="2026-02-10 14:30:00", plan="docs/plan.md"
    )
    for needle in (
        "# Debate Transcript",
        "**Topic:** Move sessions to JWT",
        "**Plan:** docs/plan.md",
        "**Date:** 2026-02-10 14:30:00",
        "**Rounds:** 3 (run: 3)",
        "**Mode:** critique",
        "**Response scale:** 1.5 (200 words max)",
        "| Persona A | Atlas | `openai/gpt-a` |",
        "| Persona B | Forge | `anthropic/claude-f` |",
        "- src/b.py (4,096 bytes) [CONDENSED]",
        "## Issue Extraction",
        "## Round 1 — opening",
        "### Forge",
        "## Synthesis",
        "### Revised plan",
        "## Audit",
        "@x.md: file not found; skipped",
    ):
        assert needle in text, needle
    order = [
        text.index(x)
        for x in (
            "## Personas",
            "## Context Files",
            "## Issue Extraction",
            "## Round 1",
            "## Round 2",
            "## Synthesis",
            "## Audit",
        )
    ]
    assert order == sorted(order)
