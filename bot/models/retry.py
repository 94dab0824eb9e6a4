"""One JSON POST to a model API with bounded retries, timeouts and a fair turn at the gate.

Shared by the OpenAI-compatible and Anthropic providers. Status codes are mapped
to stable drop classes here, once:

- 429 that states a wait (``Retry-After`` above 0, or a reset in the rate-limit
  headers of a limit they show exhausted) → waited out, not counted as a failed
  attempt: the endpoint's gate (bot/models/gate.py) holds every call for that long,
  and the call goes again in its old place in line; after ``rate_limit_wait_s``
  of such waits in all, or one wait longer than that, → ``rate_limited`` (a
  fallback model may answer). A 429 stating no wait → retried as a failed
  attempt (the gate holds the endpoint for a short, doubling backoff), then
  ``rate_limited``
- 408, timeouts → retried, then ``timeout``
- 5xx (and 529 "overloaded") → retried, then ``provider_error``; a Retry-After
  beyond the wait cap → not retried, ``rate_limited``
- connection failures → retried, then ``unavailable``; other transport errors →
  retried, then ``provider_error``
- any other httpx error (a body that cannot be decoded, too many redirects) →
  ``provider_error``, not retried; a malformed endpoint URL → ``unavailable``
- 401/403/404 → ``unavailable`` (bad key, unknown model); other 4xx → ``provider_error``
- a 2xx body that is not a JSON object → ``unusable_output``
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)
from tenacity.wait import wait_base

from bot.core.errors import ModelError, TransientModelError
from bot.core.logs import get_logger
from bot.core.redact import redact_known as redact
from bot.core.settings import Settings
from bot.models.fair import CallInfo
from bot.models.gate import OVERLOAD_STATUSES, EndpointGate

log = get_logger(__name__)

_ERROR_SNIPPET_CHARS = 300


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3  # retries after the first attempt
    max_wait_s: float = 30.0  # cap on any single wait, Retry-After included
    timeout_s: float = 120.0  # per attempt, connect to last byte
    initial_backoff_s: float = 0.5
    # Waiting out 429s, in all, before the call is dropped as rate limited.
    rate_limit_wait_s: float = 300.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(
            max_retries=max(0, settings.model_max_retries),
            max_wait_s=max(0.0, settings.model_max_retry_wait_s),
            timeout_s=settings.model_timeout_s,
            rate_limit_wait_s=max(0.0, settings.model_rate_limit_wait_s),
        )


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


class RetryAfterOrBackoff(wait_base):
    """The server's Retry-After when it sent one, else exponential backoff; both capped."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._cap = policy.max_wait_s
        # Exponential with additive jitter, so parallel callers don't retry in lockstep.
        self._backoff = wait_exponential(
            multiplier=policy.initial_backoff_s, max=policy.max_wait_s
        ) + wait_random(0, policy.initial_backoff_s)

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, TransientModelError) and exc.retry_after is not None:
            return min(exc.retry_after, self._cap)
        return min(self._backoff(retry_state), self._cap)


