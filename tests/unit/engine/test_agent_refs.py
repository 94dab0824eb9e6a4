"""Agent references (bot/engine/agents.py) and routing's rule for agent seats:
refused where they cannot run, never moved onto an API model."""

from __future__ import annotations

import pytest

from bot.core.errors import ConfigError
from bot.engine.agents import AgentRef, is_agent, is_agent_config, parse_agent
from bot.engine.routing import all_models, route
from bot.engine.types import DebateSpec, PersonaSpec


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("agent:codex", AgentRef("codex", "")),
        ("agent:claude-code/claude-sonnet-4-5", AgentRef("claude-code", "claude-sonnet-4-5")),
        (" agent:gemini/gemini-2.5-pro ", AgentRef("gemini", "gemini-2.5-pro")),
    ],
)
def test_an_agent_reference_names_a_cli_and_maybe_a_model(ref: str, expected: AgentRef) -> None:
    assert is_agent(ref)
    assert parse_agent(ref) == expected
    assert parse_agent(ref).provider == f"agent:{expected.cli}"


@pytest.mark.parametrize("ref", ["agent:cursor", "agent:", "agent:codex/a/b", "agent:Codex"])
def test_a_bad_agent_reference_names_the_clis(ref: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_agent(ref)
    assert "agent:" in caught.value.public


def test_api_references_are_not_agents() -> None:
    assert not is_agent("openai/gpt-4.1-mini")
    assert not is_agent("anthropic/agent:x")


@pytest.mark.parametrize(
    "path",
    [
        "CLAUDE.md", "src/CLAUDE.md", "AGENTS.md", "deep/a/b/AGENTS.md", "GEMINI.md",
        ".mcp.json", "pkg/.mcp.json", ".claude/settings.json", "x/.codex/config.toml",
        ".gemini/settings.json", ".cursor/rules/a.mdc", "CLAUDE.local.md",
    ],
)  # fmt: skip
def test_the_clis_own_files_are_agent_config_at_any_depth(path: str) -> None:
    assert is_agent_config(path)


@pytest.mark.parametrize("path", ["README.md", "docs/claude.md", "src/agents.py", "a/mcp.json"])
def test_ordinary_files_are_not_agent_config(path: str) -> None:
    assert not is_agent_config(path)


def _spec(*models: str, judge: str = "openai/gpt-4.1-mini", **kw: object) -> DebateSpec:
    personas = tuple(PersonaSpec(f"P{i}", "lens", m) for i, m in enumerate(models))
    return DebateSpec(mode="debate", title="t", subject="s", personas=personas, judge=judge, **kw)  # type: ignore[arg-type]


def test_an_agent_seat_that_cannot_run_aborts_the_run_instead_of_moving() -> None:
    spec = _spec(
        "agent:codex", "anthropic/claude-sonnet-4-5",
        available_providers=frozenset({"openai", "anthropic"}),
    )  # fmt: skip
    routing = route(spec, [("agent:codex",), ("anthropic/claude-sonnet-4-5",)], (spec.judge,))
    assert routing.abort_reason == "vendor_unavailable"
    assert routing.notes == ("agent seat `agent:codex` cannot run here",)


def test_an_available_agent_seat_keeps_its_cli_and_is_no_donor() -> None:
    spec = _spec(
        "agent:codex", "gemini-less/model",
        available_providers=frozenset({"openai", "agent:codex"}),
    )  # fmt: skip
    routing = route(spec, [("agent:codex",), ("nope/model",)], (spec.judge,))
    assert routing.abort_reason == ""
    assert routing.seats[0] == ("agent:codex",)
    assert routing.seats[1] == ("openai/gpt-4.1-mini",)  # moved onto the judge, not the agent


def test_an_agent_judge_that_cannot_run_aborts() -> None:
    spec = _spec("openai/a", "openai/b", judge="agent:claude-code",
                 available_providers=frozenset({"openai"}))  # fmt: skip
    routing = route(spec, [("openai/a",), ("openai/b",)], ("agent:claude-code",))
    assert routing.abort_reason == "vendor_unavailable"


def test_all_models_lists_every_reference_once() -> None:
    spec = DebateSpec(
        mode="debate", title="t", subject="s",
        personas=(PersonaSpec("A", "", "agent:codex", ("openai/x",)),
                  PersonaSpec("B", "", "openai/x")),
        judge="agent:gemini", voters=("openai/v",), tiers=(("t/1",),),
    )  # fmt: skip
    assert all_models(spec) == ("agent:codex", "openai/x", "agent:gemini", "openai/v", "t/1")
