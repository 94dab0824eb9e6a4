"""`--models` and `--judge` take agent seats (docs/agents.md)."""

from __future__ import annotations

import pytest

from bot.core.errors import UsageError
from bot.inputs.parser import parse_command


def test_agent_seats_in_flags() -> None:
    cmd = parse_command(
        "/debate --models agent:codex,agent:claude-code/claude-sonnet-4-5 --judge agent:gemini Q?",
        command="/debate",
    )
    assert cmd is not None
    assert cmd.models == ("agent:codex", "agent:claude-code/claude-sonnet-4-5")
    assert cmd.judge == "agent:gemini"


@pytest.mark.parametrize("ref", ["agent:cursor", "agent:codex/a/b"])
def test_a_bad_agent_seat_gets_a_usage_reply_naming_the_clis(ref: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_command(f"/debate --models {ref},openai/gpt-4o Q?", command="/debate")
    assert "`agent:claude-code`, `agent:codex`, `agent:gemini`" in caught.value.public
