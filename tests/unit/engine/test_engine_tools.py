"""The engine's side of tools: which requests get them, the prompts, evidence in
outcomes, arbitration's evidence rule; the repo config key and the flag."""

from __future__ import annotations

import pytest

from bot.core.errors import UsageError
from bot.engine import prompts
from bot.engine.citations import check_citations
from bot.engine.render import render_round
from bot.engine.tools import MAX_CALLS, TOOL_RULES
from bot.engine.types import Evidence, ModelRequest, Turn
from bot.inputs.parser import parse_command
from bot.inputs.repo_config import load_repo_config
from testkit.harness.engine import Run, spec_for

FILES = {"app/views.py": ["def view(user):", "    assert user is not None", "    return user.name"]}
SHA = "b" * 40


def with_evidence(req: ModelRequest, text: str) -> Turn:
    """A turn as the tool loop returns it: its citations checked against FILES."""
    checks = check_citations(text, FILES.get, html_url="https://github.com/o/r", sha=SHA)
    ev = Evidence(tool_calls=2, files_read=("app/views.py",), bytes_read=90, citations=checks)
    return Turn(req.key, text, req.models[0], evidence=ev)


def test_no_tools_unless_the_spec_says_so() -> None:
    run = Run(spec_for("debate"))
    run.go()
    assert all(r.tools is None for r in run.requests)
    assert all(r.prompt.system == prompts.SYSTEM for r in run.requests)


def test_personas_and_judge_get_tools_and_the_evidence_rules() -> None:
    run = Run(spec_for("critique", tools=True))
    run.go()
    by_phase = {r.key.phase: r for r in run.requests}
    for phase in ("opening", "rebuttal", "synthesis"):
        budget = by_phase[phase].tools
        assert budget is not None and budget.max_calls == MAX_CALLS
        assert budget.tools == ("list_files", "read_file", "search_code")
    assert by_phase["frame"].tools is None
    # One system prompt and one prefix for the whole run: prefix caches hit.
    assert {r.prompt.system for r in run.requests} == {prompts.SYSTEM + TOOL_RULES}
    assert len({r.prompt.prefix for r in run.requests}) == 1
    assert "path:L12" in TOOL_RULES and "quote the cited line" in TOOL_RULES


def test_the_judge_is_told_which_citations_failed() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.slot == "Atlas":
            return with_evidence(
                req, 'POSITION: x\nSee `app/gone.py:L3` "nope".\nPOINT 1: HOLD — r'
            )
        return None

    run = Run(spec_for("debate", tools=True), answer)
    out = run.go()
    synth = next(r for r in run.requests if r.key.phase == "synthesis")
    assert "could not be verified" in synth.prompt.suffix
    assert "Atlas: app/gone.py:L3 — no such file" in synth.prompt.suffix
    assert "Forge:" not in synth.prompt.suffix.split("could not be verified")[1].split("##")[0]
    assert "Atlas's case rested on citations that could not be verified" in out.body


def _arbitration(judge: str, *, verified: bool, **spec: object):
    cite = '`app/views.py:L2` "assert user is not None"' if verified else "`app/views.py:L99`"

    def answer(req: ModelRequest) -> Turn | None:
        if req.key.phase == "synthesis":
            return with_evidence(req, f"{judge}\nCONCLUSION: guarded.\nEVIDENCE: {cite}")
        stance = {"Sentry": "CONCEDE", "Author": "HOLD"}[req.key.slot]
        return with_evidence(req, f"POSITION: mine {cite}\nPOINT 1: {stance} — r")

    return Run(spec_for("arbitrate", rounds=2, **spec), answer)


def test_arbitration_verdict_needs_a_verified_citation() -> None:
    out = _arbitration("VERDICT: DISMISSED", verified=False, tools=True).go()
    assert out.verdict == "ESCALATED"
    assert "without a verified citation" in out.body
    assert "app/views.py:L99` (unverified)" in out.body or "L99 (unverified)" in out.body


def test_arbitration_with_verified_evidence_keeps_its_verdict() -> None:
    run = _arbitration("VERDICT: DISMISSED", verified=True, tools=True)
    out = run.go()
    assert out.verdict == "DISMISSED"
    link = f"[app/views.py:L2](https://github.com/o/r/blob/{SHA}/app/views.py#L2)"
    assert link in out.body
    assert "EVIDENCE:" in next(r for r in run.requests if r.key.phase == "synthesis").prompt.suffix
    assert (
        # Two rounds of two personas and the judge: five turns of two calls each.
        "- **Evidence:** 10 tool call(s), 1 file(s) read, 450 bytes read; citations "
        "5 verified, 0 repaired, 0 unverified" in out.body
    )


@pytest.mark.parametrize("tools", [True, False])
def test_require_evidence_off_or_no_tools_keeps_the_old_rule(tools: bool) -> None:
    out = _arbitration(
        "VERDICT: DISMISSED", verified=False, tools=tools, require_evidence=not tools
    ).go()
    assert out.verdict == "DISMISSED"


def test_digests_link_verified_citations() -> None:
    def answer(req: ModelRequest) -> Turn | None:
        if req.key.phase == "opening":
            return with_evidence(
                req, 'POSITION: see `app/views.py:L2` "assert user is not None"\nPOINT 1: HOLD — r'
            )
        return None

    run = Run(spec_for("debate", tools=True), answer)
    run.go()
    digest = render_round(run.spec, run.turns, 1)
    assert f"(https://github.com/o/r/blob/{SHA}/app/views.py#L2)" in digest


def test_repo_config_tools_and_require_evidence() -> None:
    assert load_repo_config(None).tools is True
    cfg = load_repo_config("tools: false\narbitration:\n  require_evidence: false\n")
    assert cfg.tools is False and cfg.arbitration.require_evidence is False


def test_no_tools_flag() -> None:
    cmd = parse_command("/debate Should we? --no-tools")
    assert cmd is not None and cmd.no_tools
    review = parse_command("/debate review docs/plan.md --no-tools")
    assert review is not None and review.no_tools
    with pytest.raises(UsageError):
        parse_command("/debate status --no-tools")
