"""List prices for cost estimates (USD per million tokens).

Estimates only: prices change, and a model missing here costs 0 and is reported
as unknown (``CostEstimate.known`` is False) rather than guessed. Names match
exactly or with a dated/``-latest`` suffix (``gpt-4.1-mini-2025-04-14``,
``claude-sonnet-4-5-20250929``); a vendor prefix as used by OpenRouter
(``openai/gpt-4o``) is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    input: float  # uncached input
    cached_input: float  # input served from the prompt cache
    output: float
    cache_write: float | None = None  # Anthropic cache writes; None: billed as input


def _anthropic(input_: float, output: float) -> Price:
    # Anthropic: cache reads at 0.1x input, 5-minute cache writes at 1.25x input.
    return Price(input_, round(input_ * 0.1, 6), output, round(input_ * 1.25, 6))


PRICES: dict[str, Price] = {
    # OpenAI
    "gpt-5": Price(1.25, 0.125, 10.00),
    "gpt-5-mini": Price(0.25, 0.025, 2.00),
    "gpt-5-nano": Price(0.05, 0.005, 0.40),
    "gpt-4.1": Price(2.00, 0.50, 8.00),
    "gpt-4.1-mini": Price(0.40, 0.10, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.025, 0.40),
    "gpt-4o": Price(2.50, 1.25, 10.00),
    "gpt-4o-mini": Price(0.15, 0.075, 0.60),
    "o1": Price(15.00, 7.50, 60.00),
    "o3": Price(2.00, 0.50, 8.00),
    "o3-mini": Price(1.10, 0.55, 4.40),
    "o4-mini": Price(1.10, 0.275, 4.40),
    # Anthropic
    "claude-opus-4-5": _anthropic(5.00, 25.00),
    "claude-opus-4-1": _anthropic(15.00, 75.00),
    "claude-opus-4": _anthropic(15.00, 75.00),
    "claude-sonnet-4-5": _anthropic(3.00, 15.00),
    "claude-sonnet-4": _anthropic(3.00, 15.00),
    "claude-3-7-sonnet": _anthropic(3.00, 15.00),
    "claude-3-5-sonnet": _anthropic(3.00, 15.00),
    "claude-haiku-4-5": _anthropic(1.00, 5.00),
    "claude-3-5-haiku": _anthropic(0.80, 4.00),
    "claude-3-haiku": Price(0.25, 0.03, 1.25, 0.30),
}

_VERSION_SUFFIX = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8}|-latest)?")
_VENDOR_PREFIXES = ("openai/", "anthropic/")


@dataclass(frozen=True)
class CostEstimate:
    usd: float
    known: bool  # False: the model has no price here, so ``usd`` is 0


def price_for(model: str) -> Price | None:
    """The price of ``model`` (a provider's model name), or None if unknown."""
    name = model.strip().lower()
    for prefix in _VENDOR_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    # Longest key first, so "gpt-4.1-mini" is not priced as "gpt-4.1".
    for key in sorted(PRICES, key=len, reverse=True):
        if name.startswith(key) and _VERSION_SUFFIX.fullmatch(name[len(key) :]):
            return PRICES[key]
    return None


def estimate_cost(
    model: str,
    *,
    input_tokens: int,
    cached_tokens: int = 0,
    output_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> CostEstimate:
    """Cost of one call. ``input_tokens`` is the total input, cached and cache writes included."""
    price = price_for(model)
    if price is None:
        return CostEstimate(0.0, known=False)
    cached = max(0, min(cached_tokens, input_tokens))
    written = max(0, min(cache_write_tokens, input_tokens - cached))
    fresh = input_tokens - cached - written
    write_price = price.cache_write if price.cache_write is not None else price.input
    usd = (
        fresh * price.input
        + cached * price.cached_input
        + written * write_price
        + max(0, output_tokens) * price.output
    ) / PER_MILLION
    return CostEstimate(round(usd, 8), known=True)


def cost_known(model_ref: str) -> bool:
    """Whether a ``provider/model`` reference has a price (scripted models are free, so known)."""
    provider, _, name = model_ref.partition("/")
    if provider == "scripted":
        return True
    return price_for(name or provider) is not None
