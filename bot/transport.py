"""HTTP connection pools for the many calls a worker keeps in flight."""

from __future__ import annotations

import itertools
from typing import Any

import httpx

SHARD_CONNECTIONS = 8


class ShardedTransport(httpx.AsyncBaseTransport):
    """Connection pools of at most ``SHARD_CONNECTIONS`` each, requests dealt
    round-robin, every connection kept alive for reuse. httpcore's pool scans
    every connection for every queued request each time one starts or ends
    (a socket check apiece): with hundreds of calls in flight on one pool, that
    scan was most of the worker's CPU."""

    def __init__(self, in_flight: int) -> None:
        shards = max(1, -(-in_flight // SHARD_CONNECTIONS))
        size = -(-in_flight // shards)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=size)
        # One TLS context for all (each holds the CA bundle: ~1 MB apiece).
        tls = httpx.create_ssl_context()
        self._shards = [
            httpx.AsyncHTTPTransport(verify=tls, limits=limits, retries=0) for _ in range(shards)
        ]
        self._next = itertools.cycle(self._shards)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await next(self._next).handle_async_request(request)

    async def aclose(self) -> None:
        for shard in self._shards:
            await shard.aclose()


class _SetCookies(httpx.Cookies):
    """httpx's cookie jar, skipping answers that set no cookie. httpx hands every
    answer to ``http.cookiejar`` (a ``urllib`` request and response built
    apiece), which found nothing in an API's answers for a few per cent of a
    worker's CPU; an answer with ``Set-Cookie`` is stored as before."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers or "set-cookie2" in response.headers:
            super().extract_cookies(response)


class LeanAsyncClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` with the cookie jar above; otherwise the same."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cookies = self._cookies  # through the setter below

    @property
    def cookies(self) -> httpx.Cookies:
        return self._cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._cookies = _SetCookies(cookies)
