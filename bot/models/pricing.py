"""List prices (USD per million tokens) and the deployment's ``PriceBook``.

The built-in table is a default: prices change, so the operator's price file
overrides and extends it (``PriceBook``). A model missing from both costs 0 and
is reported as unknown (``CostEstimate.known`` is False, ``Usage.price_basis``
"unknown") unless the operator set a price to assume. Names match
exactly or with a dated/``-latest`` suffix (``gpt-4.1-mini-2025-04-14``,
``claude-sonnet-4-5-20250929``); a vendor prefix as used by OpenRouter
(``openai/gpt-4o``) is ignored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import yaml

from bot.core.errors import ConfigError
from bot.engine.agents import UPSTREAM, is_agent, parse_agent
from bot.engine.types import PriceBasis, Usage

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


def _cost(price: Price, input_tokens: int, cached: int, written: int, output: int) -> float:
    cached = max(0, min(cached, input_tokens))
    written = max(0, min(written, input_tokens - cached))
    fresh = input_tokens - cached - written
    write_price = price.cache_write if price.cache_write is not None else price.input
    usd = (
        fresh * price.input
        + cached * price.cached_input
        + written * write_price
        + max(0, output) * price.output
    ) / PER_MILLION
    return round(usd, 8)


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
    return CostEstimate(
        _cost(price, input_tokens, cached_tokens, cache_write_tokens, output_tokens), known=True
    )


def cost_known(model_ref: str) -> bool:
    """Whether a ``provider/model`` reference has a price (scripted models are free, so known)."""
    provider, _, name = model_ref.partition("/")
    if provider == "scripted":
        return True
    return price_for(name or provider) is not None


# -- the deployment's price book (docs/configuration.md, "Money") -----------------

FREE = Price(0.0, 0.0, 0.0)
UnknownPrice = Literal["refuse"] | float | None


@dataclass(frozen=True)
class PriceBook:
    """The prices a deployment charges by: the operator's price file
    (``DEBATE_BOT_PRICES_FILE``) over the built-in table, and what a model with
    no price costs (``DEBATE_BOT_UNKNOWN_PRICE``: ``"refuse"``, a price assumed
    in USD per million tokens for input and output alike, or None: priced at 0
    and refused only where a budget applies)."""

    overrides: Mapping[str, Price] = field(default_factory=dict)
    unknown: UnknownPrice = None
    # The model each agent CLI runs when its seat names none (DEBATE_BOT_AGENT_<CLI>_MODEL).
    agent_models: Mapping[str, str] = field(default_factory=dict)

    def priced_as(self, model_ref: str) -> str:
        """The reference a model is priced under: an agent seat's calls go to its
        upstream provider (``agent:codex/gpt-5`` is ``openai/gpt-5``)."""
        if not is_agent(model_ref):
            return model_ref
        agent = parse_agent(model_ref)
        return f"{UPSTREAM[agent.cli]}/{agent.model or self.agent_models.get(agent.cli, '')}"

    def lookup(self, model_ref: str) -> tuple[Price | None, PriceBasis]:
        """The price of a ``provider/model`` reference and how it was found."""
        ref = self.priced_as(model_ref).strip().lower()
        provider, _, name = ref.partition("/")
        if provider == "scripted":
            return FREE, "list"
        for key in (ref, name):
            if key and key in self.overrides:
                return self.overrides[key], "list"
        price = price_for(name or provider)
        if price is not None:
            return price, "list"
        if isinstance(self.unknown, float):
            return Price(self.unknown, self.unknown, self.unknown), "assumed"
        return None, "unknown"

    def charge(self, model_ref: str, usage: Usage) -> Usage:
        """``usage`` priced by this book (its tokens are the provider's report)."""
        price, basis = self.lookup(model_ref)
        usd = (
            0.0
            if price is None
            else _cost(
                price,
                usage.input_tokens,
                usage.cached_tokens,
                usage.cache_write_tokens,
                usage.output_tokens,
            )
        )
        return replace(usage, cost_usd=usd, price_basis=basis)

    def unpriced(self, model_refs: Iterable[str]) -> list[str]:
        """The references with neither a listed nor an assumed price, sorted."""
        return sorted({r for r in model_refs if r and self.lookup(r)[0] is None})

    def refuses(self, budgeted: bool) -> bool:
        """Whether a run on an unpriced model is refused: always under
        ``refuse``, and by default where a budget applies."""
        return self.unknown == "refuse" or (self.unknown is None and budgeted)


_PRICE_KEYS = {"input", "cached_input", "output", "cache_write"}


def _rate(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: expected a number of USD per million tokens")
    rate = float(value)
    if not math.isfinite(rate) or rate < 0:
        raise ConfigError(f"{where}: expected a number of USD per million tokens, 0 or more")
    return rate


def parse_prices(data: Mapping[object, object], *, source: str) -> dict[str, Price]:
    """A price file's mapping: model reference → ``{input, cached_input, output,
    cache_write?}`` in USD per million tokens (docs/configuration.md)."""
    prices: dict[str, Price] = {}
    for ref, entry in data.items():
        where = f"{source}: {ref}"
        if not isinstance(ref, str) or not ref.strip():
            raise ConfigError(f"{source}: model references must be non-empty strings")
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: expected {{input, cached_input, output, cache_write?}}")
        keys = {str(k) for k in entry}
        missing = {"input", "cached_input", "output"} - keys
        extra = keys - _PRICE_KEYS
        if missing or extra:
            wrong = f"missing {sorted(missing)}" if missing else f"unknown keys {sorted(extra)}"
            raise ConfigError(f"{where}: {wrong} (keys: input, cached_input, output, cache_write)")
        write = entry.get("cache_write")
        prices[ref.strip().lower()] = Price(
            _rate(entry["input"], f"{where}.input"),
            _rate(entry["cached_input"], f"{where}.cached_input"),
            _rate(entry["output"], f"{where}.output"),
            None if write is None else _rate(write, f"{where}.cache_write"),
        )
    return prices


def load_price_book(prices_file: Path | None, unknown: UnknownPrice) -> PriceBook:
    """The deployment's price book from its settings; a bad file is a ConfigError
    naming the file and the entry."""
    if isinstance(unknown, int | float) and (not math.isfinite(unknown) or unknown < 0):
        raise ConfigError("DEBATE_BOT_UNKNOWN_PRICE: expected `refuse` or a price of 0 or more")
    assumed: UnknownPrice = float(unknown) if isinstance(unknown, int | float) else unknown
    if prices_file is None:
        return PriceBook(unknown=assumed)
    source = f"DEBATE_BOT_PRICES_FILE ({prices_file.name})"
    try:
        data = yaml.safe_load(prices_file.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read it: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML") from exc
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of model reference to prices")
    return PriceBook(parse_prices(data, source=source), assumed)
