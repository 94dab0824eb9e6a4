"""Pacing of content-creating calls, per installation.

GitHub's secondary limits on content creation are about 80 requests a minute and
500 an hour, and its best practices ask for at least a second between mutating
requests. A ``WritePacer`` serialises writes and keeps them at least
``interval_s`` apart; clock and sleep are injected so tests need not wait.

With several processes (PostgreSQL), ``reserve`` hands the decision to the
database, which spaces the installation's writes across all of them and holds
the per-minute and per-hour limits too (bot/store/pacing.py). A writer woken
later than its slot (a busy event loop) must not send at once: the next slot,
perhaps another process's, was counted from the one it missed. ``on_late``
moves that next slot back if nobody holds it yet; otherwise it reserves again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Protocol

from bot.core.fair import FairQueue, Share

# Added to a non-zero interval: a write is sent a little after its slot (a busy
# event loop, a thread hop), and the next one must still arrive a full interval
# after it at GitHub.
JITTER_MARGIN_S = 0.1
# Fresh slots taken by a writer that keeps waking too late before it sends anyway.
LATE_RESERVATIONS = 2


class SharedSlots(Protocol):
    """Write slots handed out by the database (``RunStore``, bot/store/pacing.py)."""

    def reserve_write(
        self, installation_id: int, interval_s: float, max_wait_s: float | None = None
    ) -> tuple[float, datetime]:
        """Seconds to wait for the installation's next slot, and the slot after it
        (not taken when more than ``max_wait_s`` away)."""
        ...

    def hold_writes(self, installation_id: int, until: datetime) -> None:
        """No slot of the installation before ``until`` (a rate limit)."""
        ...

    def extend_write_slot(self, installation_id: int, next_at: datetime, late_s: float) -> bool:
        """Move the slot after a late writer's back by ``late_s``, if still ``next_at``."""
        ...


class _OldestFirst:
    """A lock whose waiters enter oldest run first (``since``: when the writer's
    run started, epoch seconds), then in arrival order (bot/core/fair.py, one
    installation's queue): asyncio.Lock's FIFO would queue a debate's later
    rounds behind every newer debate's first posts (issue 22's fair shares). A
    delivery's writes count from the webhook's arrival, and a writer without a
    time (None) from when it queues."""

    def __init__(self) -> None:
        self._held = False
        self._waiting: FairQueue[asyncio.Future[None]] = FairQueue()

    @asynccontextmanager
    async def turn(self, since: float | None) -> AsyncIterator[None]:
        await self._acquire(since)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, since: float | None) -> None:
        if not self._held and not len(self._waiting):
            self._held = True
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = self._waiting.push(Share(since=time.time() if since is None else since), future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release()  # handed the lock as it was cancelled: pass it on
            else:
                self._waiting.drop(entry)
            raise

    def _release(self) -> None:
        while (waiter := self._waiting.pop()) is not None:
            future, _ = waiter
            if not future.done():
                future.set_result(None)  # held passes straight to it
                return
        self._held = False


def spacing(interval_s: float) -> float:
    """The spacing the pacer keeps for a configured interval."""
    return interval_s + JITTER_MARGIN_S if interval_s > 0 else 0.0


class WritePacer:
    def __init__(
        self,
        interval_s: float,
        *,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        reserve: Callable[[], Awaitable[float]] | None = None,
        on_late: Callable[[float], Awaitable[bool]] | None = None,
    ) -> None:
        self.interval_s = max(0.0, interval_s)
        self._reserve = reserve
        self._on_late = on_late
        self._clock = clock
        self._sleep = sleep
        self._lock = _OldestFirst()
        self._next_at: float | None = None

    async def wait_turn(self, since: float | None = None) -> float:
        """Wait until the next write may start; returns the seconds waited. Among
        the writes waiting, those of the oldest run (``since``) go first."""
        if self._reserve is not None:
            async with self._lock.turn(since):  # one reservation at a time from this process
                waited = 0.0
                for _ in range(1 + LATE_RESERVATIONS):
                    delay = await self._reserve()
                    if delay <= 0:
                        # Nobody was ahead: the slot is now. (Late only by the hop
                        # back from the database; asking it again would cost every
                        # such write a round trip under load, for a writer that
                        # would have to reserve within that hop to be affected.)
                        break
                    before = self._clock()
                    await self._sleep(delay)
                    waited += delay
                    late = self._clock() - before - delay
                    if late <= JITTER_MARGIN_S / 2:
                        break
                    if self._on_late is None or await self._on_late(late):
                        break
                return waited
        if self.interval_s == 0:
            return 0.0
        async with self._lock.turn(since):
            now = self._clock()
            delay = 0.0 if self._next_at is None else max(0.0, self._next_at - now)
            if delay > 0:
                await self._sleep(delay)
            # From the slot we were given, or from the clock after sleeping if
            # that is later (woken late): an injected sleep that does not advance
            # the clock still spaces writes.
            self._next_at = max(now + delay, self._clock()) + self.interval_s
            return delay
