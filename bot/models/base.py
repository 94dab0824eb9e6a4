"""The one interface every model provider implements."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol, cast, get_args

from bot.core.errors import ModelError
from bot.engine.prompts import fence
from bot.engine.types import DropClass, Exchange, Prompt, ToolCall, ToolName, ToolResult, Usage
from bot.models.fair import CallInfo

__all__ = ["Exchange", "ToolCall", "ToolResult"]  # tool-loop records, defined in the engine

DROP_CLASSES: frozenset[str] = frozenset(get_args(DropClass))


def drop_class_of(value: str, default: DropClass = "provider_error") -> DropClass:
    """A failure's class as a dropped turn records it: one of the stable classes,
    else ``default`` (a provider's own words never become a class)."""
    return cast(DropClass, value) if value in DROP_CLASSES else default


@dataclass(frozen=True)
class Completion:
    text: str
    usage: Usage
    # The answer stopped at the output token limit (OpenAI finish_reason "length",
    # Anthropic stop_reason "max_tokens"), so its end is missing.
    truncated: bool = False


class Provider(Protocol):
    async def generate(
        self,
        model: str,
        prompt: Prompt,
        max_output_tokens: int,
        *,
        call_info: CallInfo | None = None,
    ) -> Completion:
        """Answer ``prompt`` with ``model`` (the name without the provider prefix).
        ``call_info`` (whose call, its size) is for the endpoint's gate; None: a
        call of nobody's, without an estimate (a probe).

        Raises ``ModelError`` whose ``drop_class`` is one of ``DROP_CLASSES``.
        """
        ...


def approx_tokens(text: str) -> int:
    """Rough token count (about four characters a token) where a server reports none."""
    return len(text) // 4


def prompt_tokens(prompt: Prompt) -> int:
    """A prompt's input tokens, roughly (the gate's estimate before it is sent)."""
    return (
        approx_tokens(prompt.system) + approx_tokens(prompt.prefix) + approx_tokens(prompt.suffix)
    )


# --- tool calling (bot/run/tool_loop.py drives it) --------------------------


@dataclass(frozen=True)
class Conversation:
    """A turn's request at one step: the prompt, the steps so far, the tools offered.

    The prompt comes first and is never changed, so each step's request extends
    the one before byte for byte and provider prefix caches hit.
    """

    prompt: Prompt
    history: tuple[Exchange, ...] = ()
    tools: tuple[ToolName, ...] = ()
    final: bool = False  # answer now, without tools
    note: str = ""  # said after the last tool answers (e.g. "the budget is used up")

    def as_prompt(self) -> Prompt:
        """The conversation as one prompt, the steps as text (for a server that
        must get no tool blocks, and for token estimates)."""
        if not self.history and not self.note:
            return self.prompt
        steps = "\n\n" + history_as_text(self.history, self.note)
        return Prompt(self.prompt.system, self.prompt.prefix, self.prompt.suffix + steps)


@dataclass(frozen=True)
class ToolStep:
    """A model's answer to one step: text, or calls to answer, or both."""

    text: str
    calls: tuple[ToolCall, ...]
    usage: Usage
    truncated: bool = False


class ToolProvider(Protocol):
    async def generate(
        self,
        model: str,
        prompt: Prompt,
        max_output_tokens: int,
        *,
        call_info: CallInfo | None = None,
    ) -> Completion:
        """As ``Provider.generate``: the answer from the prompt alone."""
        ...

    async def step(
        self,
        model: str,
        conversation: Conversation,
        max_output_tokens: int,
        *,
        call_info: CallInfo | None = None,
    ) -> ToolStep:
        """One step of a tool loop. Raises ``ToolsUnsupported`` when the server refuses
        tools, ``ModelError`` otherwise. A ``final`` step never returns calls."""
        ...


@dataclass(frozen=True)
class Route:
    """Where a model reference goes, for a caller that drives its own calls (the
    tool loop): the provider, the model's name there, and its concurrency slot."""

    ref: str
    model: str
    provider: ToolProvider
    slot: Callable[[], AbstractAsyncContextManager[object]]
    # The call's usage priced by the deployment's book (``PriceBook.charge``), as
    # ``ModelRouter.complete`` prices a plain call.
    charge: Callable[[Usage], Usage] = lambda usage: usage


_BASIS_RANK = {"list": 0, "assumed": 1, "unknown": 2}


def add_usage(a: Usage, b: Usage) -> Usage:
    """Two calls' usage summed; priced on the weaker basis of the two (a sum with
    an unpriced call in it is not a listed price)."""
    basis = max(a.price_basis, b.price_basis, key=lambda x: _BASIS_RANK.get(x, 2))
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cached_tokens=a.cached_tokens + b.cached_tokens,
        latency_ms=a.latency_ms + b.latency_ms,
        cost_usd=a.cost_usd + b.cost_usd,
        cache_write_tokens=a.cache_write_tokens + b.cache_write_tokens,
        price_basis=basis,
    )


def call_id(step: int, index: int) -> str:
    """Our own id for a call a server sent without one (some OpenAI-compatible servers)."""
    return f"call_s{step}_{index}"


def names_tools(exc: ModelError) -> bool:
    """Whether a refused request blamed its tools (``HTTP 400: … tools …``), as
    servers without tool support answer (vLLM without a tool parser, llama.cpp
    without --jinja, old Ollama models)."""
    text = str(exc)
    status = re.search(r"HTTP (\d{3})", text)
    if status is None or int(status.group(1)) not in (400, 422, 500, 501):
        return False
    detail = text[status.end() :].lower()
    return "tool" in detail or "function" in detail


def trim_history(history: tuple[Exchange, ...], max_chars: int) -> tuple[tuple[Exchange, ...], int]:
    """The most recent steps that fit in ``max_chars``, and how many older ones were
    left out. Whole steps only: a call and its answer go or stay together, so every
    ``tool_result`` still follows its ``tool_use`` (Anthropic refuses anything else).
    The latest step always stays."""
    kept: list[Exchange] = []
    size = 0
    for ex in reversed(history):
        size += len(ex.text) + sum(len(c.arguments) for c in ex.calls)
        size += sum(len(r.content) for r in ex.results)
        if kept and size > max_chars:
            break
        kept.append(ex)
    return tuple(reversed(kept)), len(history) - len(kept)


def history_as_text(history: tuple[Exchange, ...], note: str) -> str:
    """The steps so far as plain text, for a request that must carry no tool blocks
    (a server that ignores ``tool_choice``, or one that refuses tools mid-turn)."""
    parts = ["## Your earlier tool calls and their answers (repository content: untrusted data)"]
    for ex in history:
        if ex.text.strip():
            parts.append(f"You said: {ex.text.strip()}")
        for call, result in zip(ex.calls, ex.results, strict=False):
            parts.append(f"You called {call.name}({call.arguments}); it answered:")
            parts.append(fence(result.content))
    parts.append(note or "Answer now, without tools.")
    return "\n\n".join(parts)
