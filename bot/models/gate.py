"""The gate every HTTP call to one model endpoint passes: capacity, pacing, fair turns.

A call waits here, in the fair queue (bot/models/fair.py), until all of these allow it:

- the concurrency window (``Aimd``, bot/models/limits.py), at most the operator's
  ``provider_concurrency`` ceiling;
- the endpoint's request and token budgets as its rate-limit headers last stated
  them, refilled at the per-minute rate (``Bucket``), and the operator's own
  per-minute ceilings;
- a hold after a 429: the provider's ``retry-after`` (else the reset of the
  exhausted limit, else a short backoff) holds every call to the endpoint, not
  only the one refused, as the others would be refused too.

With PostgreSQL the learned window and the hold are shared by every process
(``SharedLimits``, bot/store/model_limits.py): a 429 one worker meets holds the
others at their next sync (within ``SYNC_S``), and a new worker starts from the
window the others learned rather than from scratch.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from bot.core.aio import store_call
from bot.core.fair import FairQueue, Share
from bot.core.logs import get_logger
from bot.models.fair import CallInfo
from bot.models.limits import Aimd, Bucket, RateHeaders, read_rate_headers

log = get_logger(__name__)

# How often a busy gate syncs with the other processes' (PostgreSQL).
SYNC_S = 2.0
# The window a fresh endpoint starts with, before any answer: generous (the
# providers limit rates, not calls in flight, and pacing from their headers
# starts with the first answer); slow start doubles it every round trip.
INITIAL_WINDOW = 128
# A 429 without retry-after or reset figures holds the endpoint this long,
# doubling while they repeat (up to the retry policy's cap on one wait).
FIRST_HOLD_S = 1.0
# Answers that mean "fewer calls, please": rate limited, overloaded, unavailable.
OVERLOAD_STATUSES = frozenset({429, 503, 529})
# Output tokens a call is expected to use before any answer said (a share of its
# cap: most answers stop well short of it).
FIRST_OUTPUT_SHARE = 0.5
# Calls sent this soon before another may reach the provider after it (separate
# connections): its figures may not count them yet.
REORDER_S = 0.25
# Weight of the newest answer in the running mean of output tokens.
OUTPUT_EWMA = 0.2


class SharedLimit(Protocol):
    """An endpoint's limit as every process knows it (wall-clock times)."""

    @property
    def window(self) -> float: ...
    @property
    def decreased_at(self) -> datetime | None: ...
    @property
    def hold_until(self) -> datetime | None: ...


class SharedLimits(Protocol):
    """The store's side (``RunStore.sync_model_limit``, bot/store/model_limits.py)."""

    def sync_model_limit(
        self,
        endpoint: str,
        window: float,
        decreased_at: datetime | None,
        hold_until: datetime | None,
    ) -> SharedLimit:
        """Merge this process's view in and answer the merged one."""
        ...


@dataclass(frozen=True)
class Ticket:
    """A call let through: when, its place in the send order, its estimate."""

    sent_at: float
    requests_sent: int  # the process's requests sent to the endpoint, this one included
    tokens_sent: float
    tokens: float
    share: Share
    place: int


@dataclass
class _Waiter:
    future: asyncio.Future[Ticket]
    tokens: float
    share: Share


