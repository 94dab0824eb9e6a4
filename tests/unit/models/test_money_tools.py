"""The cost estimate of a run with tools: each persona and synthesis turn is a loop
of model steps, each re-sending the conversation (bot/models/estimate.py)."""

from __future__ import annotations

from dataclasses import replace

from bot.engine.tools import MAX_BYTES, MAX_STEPS, TOOL_PHASES
from bot.engine.types import DebateSpec, PersonaSpec, RepoRef
from bot.models.estimate import TOOL_FILL, estimate_run
from bot.models.pricing import PriceBook
from bot.service.worker.budgets import Caps, estimate_text

REPO = RepoRef("acme/widgets", "0123456789abcdef0123456789abcdef01234567")


def spec(**kw: object) -> DebateSpec:
    base = DebateSpec(
        mode="debate",
        title="Is the retry loop bounded?",
        subject="The handler retries sends until MAX_RETRIES. " * 20,
        personas=(
            PersonaSpec("Atlas", "systems", "openai/gpt-4.1-mini"),
            PersonaSpec("Forge", "pragmatism", "anthropic/claude-sonnet-4-5"),
        ),
        judge="openai/gpt-4.1-mini",
        repo_ref=REPO,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_tools_on_adds_the_expected_steps_of_each_tool_turn() -> None:
    off = estimate_run(spec(tools=False), PriceBook())
    on = estimate_run(spec(tools=True), PriceBook())
    assert [(c.slot, c.phase) for c in on.calls] == [(c.slot, c.phase) for c in off.calls]
    steps = round((MAX_STEPS - 1) * TOOL_FILL)
    for a, b in zip(off.calls, on.calls, strict=True):
        if b.phase in TOOL_PHASES:
            assert b.steps == steps + 1
            # What the tools answer is read again at every later step.
            assert b.input_tokens > a.input_tokens + TOOL_FILL * MAX_BYTES / 4
            assert b.output_tokens > a.output_tokens
        else:
            assert b == a  # the frame and the votes answer from the prompt alone
    assert on.model_calls > off.model_calls == len(off.calls)
    assert on.usd > off.usd


def test_a_tool_loops_repeats_are_priced_as_cache_hits() -> None:
    on = estimate_run(spec(tools=True), PriceBook())
    tool_turns = [c for c in on.calls if c.phase in TOOL_PHASES]
    for c in tool_turns:
        # Every step after the first reads the step before from the cache.
        assert c.cached_tokens > c.input_tokens / 2
        if c.model.startswith("anthropic/"):
            assert c.cache_write_tokens > 0  # Anthropic bills the new part as a write
    # Priced without the cache, the same tokens would cost far more.
    full = sum(c.input_tokens for c in tool_turns)
    assert full > 2 * sum(c.input_tokens - c.cached_tokens for c in tool_turns)


def test_the_tool_fill_scales_the_estimate() -> None:
    low = estimate_run(spec(tools=True), PriceBook(), tool_fill=0.25)
    high = estimate_run(spec(tools=True), PriceBook(), tool_fill=1.0)
    none = estimate_run(spec(tools=True), PriceBook(), tool_fill=0.0)
    assert none.model_calls == len(none.calls)  # no tool steps: one call a turn
    assert none.usd < low.usd < high.usd
    assert {c.steps for c in high.calls if c.phase in TOOL_PHASES} == {MAX_STEPS}


def test_the_estimate_reply_counts_every_step_of_a_tool_turn() -> None:
    on = estimate_run(spec(tools=True), PriceBook())
    text = estimate_text(spec(tools=True), on, Caps(None, None, None), PriceBook())
    assert f"over {on.model_calls} model calls" in text
    assert "most of their tool budget" in text
    per_model = {
        m: sum(c.steps for c in on.calls if c.model == m) for m in {c.model for c in on.calls}
    }
    for model, calls in per_model.items():
        assert f"| `{model}` | {calls} |" in text
    off = estimate_run(spec(tools=False), PriceBook())
    plain = estimate_text(spec(tools=False), off, Caps(None, None, None), PriceBook())
    assert f"over {len(off.calls)} model calls" in plain and "tool budget" not in plain
