"""Judge/voter reply parsers, the persona table and model routing."""

from __future__ import annotations

import pytest

from bot.engine.personas import (
    GENERIC_PAIR,
    KINDS,
    Classification,
    classification_menu,
    parse_classification,
    pick_pair,
)
from bot.engine.replies import (
    parse_arbitration,
    parse_critique,
    parse_debate_verdict,
    parse_numbered_list,
    parse_proposal,
    parse_votes,
)
from bot.engine.routing import max_tier, provider, route, tier_models
from testkit.harness.engine import spec_for

DESIGN_TABLE = {
    "architecture": ("Atlas", "Forge"),
    "paper": ("Quill", "Scribe"),
    "experiment": ("Helix", "Forge"),
    "result": ("Gauge", "Vera"),
    "plan": ("Compass", "Forge"),
    "data": ("Ethos", "Trove"),
    "math": ("Lemma", "Proposer"),
    "build": ("Beacon", "Forge"),
}


@pytest.mark.parametrize(("key", "pair"), sorted(DESIGN_TABLE.items()))
def test_persona_table_matches_design(key: str, pair: tuple[str, str]) -> None:
    (a, lens_a), (b, lens_b) = pick_pair(parse_classification(f"ARTIFACT: {key}\nWHY: x"))[0]
    assert (a, b) == pair
    assert lens_a and lens_b
    assert f"`{key}`" in classification_menu()


def test_table_has_exactly_the_design_kinds() -> None:
    assert {k.key for k in KINDS} == set(DESIGN_TABLE)


@pytest.mark.parametrize(
    ("text", "kind", "owner"),
    [
        ("**Artifact:** Architecture", "architecture", None),
        ("artifact - plan / timeline", "plan", None),
        ("ARTIFACT: none\nOWNER: Curator — keeps the dataset tidy", "none", "Curator"),
        ("ARTIFACT: none\nOWNER: judge — sneaky", "none", None),
        ("ARTIFACT: none\nOWNER: voter-1 — sneaky", "none", None),
        ("ARTIFACT: none\nOWNER: <script>alert(1)</script>", "none", None),
        ("ARTIFACT: spaceship", None, None),
        ("no idea", None, None),
    ],
)
def test_parse_classification(text: str, kind: str | None, owner: str | None) -> None:
    c = parse_classification(text)
    assert c.kind == kind
    assert (c.owner[0] if c.owner else None) == owner


def test_no_fit_is_quill_vs_owner_and_failure_is_generic() -> None:
    pair, _ = pick_pair(Classification("none"))
    assert pair[0][0] == "Quill" and pair[1][0] == "Owner"
    assert pick_pair(Classification(None))[0] == GENERIC_PAIR


def test_numbered_list() -> None:
    text = (
        "Here are the issues:\n1. Token lifetime — too long\n2) **Revocation** — no plan\n"
        "- 3. x\nnote"
    )
    assert parse_numbered_list(text, max_items=8) == [
        "Token lifetime — too long",
        "**Revocation** — no plan",
        "x",
    ]
    assert parse_numbered_list("1. a\n2. b\n3. c", max_items=2) == ["a", "b"]
    assert parse_numbered_list("nothing", max_items=3) == []


def test_debate_verdict_variants() -> None:
    v = parse_debate_verdict(
        "## Settled\n- a\n- b\n**Open:** c\nCall: do X\nFlip condition: if Y\n"
        "Decisive factor: Z\nOpen questions: not a label"
    )
    assert v.settled == ("a", "b")
    assert v.open == ("c",)
    assert v.call == "do X" and v.flip == "if Y"
    assert v.decisive == "Z\nOpen questions: not a label"
    assert parse_debate_verdict("garbage").call == ""


def test_critique_parse() -> None:
    c = parse_critique(
        "intro\nCRITIQUE REPORT:\npre\nISSUE 1: a\nmore\n**Issue 2:** b\n"
        "REVISED PLAN:\nx\nISSUE 3: y"
    )
    assert c.report == {1: "a\nmore", 2: "b"}
    assert c.preamble == "pre"
    assert c.revised_plan == "x\nISSUE 3: y"


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("VERDICT: DISMISSED\nCONCLUSION: fine", "DISMISSED"),
        ("**Verdict:** confirmed", "CONFIRMED"),
        ("## Verdict\n", None),
        ("VERDICT: DISMISSED or CONFIRMED", None),
        ("We should say CONFIRMED.", None),
        # regressions: only a line whose value is exactly one verdict word counts
        ("VERDICT: Not CONFIRMED — a false positive", None),
        ("VERDICT: never CONFIRMED", None),
        ("VERDICT: CONFIRMEDish", None),
        ("VERDICT: **DISMISSED** — guarded by the assert", "DISMISSED"),
        ("VERDICT: `escalated` (needs a human)", "ESCALATED"),
        ("## Verdict\n\n**CONFIRMED**\n", "CONFIRMED"),
        ("VERDICT: DISMISSED | CONFIRMED | ESCALATED\nVERDICT: CONFIRMED", None),
        ("VERDICT: CONFIRMED\nVERDICT: DISMISSED", None),
        ("VERDICT: CONFIRMED.\nVERDICT: confirmed", "CONFIRMED"),
    ],
)
def test_arbitration_parse(text: str, verdict: str | None) -> None:
    assert parse_arbitration(text)[0] == verdict


def test_proposal_parse() -> None:
    d = parse_proposal(
        "TITLE: [PROPOSAL] Use REST\nSUMMARY: short\nPROPOSAL:\n## Body\nTITLE: kept"
    )
    assert d.title == "Use REST"
    assert d.summary == "short"
    assert d.body == "## Body\nTITLE: kept"


def test_votes_parse() -> None:
    assert parse_votes("VOTE 1: A\nvote 2 - position b — reason\nVOTE 3: A\nVOTE 3: B") == {
        1: "A",
        2: "B",
    }


def test_provider_and_tiers() -> None:
    assert provider("openai/gpt-4.1") == "openai"
    assert provider("local/llama/3") == "local"
    spec = spec_for("debate", tiers=(("a/1",), ("b/1", "c/1"), ("d/1",), ("e/1",)))
    assert max_tier(spec) == 2
    assert tier_models(spec, 1, 0) == ("b/1", "c/1")
    assert tier_models(spec, 1, 1) == ("c/1", "b/1")
    assert max_tier(spec_for("debate")) == 0


def test_route_abort_when_nothing_reachable() -> None:
    spec = spec_for("debate", available_providers=frozenset({"mistral"}))
    r = route(spec, [("openai/a",), ("anthropic/b",)], ("openai/j",))
    assert r.abort_reason == "vendor_unavailable"


def test_route_moves_judge_onto_reachable_model() -> None:
    spec = spec_for("debate", available_providers=frozenset({"anthropic"}))
    r = route(spec, [("anthropic/a",), ("anthropic/b",)], ("openai/j",))
    assert r.judge == ("anthropic/a",)
    assert not r.degraded
    assert any("judge moved" in n for n in r.notes)
