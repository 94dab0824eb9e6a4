"""Price table, cost estimates and Retry-After handling (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from tenacity import AsyncRetrying, RetryCallState

from bot.core.errors import TransientModelError
from bot.core.redact import redact_known as redact
from bot.models.pricing import PRICES, cost_known, estimate_cost, price_for
from bot.models.retry import RetryAfterOrBackoff, RetryPolicy, parse_retry_after


def test_openai_cost_splits_cached_and_fresh_input() -> None:
    # gpt-4.1-mini: $0.40 input, $0.10 cached, $1.60 output per million.
    est = estimate_cost(
        "gpt-4.1-mini", input_tokens=1_000_000, cached_tokens=400_000, output_tokens=500_000
    )
    assert est.known
    assert est.usd == pytest.approx(0.6 * 0.40 + 0.4 * 0.10 + 0.5 * 1.60)


def test_anthropic_cache_writes_cost_more_than_input() -> None:
    # claude-sonnet-4-5: $3 input, $0.30 reads, $3.75 writes, $15 output per million.
    est = estimate_cost(
        "claude-sonnet-4-5-20250929",
        input_tokens=3_000_000,
        cached_tokens=1_000_000,
        cache_write_tokens=1_000_000,
        output_tokens=0,
    )
    assert est.usd == pytest.approx(3.00 + 0.30 + 3.75)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("gpt-4.1", "gpt-4.1"),
        ("GPT-4o-mini", "gpt-4o-mini"),
        ("openai/gpt-4o", "gpt-4o"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
    ],
)
def test_price_lookup_matches_versions_not_siblings(name: str, key: str) -> None:
    assert price_for(name) == PRICES[key]


@pytest.mark.parametrize("name", ["llama3.1", "gpt-4o-audio-preview", "o1-pro", "claude-9"])
def test_unknown_models_cost_zero_and_are_flagged(name: str) -> None:
    est = estimate_cost(name, input_tokens=10_000, output_tokens=10_000)
    assert est.usd == 0.0 and not est.known


def test_cost_known_for_references() -> None:
    assert cost_known("openai/gpt-4.1-mini")
    assert cost_known("scripted/anything")
    assert not cost_known("ollama/llama3.1")


def test_parse_retry_after_forms() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after": "-3"}) == 0.0
    assert parse_retry_after({"retry-after": "Wed, 01 Jan 2025 12:00:30 GMT"}, now=now) == 30.0
    assert parse_retry_after({"retry-after": "Wed, 01 Jan 2025 11:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def _state_after(exc: BaseException, attempt: int = 1) -> RetryCallState:
    state = RetryCallState(AsyncRetrying(), None, (), {})
    state.attempt_number = attempt
    state.set_exception((type(exc), exc, None))
    return state


def test_wait_honours_retry_after_up_to_the_cap() -> None:
    wait = RetryAfterOrBackoff(RetryPolicy(max_wait_s=5.0))
    assert (
        wait(_state_after(TransientModelError("x", drop_class="rate_limited", retry_after=2))) == 2
    )
    assert (
        wait(_state_after(TransientModelError("x", drop_class="rate_limited", retry_after=60))) == 5
    )


def test_wait_without_retry_after_backs_off_exponentially_within_the_cap() -> None:
    policy = RetryPolicy(max_wait_s=3.0, initial_backoff_s=0.5)
    wait = RetryAfterOrBackoff(policy)
    exc = TransientModelError("x", drop_class="provider_error")
    first = wait(_state_after(exc, attempt=1))
    third = wait(_state_after(exc, attempt=3))
    assert 0.5 <= first <= 1.0  # 0.5 plus up to 0.5 jitter
    assert 2.0 <= third <= 2.5
    assert wait(_state_after(exc, attempt=10)) == 3.0


def test_redact_scrubs_every_secret() -> None:
    assert redact("key sk-abc and sk-abc", ("sk-abc", "")) == "key *** and ***"