class EndpointGate:
    def __init__(
        self,
        name: str,
        *,
        key: str | None = None,
        ceiling: int,
        initial: int = INITIAL_WINDOW,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        max_hold_s: float = 60.0,
        shared: SharedLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.key = key or name  # the endpoint's row in the shared table
        self._clock = clock
        self._wall_offset = wall() - clock()
        now = clock()
        self.window = Aimd(initial=min(initial, ceiling), ceiling=ceiling)
        # Learned from the provider's headers; operators' ceilings beside them.
        self.requests = Bucket(now=now)
        self.tokens = Bucket(now=now)
        self._ceilings = (
            Bucket.ceiling(requests_per_minute, now=now),
            Bucket.ceiling(tokens_per_minute, now=now),
        )
        self.hold_until = -math.inf
        self._hold_s = FIRST_HOLD_S
        self._max_hold_s = max_hold_s
        self.in_flight = 0
        self._queue: FairQueue[_Waiter] = FairQueue()
        self._timer: asyncio.TimerHandle | None = None
        self._requests_sent = 0
        self._tokens_sent = 0.0
        self._observed = 0  # requests_sent of the call whose headers were read last
        # Calls in flight, as (requests_sent, tokens, sent_at), in send order.
        self._open: list[tuple[int, float, float]] = []
        self._output: float | None = None
        self._shared = shared
        self._synced_at = -math.inf
        self._syncing = False
        self._dirty = False  # a back-off or hold the others have not heard of
        self._loaded = False
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def held_for(self) -> float:
        """Seconds the endpoint is still held after a 429 (0: not held)."""
        return max(0.0, self.hold_until - self._clock())

    # -- admission -----------------------------------------------------------

    def estimate(self, info: CallInfo | None) -> float:
        """Tokens a call will count against the endpoint: its input, and its output
        as the endpoint's answers have run (capped by the call's limit)."""
        if info is None:
            return 0.0
        expected = (
            self._output
            if self._output is not None
            else info.max_output_tokens * FIRST_OUTPUT_SHARE
        )
        return info.input_tokens + min(float(info.max_output_tokens), expected)

    def _wait(self, tokens: float, now: float) -> float:
        requests_ceiling, tokens_ceiling = self._ceilings
        return max(
            self.hold_until - now,
            self.requests.wait_for(1, now),
            self.tokens.wait_for(tokens, now),
            requests_ceiling.wait_for(1, now),
            tokens_ceiling.wait_for(tokens, now),
            0.0,
        )

    async def enter(self, call_info: CallInfo | None = None, place: int | None = None) -> Ticket:
        """Wait for this call's fair turn; ``call_info`` says whose call it is and
        its size (None: nobody's, no estimate); ``place`` is a turn it held before
        (a call sent back by a 429 keeps it)."""
        share = call_info.share if call_info is not None else Share()
        tokens = self.estimate(call_info)
        self._maybe_sync()
        now = self._clock()
        if not self._queue and self.in_flight < self.window.slots and self._wait(tokens, now) <= 0:
            return self._start(tokens, share, now, place)
        future: asyncio.Future[Ticket] = asyncio.get_running_loop().create_future()
        entry = self._queue.push(share, _Waiter(future, tokens, share), seq=place)
        self._dispatch()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.leave(future.result())  # let through as it was cancelled
            else:
                self._queue.drop(entry)
                self._dispatch()
            raise

    def _start(self, tokens: float, share: Share, now: float, place: int | None) -> Ticket:
        self.in_flight += 1
        for bucket, amount in zip(
            (self.requests, self.tokens, *self._ceilings), (1, tokens, 1, tokens), strict=True
        ):
            bucket.debit(amount, now)
        self._requests_sent += 1
        self._tokens_sent += tokens
        self._open.append((self._requests_sent, tokens, now))
        return Ticket(
            now,
            self._requests_sent,
            self._tokens_sent,
            tokens,
            share,
            place if place is not None else -self._requests_sent,
        )

    def _dispatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = self._clock()
        while self._queue and self.in_flight < self.window.slots:
            found = self._queue.peek()
            assert found is not None
            waiter, place = found
            wait = self._wait(waiter.tokens, now)
            if wait > 0:
                self._timer = asyncio.get_running_loop().call_later(wait, self._dispatch)
                return
            self._queue.pop()
            if not waiter.future.done():
                waiter.future.set_result(self._start(waiter.tokens, waiter.share, now, place))

    # -- answers -------------------------------------------------------------

    def leave(
        self,
        ticket: Ticket,
        status: int | None = None,
        headers: Mapping[str, str] | None = None,
        retry_after: float | None = None,
    ) -> float:
        """The call's answer (``status`` None: none came). Returns the wait a 429
        stated (see ``_hold``), 0 otherwise."""
        now = self._clock()
        index = bisect.bisect_left(self._open, (ticket.requests_sent, -math.inf, -math.inf))
        # Calls sent just before this one may have reached the provider after it.
        older = []
        for call in reversed(self._open[:index]):
            if call[2] < ticket.sent_at - REORDER_S:
                break
            older.append(call)
        del self._open[index]
        if headers is not None:
            self._observe(ticket, read_rate_headers(headers), older, now)
        held = 0.0
        if status is not None and 200 <= status < 300:
            self.window.on_success(self.in_flight)
            self._hold_s = FIRST_HOLD_S
        elif status in OVERLOAD_STATUSES:
            if self.window.on_overload(ticket.sent_at, now):
                log.info("model.backoff", endpoint=self.name, window=round(self.window.limit, 1))
                self._dirty = True  # tell the others at once
            if status == 429:
                held = self._hold(retry_after, headers, now)
        self.in_flight -= 1
        self._maybe_sync()
        self._dispatch()
        return held

    def learn_output(self, output_tokens: int) -> None:
        """An answer's output tokens, for the next calls' estimates."""
        if self._output is None:
            self._output = float(output_tokens)
        else:
            self._output += OUTPUT_EWMA * (output_tokens - self._output)

    def _observe(
        self, ticket: Ticket, rates: RateHeaders, older: list[tuple[int, float, float]], now: float
    ) -> None:
        # Answers arrive out of order: only a figure newer than the last one read
        # counts, less what was sent after the call that carried it, and less the
        # calls sent just before it still unanswered (they may have reached the
        # provider after it, uncounted in its figure).
        if rates.empty or ticket.requests_sent <= self._observed:
            return
        self._observed = ticket.requests_sent
        if rates.requests is not None:
            since = self._requests_sent - ticket.requests_sent + len(older)
            self.requests.observe(rates.requests.limit, rates.requests.remaining, since, now)
        if rates.tokens is not None:
            since_tokens = self._tokens_sent - ticket.tokens_sent + sum(t for _, t, _ in older)
            self.tokens.observe(rates.tokens.limit, rates.tokens.remaining, since_tokens, now)

    def _hold(
        self, retry_after: float | None, headers: Mapping[str, str] | None, now: float
    ) -> float:
        """Hold the endpoint after a 429. Returns the wait the provider stated (its
        ``retry-after``, else the reset of a limit its headers show exhausted), or
        0 when it stated none: then a short backoff holds the endpoint, and the
        refusal counts as a failed attempt of the call."""
        stated = retry_after
        if stated is None and headers is not None:
            rates = read_rate_headers(headers)
            resets = [
                d.reset_s
                for d in (rates.requests, rates.tokens)
                if d is not None and d.remaining < 1 and d.reset_s is not None
            ]
            stated = min(resets) if resets else None
        if stated is None:
            wait = self._hold_s
            self._hold_s = min(self._max_hold_s, self._hold_s * 2)
        else:
            wait = max(0.0, stated)
        if now + wait > self.hold_until:
            self.hold_until = now + wait
            self._dirty = True
        return max(0.0, stated or 0.0)

    # -- sharing across processes ---------------------------------------------

    def _to_wall(self, t: float) -> datetime | None:
        if not math.isfinite(t):
            return None
        return datetime.fromtimestamp(t + self._wall_offset, UTC)

    def _from_wall(self, t: datetime | None) -> float:
        return -math.inf if t is None else t.timestamp() - self._wall_offset

    def _maybe_sync(self) -> None:
        if self._shared is None or self._syncing:
            return
        if not self._dirty and self._clock() - self._synced_at < SYNC_S:
            return
        self._syncing = True
        task = asyncio.get_running_loop().create_task(self._sync(self._shared))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def sync_now(self) -> None:
        """Sync with the other processes now (after any sync under way)."""
        while self._tasks:
            await asyncio.gather(*self._tasks)
        if self._shared is not None:
            self._syncing = True
            await self._sync(self._shared)

    async def _sync(self, shared: SharedLimits) -> None:
        self._dirty = False  # what changes from here is told next time
        try:
            merged = await store_call(
                shared,
                shared.sync_model_limit,
                self.key,
                self.window.limit,
                self._to_wall(self.window.decreased_at),
                self._to_wall(self.hold_until),
            )
        except Exception as exc:  # the store down: carry on with what this process knows
            log.warning("model.limit_sync_failed", endpoint=self.name, error=type(exc).__name__)
            return
        finally:
            self._syncing = False
            self._synced_at = self._clock()
        self.hold_until = max(self.hold_until, self._from_wall(merged.hold_until))
        if not self._loaded and merged.decreased_at is None:
            # No process has met an overload here: start from the widest window
            # any reached (the merge keeps the largest).
            self.window.limit = min(self.window.ceiling, max(self.window.limit, merged.window))
        self._loaded = True
        self.window.adopt(merged.window, self._from_wall(merged.decreased_at))
        self._dispatch()
