"""Pacing of content-creating calls, per installation.

GitHub's secondary limits on content creation are about 80 requests a minute and
500 an hour, and its best practices ask for at least a second between mutating
requests. A ``WritePacer`` serialises writes and keeps them at least
``interval_s`` apart; clock and sleep are injected so tests need not wait.

With several processes (PostgreSQL), ``reserve`` hands the decision to the
database, which spaces the installation's writes across all of them and holds
the per-minute and per-hour limits too (bot/store/pacing.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

# Added to a non-zero interval: a write is sent a little after its slot (a busy
# event loop, a thread hop), and the next one must still arrive a full interval
# after it at GitHub.
JITTER_MARGIN_S = 0.1


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
    ) -> None:
        self.interval_s = max(0.0, interval_s)
        self._reserve = reserve
        self._clock = clock
        self._sleep = sleep
        self._lock = asyncio.Lock()
        self._next_at: float | None = None

    async def wait_turn(self) -> float:
        """Wait until the next write may start; returns the seconds waited."""
        if self._reserve is not None:
            async with self._lock:  # one reservation at a time from this process
                delay = await self._reserve()
                if delay > 0:
                    await self._sleep(delay)
                return delay
        if self.interval_s == 0:
            return 0.0
        async with self._lock:
            now = self._clock()
            delay = 0.0 if self._next_at is None else max(0.0, self._next_at - now)
            if delay > 0:
                await self._sleep(delay)
            # From the slot we were given, or from the clock after sleeping if
            # that is later (woken late): an injected sleep that does not advance
            # the clock still spaces writes.
            self._next_at = max(now + delay, self._clock()) + self.interval_s
            return delay
