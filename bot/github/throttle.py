"""Throttle: what the GitHub session keeps per installation between calls.

For each installation: its write pacer (local, or slots handed out by the
database with shared pacing), the rate-limit hold GitHub asked us to wait out
(every call waits, not only the one refused; with shared pacing the other
processes' writes wait too), and the last ``x-ratelimit-remaining`` seen. Every
answer, or the lack of one, is accounted here and reported to ``on_request``.

``bot.github.session`` decides what a failure means and when to retry; this
module only holds and applies the waits it decides on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.core.aio import store_call
from bot.core.errors import RateLimited, StoreError
from bot.core.logs import get_logger
from bot.github.pacing import SharedSlots, WritePacer

log = get_logger(__name__)

# method, route template, status (0: no answer), and whether it was a rate limit.
OnRequest = Callable[[str, str, int, bool], None]
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


@dataclass
class InstallationState:
    pacer: WritePacer
    rate_limit_remaining: int | None = None
    # Monotonic time before which no call goes to the installation: a rate limit
    # GitHub asked us to wait out binds every call, not only the one refused.
    blocked_until: float = 0.0


class Throttle:
    """Per-installation pacing, rate-limit holds and call accounting."""

    def __init__(
        self,
        *,
        clock: Clock,
        sleep: Sleep,
        wall: Clock,
        write_interval_s: float,
        max_wait_s: float,
        on_request: OnRequest | None = None,
        write_slots: SharedSlots | None = None,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._wall = wall
        self._write_interval_s = write_interval_s
        self._max_wait_s = max_wait_s
        self._on_request = on_request
        # Shared pacing (PostgreSQL): reserves a write slot in the database; blocking,
        # so it runs in a thread.
        self._write_slots = write_slots
        self._states: dict[int, InstallationState] = {}

    def rate_limit_remaining(self, installation_id: int) -> int | None:
        state = self._states.get(installation_id)
        return None if state is None else state.rate_limit_remaining

    @property
    def rate_limits(self) -> dict[int, int]:
        return {
            iid: s.rate_limit_remaining
            for iid, s in self._states.items()
            if s.rate_limit_remaining is not None
        }

    def state(self, installation_id: int) -> InstallationState:
        state = self._states.get(installation_id)
        if state is None:
            pacer = (
                WritePacer(self._write_interval_s, clock=self._clock, sleep=self._sleep)
                if self._write_slots is None
                else self._shared_pacer(installation_id)
            )
            state = InstallationState(pacer=pacer)
            self._states[installation_id] = state
        return state

    def _shared_pacer(self, installation_id: int) -> WritePacer:
        """A pacer whose slots the database hands out, across every process."""
        slots = self._write_slots
        assert slots is not None
        interval = self._write_interval_s
        # The slot after the last reservation (the pacer holds one at a time).
        following: list[datetime] = []

        async def reserve() -> float:
            """Seconds from now to the slot, counted from the slot itself: time lost
            after the database chose it (a slow commit, the thread hop back) is
            taken off the wait instead of shifting the slot later."""
            wait_s, next_at = await store_call(
                slots, slots.reserve_write, installation_id, interval, self._max_wait_s
            )
            if wait_s > self._max_wait_s:  # held by a rate limit another process met
                state = self._states.get(installation_id)
                if state is not None:
                    self.block(state, wait_s, "(held by another process)")
                raise RateLimited(
                    f"GitHub write to installation {installation_id} not sent: writes are "
                    f"held for {wait_s:.0f}s more (a rate limit another process met)",
                    github_status=None,
                    resume_at=self._wall() + wait_s,
                )
            following[:] = [next_at]
            return next_at.timestamp() - interval - self._wall()

        async def on_late(late_s: float) -> bool:
            extend = slots.extend_write_slot
            return await store_call(slots, extend, installation_id, following[0], late_s)

        return WritePacer(
            interval, clock=self._clock, sleep=self._sleep, reserve=reserve, on_late=on_late
        )

    def block(self, state: InstallationState, wait_s: float, route: str) -> None:
        """Hold every call to the installation for ``wait_s`` (GitHub: "Continuing to
        make requests while you are rate limited may result in the banning of your
        integration"). A wait beyond the cap is recorded too: calls then fail at once."""
        until = self._clock() + wait_s
        if until > state.blocked_until:
            state.blocked_until = until
            log.warning("github.rate_limited", route=route, wait_s=round(wait_s, 1))

    async def share_block(self, installation_id: int | None, wait_s: float) -> None:
        """With shared pacing, other processes' writes to the installation wait too
        (their reads find the limit themselves, one refused request each)."""
        if self._write_slots is None or installation_id is None:
            return
        # A millisecond over: the database keeps microseconds, and a hold rounded
        # down would let a write out just before GitHub's wait is over.
        until = datetime.fromtimestamp(self._wall() + wait_s + 0.001, UTC)
        try:
            slots = self._write_slots
            await store_call(slots, slots.hold_writes, installation_id, until)
        except StoreError as exc:  # this process still waits; the others find out
            log.warning("github.hold_not_shared", error=exc.code)

    async def wait_unblocked(self, state: InstallationState, method: str, route: str) -> None:
        while True:
            until = state.blocked_until
            delay = until - self._clock()
            if delay <= 0:
                return
            if delay > self._max_wait_s:
                # The run is handed back until then (bot/service/worker/pool.py).
                raise RateLimited(
                    f"GitHub {method} {route} not sent: the installation is rate-limited "
                    f"for {delay:.0f}s more",
                    github_status=None,
                    resume_at=self._wall() + delay,
                )
            await self._sleep(delay)
            if state.blocked_until == until:  # not extended while we slept
                return

    def observe(
        self,
        method: str,
        route: str,
        status: int,
        headers: Mapping[str, str] | None,
        state: InstallationState | None,
        rate_limited: bool = False,
    ) -> None:
        """Account for one attempt: the rate limit left, and ``on_request``."""
        if state is not None and headers is not None:
            remaining = headers.get("x-ratelimit-remaining")
            if remaining is not None and remaining.isdigit():
                state.rate_limit_remaining = int(remaining)
        if self._on_request is not None:
            try:
                self._on_request(method, route, status, rate_limited)
            except Exception:  # metrics must never break a GitHub call
                log.exception("github.on_request_failed")
