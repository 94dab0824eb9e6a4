"""Agent seats in the one estimate (bot/run/estimate.py) and the price book:
priced as the model their CLI runs upstream, each turn a tool loop plus what
the CLI sends beside the prompt."""

from __future__ import annotations

from bot.engine.types import DebateSpec, PersonaSpec, Usage
from bot.models.pricing import Price, PriceBook
from bot.run.estimate import forecast

BOOK = PriceBook(
    overrides={"openai/gpt-5": Price(1.0, 0.1, 8.0), "anthropic/claude-x": Price(3.0, 0.3, 15.0)},
    agent_models={"codex": "gpt-5", "claude-code": "claude-x"},
)


def _spec(a: str, b: str, **kw: object) -> DebateSpec:
    return DebateSpec(
        mode="debate", title="Q", subject="Should we split the worker?",
        personas=(PersonaSpec("Atlas", "scale", a), PersonaSpec("Forge", "ship", b)),
        judge="openai/gpt-5", rounds=2, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_an_agent_is_priced_as_its_upstream_model() -> None:
    assert BOOK.priced_as("agent:codex") == "openai/gpt-5"
    assert BOOK.priced_as("agent:claude-code/claude-y") == "anthropic/claude-y"
    assert BOOK.priced_as("openai/gpt-5") == "openai/gpt-5"
    assert BOOK.lookup("agent:codex") == BOOK.lookup("openai/gpt-5")
    usage = Usage(input_tokens=1_000_000, output_tokens=0)
    assert BOOK.charge("agent:codex", usage).cost_usd == 1.0
    assert BOOK.unpriced(["agent:codex", "agent:claude-code"]) == []
    # No model anywhere: its price is unknown, and says so (a budget refuses it).
    assert BOOK.unpriced(["agent:gemini"]) == ["agent:gemini"]


def test_an_agent_turn_costs_more_than_the_same_model_answering_alone() -> None:
    api = forecast(_spec("openai/gpt-5", "openai/gpt-5"), BOOK)
    agents = forecast(_spec("agent:codex", "agent:codex"), BOOK)
    assert agents.usd > api.usd > 0
    assert agents.high_usd >= agents.usd
    persona = [c for c in agents.expected.calls if c.slot == "Atlas"]
    assert persona and all(c.steps > 1 for c in persona)  # it reads before it answers
    assert all(c.model == "agent:codex" for c in persona)


def test_a_small_repository_bounds_what_an_agent_reads() -> None:
    big = forecast(_spec("agent:codex", "agent:codex"), BOOK, supply_bytes=None)
    small = forecast(_spec("agent:codex", "agent:codex"), BOOK, supply_bytes=2_000)
    assert small.usd < big.usd
