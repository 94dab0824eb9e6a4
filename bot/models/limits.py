"""What a provider endpoint allows, learned from its answers: pure, clock passed in.

Two mechanisms, because providers limit two different things:

- **Rate** (``Bucket``, ``RateHeaders``): OpenAI and Anthropic limit requests
  and tokens per minute and say where an account stands in every answer's
  headers (``x-ratelimit-*``, ``anthropic-ratelimit-*``). A bucket per
  dimension holds the last figure the provider gave, minus what this process
  sent since, refilled at the provider's per-minute rate; a call whose
  estimate does not fit waits for the refill instead of drawing a 429.
- **Concurrency** (``Aimd``): servers that send no such headers (Ollama, vLLM,
  a proxy), and overload that no header predicts (Anthropic's 529, a 503),
  are handled by an additive-increase / multiplicative-decrease window over
  the calls in flight. AIMD is what TCP uses for the same problem: the
  capacity is unknown and shared with senders we cannot see (other processes,
  other clients of the account). Independent AIMD senders converge to a stable
  and fair share of it (Chiu & Jain, 1989), where a fixed cap is either too low
  for a large account or too high for a small one. Before the first overload
  the window grows by one per call answered ("slow start": it doubles every
  round trip, so a large account's capacity is reached in a few seconds), after
  it by one per window (a gentle probe); each overload signal cuts it to 70%
  (CUBIC's factor: gentler than halving, as a 429 here is a pacing signal,
  not a lost packet), once per round trip.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

# Providers' limits are per minute: a bucket refills its whole capacity in this time.
MINUTE_S = 60.0
# The window's multiplicative decrease on overload (see the module docstring).
DECREASE = 0.7
# An operator's per-minute ceiling: this share of it as the burst (Bucket.ceiling).
CEILING_BURST = 0.1
# The window grows only while it is in use: at least this share of it in flight.
BUSY_SHARE = 0.5


class Aimd:
    """The concurrency window of one endpoint.

    ``limit`` is the number of calls that may be in flight; it moves between
    ``floor`` and ``ceiling`` (the operator's ``provider_concurrency``).
    """

    def __init__(self, *, initial: float, ceiling: float, floor: float = 1.0) -> None:
        self.ceiling = max(floor, ceiling)
        self.floor = floor
        self.limit = min(self.ceiling, max(floor, initial))
        # Slow start until the first overload; then congestion avoidance.
        self.threshold = self.ceiling
        # When the last decrease happened (the caller's clock): an overload
        # answered to a call sent before it was already counted.
        self.decreased_at = -math.inf

    @property
    def slots(self) -> int:
        return max(1, int(self.limit))

    def on_success(self, in_flight: int) -> None:
        """A call was answered; ``in_flight`` counts it still. The window grows
        only if it was used (an idle endpoint learns nothing about its limit)."""
        if in_flight < self.limit * BUSY_SHARE:
            return
        step = 1.0 if self.limit < self.threshold else 1.0 / self.limit
        self.limit = min(self.ceiling, self.limit + step)

    def on_overload(self, sent_at: float, now: float) -> bool:
        """The endpoint refused a call sent at ``sent_at`` as overloaded or rate
        limited: shrink, unless this round trip's overload was already counted.
        True if the window shrank."""
        if sent_at < self.decreased_at:
            return False
        self.limit = max(self.floor, self.limit * DECREASE)
        self.threshold = self.limit
        self.decreased_at = now
        return True

    def adopt(self, limit: float, decreased_at: float) -> None:
        """Another process backed off later than this one: take its window."""
        if decreased_at > self.decreased_at:
            self.limit = min(self.ceiling, max(self.floor, limit))
            self.threshold = self.limit
            self.decreased_at = decreased_at


class Bucket:
    """One rate dimension (requests or tokens) as a token bucket: ``capacity``,
    refilled continuously in ``period_s``, as both providers describe their
    limits (a minute's worth, refilled over a minute).

    Unknown (no figure from the provider, no ceiling) means unlimited. The level
    may go negative: an estimate debited that turned out too small, or a
    provider's figure that already counts calls still in flight.
    """

    def __init__(
        self, capacity: float | None = None, *, period_s: float = MINUTE_S, now: float = 0.0
    ) -> None:
        self.capacity = capacity
        self.period_s = period_s
        self.level = capacity if capacity is not None else 0.0
        self.at = now
        # The most the provider ever said was left: its bucket may hold less than
        # a minute's worth (limits enforced over shorter periods), and an idle
        # spell must not be taken for a full minute's burst.
        self.peak: float | None = None

    @classmethod
    def ceiling(cls, per_minute: float | None, *, now: float = 0.0) -> Bucket:
        """An operator's "at most N a minute": a tenth of N as the burst and the
        rest as the refill (0.9 N a minute), so no window of a minute holds more
        than N while a steady load still gets 90% of it."""
        if per_minute is None:
            return cls(now=now)
        burst = per_minute * CEILING_BURST
        return cls(burst, period_s=MINUTE_S * burst / (per_minute - burst), now=now)

    def _full(self) -> float:
        assert self.capacity is not None
        return self.capacity if self.peak is None else min(self.capacity, self.peak)

    def level_at(self, now: float) -> float:
        if self.capacity is None:
            return math.inf
        refill = max(0.0, now - self.at) * self.capacity / self.period_s
        return min(self._full(), self.level + refill)

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` fits (0 now; an amount over the capacity
        waits only for a full bucket, or it would never go)."""
        if self.capacity is None or self.capacity <= 0:
            return 0.0
        need = min(amount, self._full()) - self.level_at(now)
        return max(0.0, need * self.period_s / self.capacity)

    def debit(self, amount: float, now: float) -> None:
        if self.capacity is None:
            return
        self.level = self.level_at(now) - amount
        self.at = now

    def observe(self, limit: float, remaining: float, since: float, now: float) -> None:
        """The provider said ``remaining`` of ``limit`` a minute; ``since`` is what
        this process sent after the call that carried the figure."""
        if limit <= 0:
            return
        self.capacity, self.period_s = limit, MINUTE_S
        self.peak = max(self.peak or 0.0, min(limit, remaining + 1))
        self.level = min(limit, remaining) - since
        self.at = now


@dataclass(frozen=True)
class Dimension:
    """One rate dimension as a provider stated it."""

    limit: float
    remaining: float
    reset_s: float | None  # seconds until fully replenished


@dataclass(frozen=True)
class RateHeaders:
    requests: Dimension | None = None
    tokens: Dimension | None = None

    @property
    def empty(self) -> bool:
        return self.requests is None and self.tokens is None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(raw: str) -> float | None:
    """OpenAI's reset times: ``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``; a bare number is seconds."""
    text = raw.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def parse_instant(raw: str, now: datetime) -> float | None:
    """Anthropic's reset times: RFC 3339 instants, as seconds from ``now``."""
    try:
        when = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def _number(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _dimension(
    headers: Mapping[str, str], limit: str, remaining: str, reset: str, *, now: datetime
) -> Dimension | None:
    cap, left = _number(headers.get(limit)), _number(headers.get(remaining))
    if cap is None or left is None or cap <= 0:
        return None
    raw = headers.get(reset)
    if raw is None:
        reset_s = None
    elif reset.startswith("anthropic-"):
        reset_s = parse_instant(raw, now)
    else:
        reset_s = parse_duration(raw)
    return Dimension(cap, left, reset_s)


def read_rate_headers(headers: Mapping[str, str], *, now: datetime | None = None) -> RateHeaders:
    """The rate limits an answer states, in either provider's spelling.

    OpenAI (and compatible servers that copy it): ``x-ratelimit-limit-requests``,
    ``x-ratelimit-remaining-requests``, ``x-ratelimit-reset-requests``, and the
    same for ``-tokens``. Anthropic: ``anthropic-ratelimit-requests-{limit,
    remaining,reset}`` and ``anthropic-ratelimit-tokens-*`` (the most restrictive
    token limit in force), else ``-input-tokens-*``. ``headers`` must answer
    lower-case names (httpx's do, whatever the case on the wire).
    """
    at = now or datetime.now(UTC)
    openai_requests = _dimension(
        headers,
        "x-ratelimit-limit-requests",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
        now=at,
    )
    openai_tokens = _dimension(
        headers,
        "x-ratelimit-limit-tokens",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-tokens",
        now=at,
    )
    if openai_requests is not None or openai_tokens is not None:
        return RateHeaders(openai_requests, openai_tokens)

    def anthropic(kind: str) -> Dimension | None:
        prefix = f"anthropic-ratelimit-{kind}-"
        return _dimension(headers, prefix + "limit", prefix + "remaining", prefix + "reset", now=at)

    return RateHeaders(anthropic("requests"), anthropic("tokens") or anthropic("input-tokens"))
