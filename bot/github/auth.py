"""Installation access tokens: cached per installation, refreshed before expiry.

The fetch itself (App JWT → ``POST /app/installations/{id}/access_tokens``) is
injected, so this module holds only the caching rules: one fetch at a time per
installation (concurrent callers share it), and a token is reused until
``REFRESH_MARGIN_S`` before its ``expires_at``. Deadlines are kept on the
injected monotonic clock; ``expires_at`` is converted once, on arrival.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

REFRESH_MARGIN_S = 300.0


@dataclass(frozen=True)
class InstallationToken:
    token: str
    expires_at: datetime

    def __repr__(self) -> str:  # never print the token itself
        return f"InstallationToken(expires_at={self.expires_at.isoformat()})"


TokenFetch = Callable[[int], Awaitable[InstallationToken]]


@dataclass
class _Cached:
    token: str
    refresh_at: float


class TokenCache:
    def __init__(
        self,
        fetch: TokenFetch,
        *,
        clock: Callable[[], float],
        wall: Callable[[], float],
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._wall = wall
        self._cached: dict[int, _Cached] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def get(self, installation_id: int) -> str:
        cached = self._fresh(installation_id)
        if cached is not None:
            return cached
        lock = self._locks.setdefault(installation_id, asyncio.Lock())
        async with lock:
            cached = self._fresh(installation_id)  # another caller may have fetched it
            if cached is not None:
                return cached
            fetched = await self._fetch(installation_id)
            lifetime = fetched.expires_at.timestamp() - self._wall()
            # Normally refresh 5 minutes early; for short-lived tokens (tests, or a
            # skewed clock) at half their life so a token is still reused at all.
            usable = max(lifetime - REFRESH_MARGIN_S, lifetime / 2.0)
            self._cached[installation_id] = _Cached(fetched.token, self._clock() + usable)
            return fetched.token

    def invalidate(self, installation_id: int, token: str) -> None:
        """Drop ``token`` (e.g. after a 401) unless it was already replaced."""
        cached = self._cached.get(installation_id)
        if cached is not None and cached.token == token:
            del self._cached[installation_id]

    def _fresh(self, installation_id: int) -> str | None:
        cached = self._cached.get(installation_id)
        if cached is None or self._clock() >= cached.refresh_at:
            return None
        return cached.token
