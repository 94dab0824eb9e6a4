"""Repository design reviews in the engine: the synthesis format, its parser, the outcome."""

from __future__ import annotations

from bot.engine.replies import parse_review
from bot.engine.types import Finding
from testkit.harness.engine import Run, prompt_text, reply_turn, spec_for

BRIEF = (
    "# Design review of the repository octo/shop\n\n## File tree\n\n```text\nREADME.md\n"
    "src/\n  orders.py\n  payments.py\n```\n"
)


def test_a_rehearsed_repository_review_ranks_findings_and_names_files() -> None:
    run = Run(spec_for("critique", subject=BRIEF, subject_kind="repository"))
    out = run.go()
    assert out.kind == "critique"
    synthesis = [r for r in run.requests if r.key.phase == "synthesis"]
    assert "FINDING <n> [critical|major|minor]" in prompt_text(synthesis[0])
    assert "REVISED PLAN" not in prompt_text(synthesis[0])  # nothing to rewrite
    assert out.findings and all(f.files == ("README.md",) for f in out.findings)
    severities = [f.severity for f in out.findings]
    assert severities == sorted(severities, key=("critical", "major", "minor").index)
    assert "## Design review:" in out.body and "### Revised plan" not in out.body
    assert "**major** —" in out.body and "(`README.md`)" in out.body
    assert "### What the design does well" in out.body
    assert "one persona for, one against" in out.body  # the disagreements, both positions


def test_plan_critiques_are_untouched_by_the_repository_format() -> None:
    run = Run(spec_for("critique"))
    out = run.go()
    synthesis = [r for r in run.requests if r.key.phase == "synthesis"]
    assert "REVISED PLAN" in prompt_text(synthesis[0]) and "FINDING" not in prompt_text(
        synthesis[0]
    )
    assert out.findings == () and "### Revised plan" in out.body


def test_parse_review_is_lenient_and_ranks_by_severity() -> None:
    text = """Some preamble the judge wrote.
**FINDINGS:**
- **FINDING 1** [minor] (files: `docs/a.md`, src/b.py): Docs drift from the code.
  Keep them next to it.
FINDING 2 [CRITICAL]: Payments retry without idempotency keys. Add them.
FINDING 3 major (files: src/c.py) — Orders and payments share tables.
STRENGTHS:
- Clear module names.
DISAGREEMENTS:
- Split now (Atlas) vs later (Forge).
"""
    r = parse_review(text)
    assert r.findings == (
        Finding(2, "critical", "Payments retry without idempotency keys. Add them."),
        Finding(3, "major", "Orders and payments share tables.", ("src/c.py",)),
        Finding(
            1,
            "minor",
            "Docs drift from the code. Keep them next to it.",
            ("docs/a.md", "src/b.py"),
        ),
    )
    assert r.findings[0].title == "Payments retry without idempotency keys"
    assert r.strengths == "- Clear module names."
    assert "Split now" in r.disagreements


def test_a_synthesis_without_the_format_says_so() -> None:
    garbled = Run(
        spec_for("critique", subject=BRIEF, subject_kind="repository"),
        answer=lambda req: reply_turn(req, "I liked it.") if req.key.phase == "synthesis" else None,
    )
    out = garbled.go()
    assert out.findings == ()
    assert "_The panel agreed on no finding._" in out.body
