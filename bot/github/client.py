"""The githubkit client the GitHub session sends through, and what its clients share.

One pooled transport serves every call, installation and task; githubkit's
clients may not close it (an httpx client closes its transport on exit), only
the session does. One httpx client serves all of a ``GitHubClient``'s requests
and keeps no cookies, so none passes from one installation's answers into
another's requests.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from githubkit import GitHub
from githubkit.cache import MemCacheStrategy

from bot.core.transport import LeanAsyncClient


class SharedTransport(httpx.AsyncBaseTransport):
    """The session's pooled transport, which githubkit's clients may not close
    (an httpx client closes its transport on exit); only the session does."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:  # the clients close it on exit; only the session may
        return None

    async def really_close(self) -> None:
        await self._inner.aclose()


class _NoCookies(httpx.Cookies):
    """A jar that keeps nothing: one client serves every installation, and no
    cookie may pass from one's answers into another's requests."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


class _CookielessClient(LeanAsyncClient):
    jar = _NoCookies


class GitHubClient(GitHub[Any]):
    """githubkit's client, with one httpx client for all its requests: outside
    ``async with`` githubkit builds and closes a client per request, which cost
    a seventh of a GitHub call's CPU. The transport is shared and outlives them
    anyway (``SharedTransport``); the client keeps no cookies, as a client
    built per request kept none past its request."""

    _client: httpx.AsyncClient | None = None

    async def _create_async_client(self) -> httpx.AsyncClient:
        if self.config.http_cache:  # never set here; githubkit's own cache client
            return await super()._create_async_client()
        return _CookielessClient(
            **self._get_client_defaults(),
            transport=self.config.async_transport,
            event_hooks=self.config.async_event_hooks,
        )

    @asynccontextmanager
    async def get_async_client(self) -> AsyncGenerator[httpx.AsyncClient, None]:
        if self._client is None:
            self._client = await self._create_async_client()
        yield self._client


def client_options(
    api_url: str, timeout_s: float, transport: httpx.AsyncBaseTransport
) -> dict[str, Any]:
    """What the app's and the installations' githubkit clients share."""
    return {
        "base_url": api_url,
        "user_agent": "debate-bot",
        "timeout": httpx.Timeout(timeout_s, connect=10.0),
        "async_transport": transport,
        "http_cache": False,
        "auto_retry": False,
        # A private cache: githubkit's default one is process-global and keyed
        # by app id only (JWTs of two gateways would leak into each other).
        "cache_strategy": MemCacheStrategy(),
    }
