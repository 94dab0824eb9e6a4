"""Agent seats: a model reference ``agent:<cli>[/<model>]`` seats a coding-agent
CLI instead of a model API call (docs/agents.md).

Pure: which CLIs exist, what a reference names, and which upstream provider a
CLI's calls are priced under. Routing never moves an agent seat onto an API
model (bot/engine/routing.py): a maintainer who seats Codex gets Codex or a
refusal, never a quiet substitute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, get_args

from bot.core.errors import ConfigError

Cli = Literal["claude-code", "codex", "gemini"]
CLIS: Final[tuple[Cli, ...]] = get_args(Cli)
PREFIX: Final = "agent:"
# A model name as it goes onto a CLI's command line (`--model=NAME`).
_MODEL: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
# The provider each CLI's calls go to (and are priced under in the ledger).
UPSTREAM: Final[dict[Cli, str]] = {
    "claude-code": "anthropic",
    "codex": "openai",
    "gemini": "gemini",
}


@dataclass(frozen=True)
class AgentRef:
    cli: Cli
    model: str = ""  # "" : the operator's DEBATE_BOT_AGENT_<CLI>_MODEL

    @property
    def provider(self) -> str:
        """The routing provider: each CLI is its own (``agent:codex``)."""
        return f"{PREFIX}{self.cli}"

    def __str__(self) -> str:
        return f"{PREFIX}{self.cli}" + (f"/{self.model}" if self.model else "")


def is_agent(ref: str) -> bool:
    return ref.strip().startswith(PREFIX)


def parse_agent(ref: str) -> AgentRef:
    """``agent:codex`` / ``agent:claude-code/claude-sonnet-4-5``; ConfigError names
    the CLIs when the reference names none of them."""
    body = ref.strip()[len(PREFIX) :]
    cli, _, model = body.partition("/")
    if cli not in CLIS:
        raise ConfigError(
            f"agent reference {ref.strip()!r} names no supported CLI "
            f"(use agent:{', agent:'.join(CLIS)}, optionally /<model>)"
        )
    if model and not _MODEL.fullmatch(model):
        raise ConfigError(
            f"agent reference {ref.strip()!r}: the model is one name of letters, digits, "
            "'.', '_', ':' or '-', not starting with '-'"
        )
    return AgentRef(cli, model)


# What the CLIs load on their own from a working folder (settings, hooks, MCP
# servers, instructions), at any depth: repository content, never our agent's
# configuration, so left out of its workspace.
CONFIG_DIRS: Final = frozenset({".claude", ".codex", ".gemini", ".cursor", ".agents"})
CONFIG_FILES: Final = frozenset(
    {
        ".mcp.json",
        "CLAUDE.md",
        "CLAUDE.local.md",
        "AGENTS.md",
        "AGENTS.override.md",
        "GEMINI.md",
        ".cursorrules",
        ".geminiignore",
    }
)


def is_agent_config(path: str) -> bool:
    """Whether a repository path is a file an agent CLI would load by itself."""
    parts = path.split("/")
    return parts[-1] in CONFIG_FILES or any(p in CONFIG_DIRS for p in parts[:-1])