def _error_detail(response: httpx.Response) -> str:
    """The provider's own error message, if the body has one (both APIs nest it in ``error``)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:_ERROR_SNIPPET_CHARS]
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:_ERROR_SNIPPET_CHARS]
        if isinstance(err, str):
            return err[:_ERROR_SNIPPET_CHARS]
    return response.text[:_ERROR_SNIPPET_CHARS]


def _raise_for_status(response: httpx.Response, label: str, secrets: tuple[str, ...]) -> None:
    status = response.status_code
    if status < 400:
        return
    message = redact(f"{label}: HTTP {status}: {_error_detail(response)}", secrets)
    if status == 429:
        retry_after = parse_retry_after(response.headers)
        raise TransientModelError(message, drop_class="rate_limited", retry_after=retry_after)
    if status == 408:
        raise TransientModelError(message, drop_class="timeout")
    if status >= 500:
        retry_after = parse_retry_after(response.headers)
        raise TransientModelError(message, drop_class="provider_error", retry_after=retry_after)
    if status in (401, 403, 404):
        raise ModelError(message, drop_class="unavailable")
    raise ModelError(message, drop_class="provider_error")


async def _send(
    client: httpx.AsyncClient,
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    policy: RetryPolicy,
    label: str,
) -> httpx.Response:
    """One HTTP attempt, its failures mapped to model errors."""
    timeout = httpx.Timeout(policy.timeout_s, connect=min(10.0, policy.timeout_s))
    try:
        # httpx's timeout is per read; this bounds the whole attempt.
        async with asyncio.timeout(policy.timeout_s):
            return await client.post(url, json=body, headers=headers, timeout=timeout)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise TransientModelError(
            f"{label}: no answer within {policy.timeout_s:g}s", drop_class="timeout"
        ) from exc
    except httpx.ConnectError as exc:
        raise TransientModelError(
            f"{label}: cannot connect ({connect_reason(exc)})", drop_class="unavailable"
        ) from exc
    except httpx.TransportError as exc:
        raise TransientModelError(
            f"{label}: connection failed ({type(exc).__name__})", drop_class="provider_error"
        ) from exc
    except httpx.HTTPError as exc:
        # E.g. DecodingError: a proxy's bad gzip. The answer is lost but the
        # router must still get a ModelError, so fallbacks run.
        raise ModelError(
            f"{label}: unreadable response ({type(exc).__name__})", drop_class="provider_error"
        ) from exc
    except httpx.InvalidURL as exc:
        raise ModelError(f"{label}: the endpoint URL is invalid", drop_class="unavailable") from exc


@dataclass(frozen=True)
class Gated:
    """A call's way to its endpoint: the endpoint's gate, and whose call it is and
    its size for the gate's fair turns and token budget (None: nobody's)."""

    gate: EndpointGate
    call_info: CallInfo | None = None


async def _through_gate(
    gated: Gated,
    send: Callable[[], Awaitable[httpx.Response]],
    policy: RetryPolicy,
    label: str,
) -> httpx.Response:
    """Send when the gate lets the call through; a 429 is waited out (the gate
    holds the endpoint), up to ``rate_limit_wait_s`` in all. The gate is held per
    HTTP attempt, not across waits."""
    gate = gated.gate
    waited = 0.0
    place: int | None = None
    while True:
        held = gate.held_for()
        if held > policy.rate_limit_wait_s - waited:
            # The endpoint is held (a 429's retry-after) past what this call may
            # still wait: drop it now, so its fallbacks run, rather than queue.
            raise ModelError(
                f"{label}: rate limited for {held:g}s more, over the "
                f"{policy.rate_limit_wait_s:g}s cap",
                drop_class="rate_limited",
            )
        ticket = await gate.enter(gated.call_info, place)
        try:
            response = await send()
        except BaseException:
            gate.leave(ticket)
            raise
        retry_after = (
            parse_retry_after(response.headers)
            if response.status_code in OVERLOAD_STATUSES
            else None
        )
        held = gate.leave(ticket, response.status_code, response.headers, retry_after)
        if response.status_code != 429 or held <= 0:
            # Not a stated wait: a refusal that says nothing counts as a failed attempt.
            return response
        if waited + held > policy.rate_limit_wait_s:
            log.warning(
                "model call rate limited beyond the wait cap",
                call=label,
                waited_s=round(waited, 3),
                retry_after_s=round(held, 3),
                max_wait_s=policy.rate_limit_wait_s,
            )
            # The last refusal as the error (a ModelError: not retried again).
            try:
                _raise_for_status(response, label, ())
            except TransientModelError as exc:
                raise ModelError(
                    f"{exc} (rate limited for {waited + held:g}s, over the "
                    f"{policy.rate_limit_wait_s:g}s cap)",
                    drop_class="rate_limited",
                ) from exc
        log.info("model.rate_limited", call=label, wait_s=round(held, 3))
        waited += held
        place = ticket.place


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    policy: RetryPolicy,
    gated: Gated,
    label: str,
    secrets: tuple[str, ...] = (),
) -> dict[str, Any]:
    """POST ``body`` and return the JSON object answered, retrying transient failures.

    ``label`` names the call in errors and logs (never a key); ``secrets`` are
    scrubbed from any error text taken from the response.
    """

    async def attempt() -> dict[str, Any]:
        response = await _through_gate(
            gated, lambda: _send(client, url, headers, body, policy, label), policy, label
        )
        _check_answer(response, policy, label, secrets)
        data = _json_object(response, label)
        output = _output_tokens(data)
        if output is not None:
            gated.gate.learn_output(output)
        return data

    def before_sleep(state: RetryCallState) -> None:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        log.warning(
            "model call retry",
            call=label,
            attempt=state.attempt_number,
            drop_class=getattr(exc, "drop_class", None),
            wait_s=round(state.upcoming_sleep, 3),
        )

    stop, wait, retry = _strategies(policy)
    retrying = AsyncRetrying(
        stop=stop, wait=wait, retry=retry, before_sleep=before_sleep, reraise=True
    )
    result: dict[str, Any] = await retrying(attempt)
    return result


def _check_answer(
    response: httpx.Response, policy: RetryPolicy, label: str, secrets: tuple[str, ...]
) -> None:
    """A refusal raised as the error it is; a wait longer than the cap is not
    retried (retrying sooner than asked draws more refusals and burns the
    attempts): the router tries the next model instead."""
    try:
        _raise_for_status(response, label, secrets)
    except TransientModelError as exc:
        if exc.retry_after is not None and exc.retry_after > policy.max_wait_s:
            log.warning(
                "model call not retried: server asks for a longer wait",
                call=label,
                retry_after_s=round(exc.retry_after, 3),
                max_wait_s=policy.max_wait_s,
            )
            raise ModelError(
                f"{exc} (Retry-After {exc.retry_after:g}s exceeds the "
                f"{policy.max_wait_s:g}s cap)",
                drop_class="rate_limited",
            ) from exc
        raise


def _json_object(response: httpx.Response, label: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError as exc:
        raise ModelError(f"{label}: response is not JSON", drop_class="unusable_output") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{label}: response is not a JSON object", drop_class="unusable_output")
    return data


def _output_tokens(data: Mapping[str, Any]) -> int | None:
    """The answer's output tokens in either API's usage block."""
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None
    value = usage.get("completion_tokens", usage.get("output_tokens"))
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@functools.cache
def _strategies(
    policy: RetryPolicy,
) -> tuple[stop_after_attempt, RetryAfterOrBackoff, retry_if_exception_type]:
    """tenacity's stop, wait and retry strategies for a policy: stateless, so built
    once rather than for every model call."""
    return (
        stop_after_attempt(policy.max_retries + 1),
        RetryAfterOrBackoff(policy),
        retry_if_exception_type(TransientModelError),
    )


def connect_reason(exc: BaseException) -> str:
    """The operating system's words for a failed connect ("connection refused",
    "name or service not known"), found along the exception's causes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and (seen.errno or seen.strerror):
            # errno's words: asyncio's own text is "Connect call failed (…)".
            text = os.strerror(seen.errno) if seen.errno else str(seen.strerror)
            return text[:1].lower() + text[1:]
        text = str(seen)
        if text.startswith("[Errno") and "] " in text:  # httpcore keeps only the text
            reason = text.split("] ", 1)[1]
            return reason[:1].lower() + reason[1:]
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__
