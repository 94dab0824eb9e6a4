"""The one interface every model provider implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, get_args

from bot.debate.types import DropClass, Prompt, Usage

DROP_CLASSES: frozenset[str] = frozenset(get_args(DropClass))


@dataclass(frozen=True)
class Completion:
    text: str
    usage: Usage
    # The answer stopped at the output token limit (OpenAI finish_reason "length",
    # Anthropic stop_reason "max_tokens"), so its end is missing.
    truncated: bool = False


class Provider(Protocol):
    async def generate(self, model: str, prompt: Prompt, max_output_tokens: int) -> Completion:
        """Answer ``prompt`` with ``model`` (the name without the provider prefix).

        Raises ``ModelError`` whose ``drop_class`` is one of ``DROP_CLASSES``.
        """
        ...


def approx_tokens(text: str) -> int:
    """Rough token count (about four characters a token) where a server reports none."""
    return len(text) // 4
