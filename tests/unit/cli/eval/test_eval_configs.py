"""Eval configurations name agent seats as they name models (docs/agents.md)."""

from __future__ import annotations

import pytest

from bot.cli.eval.configs import parse_config
from bot.core.errors import ConfigError


def test_agent_seats_are_models_in_eval_specs() -> None:
    (config,) = parse_config("agents=debate:agent:claude-code,agent:codex/gpt-5;rounds=2")
    assert config.models == ("agent:claude-code", "agent:codex/gpt-5") and config.rounds == 2
    (single,) = parse_config("one=single:agent:gemini")
    assert single.models == ("agent:gemini",)


def test_a_bad_agent_in_an_eval_spec_names_the_clis() -> None:
    with pytest.raises(ConfigError, match="names no supported CLI"):
        parse_config("x=single:agent:cursor")
