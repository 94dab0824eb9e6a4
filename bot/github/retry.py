"""When to retry a GitHub call, and how long to wait first. Pure: no I/O, no clock.

GitHub's guidance (rate limits for the REST API, "best practices"):
- a ``Retry-After`` header means: wait that many seconds (secondary rate limits);
- ``x-ratelimit-remaining: 0`` means: wait until ``x-ratelimit-reset`` (epoch s);
- a 403/429 saying "secondary rate limit" without a header: wait at least a minute,
  longer on each repeat;
- 5xx: retry a few times with exponential backoff.

Every wait is capped by ``max_wait_s``. When GitHub asks for *longer* than the cap
(a primary limit resetting in 40 minutes), we give up at once instead of sleeping
inside a request: the worker's run survives the error and the lease lets another
attempt happen later, whereas an hour-long sleep would pin a worker slot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

SECONDARY_DEFAULT_WAIT_S = 60.0  # GitHub: "wait for at least one minute"
SERVER_ERROR_BASE_WAIT_S = 1.0


@dataclass(frozen=True)
class RetryDecision:
    """``wait_s`` is None when the failure must not be retried."""

    wait_s: float | None
    reason: str

    @property
    def retry(self) -> bool:
        return self.wait_s is not None


NO_RETRY = RetryDecision(None, "not retryable")


def parse_retry_after(value: str | None, *, now_epoch: float) -> float | None:
    """``Retry-After`` is delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now_epoch)


def is_rate_limit_message(message: str) -> bool:
    """GitHub's texts for both limits: "API rate limit exceeded for installation ID …"
    (primary) and "You have exceeded a secondary rate limit …"."""
    return "rate limit" in message.lower()


def rate_limit_wait(
    *,
    status: int,
    headers: Mapping[str, str],
    message: str,
    attempt: int,
    now_epoch: float,
) -> tuple[float, str] | None:
    """How long GitHub asks us to stay quiet, and why, when a 403/429 is a rate
    limit (None: it is not one, e.g. "Resource not accessible by integration").
    Uncapped: the caller decides whether to wait or to give up."""
    if status not in (403, 429):
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    retry_after = parse_retry_after(lower.get("retry-after"), now_epoch=now_epoch)
    if retry_after is not None:
        return retry_after, "retry-after"
    if lower.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in lower:
        try:
            reset = float(lower["x-ratelimit-reset"])
        except ValueError:
            return None
        return max(0.0, reset - now_epoch) + 1.0, "rate limit reset"
    if is_rate_limit_message(message):
        # "Otherwise, wait for at least one minute before retrying", longer each time.
        return SECONDARY_DEFAULT_WAIT_S * 2.0 ** max(0, attempt - 1), "secondary rate limit"
    return None


def decide(
    *,
    status: int,
    headers: Mapping[str, str],
    message: str,
    attempt: int,
    max_wait_s: float,
    now_epoch: float,
) -> RetryDecision:
    """Decide on the failed ``attempt`` (1-based) of one call.

    ``status`` 0 stands for a transport failure (connection refused, reset, timeout)
    that the caller already judged safe to repeat.
    """
    limited = rate_limit_wait(
        status=status, headers=headers, message=message, attempt=attempt, now_epoch=now_epoch
    )
    if limited is not None:
        wait_s, reason = limited
        if reason == "secondary rate limit":
            # No header to obey: the cap shortens GitHub's minute (tests set it low).
            return RetryDecision(min(wait_s, max_wait_s), reason)
        return _bounded(wait_s, max_wait_s, reason)
    if status == 429:
        return RetryDecision(_backoff(attempt, max_wait_s), "too many requests")
    if status >= 500 or status == 0:
        return RetryDecision(_backoff(attempt, max_wait_s), f"server error {status}")
    return NO_RETRY


def _backoff(attempt: int, max_wait_s: float) -> float:
    return min(max_wait_s, SERVER_ERROR_BASE_WAIT_S * 2.0 ** max(0, attempt - 1))


def _bounded(wait_s: float, max_wait_s: float, reason: str) -> RetryDecision:
    if wait_s > max_wait_s:
        return RetryDecision(None, f"{reason}: {wait_s:.0f}s exceeds the {max_wait_s:.0f}s cap")
    return RetryDecision(wait_s, reason)
