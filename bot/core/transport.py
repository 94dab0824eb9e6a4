"""HTTP transport and client for the many GitHub and model calls a worker keeps
in flight (docs/architecture.md)."""

from __future__ import annotations

import asyncio
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx

from bot.core.errors import ConfigError

# An idle connection is dropped after this long: under the shortest idle timeout
# servers commonly keep (uvicorn's and Node's 5 s), so a request never goes out
# on a connection the server is closing. httpcore polls the socket before reuse;
# aiohttp learns of a close only when the event loop has read it, which a busy
# loop can leave for a while, and a POST sent into that close is lost.
KEEPALIVE_S = 4.0
READ_CHUNK = 64 * 1024
# aiohttp's defaults (8,190 bytes a header line) are tighter than h11's; an API
# answer's Link or Content-Security-Policy header must never fail a call.
MAX_HEADER_BYTES = 64 * 1024


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx requests sent over aiohttp's connection pool.

    httpx stays the client everything is written against (githubkit, the model
    providers, timeouts, redirects, decoding); only the wire moves. httpcore
    runs every socket operation and pool lock through anyio on asyncio: ~0.7 ms
    of CPU a request alone, ~3 ms with 64 in flight, the largest share of a
    busy worker's CPU; aiohttp's C-accelerated client costs ~0.25-0.28 ms
    either way (benchmarks/http_client.py).
    The pool is unbounded (what bounds calls in flight is the worker's run
    slots and the providers' gates) and keeps every connection alive
    ``KEEPALIVE_S``.

    Errors come back as httpx's, mapped by whether the request may have reached
    the server: only ``ConnectError`` / ``ConnectTimeout`` say it did not, and
    callers replay a non-idempotent request only then (bot/github/session.py).
    ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY`` are honoured as curl and
    httpx honour them (docs/operations.md), read once here: aiohttp's own
    ``trust_env`` would look them (and ``~/.netrc``) up in a thread on every
    request.
    """

    def __init__(self, *, keepalive_s: float = KEEPALIVE_S) -> None:
        self._keepalive_s = keepalive_s
        self._tls = httpx.create_ssl_context()  # certifi, SSL_CERT_FILE: as httpx verifies
        self._proxies = env_proxies()
        self._bypassed: dict[str, bool] = {}
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_here(self) -> aiohttp.ClientSession:
        """The pool of the running event loop, opened on first use (aiohttp
        binds a session to the loop it was opened in)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            if self._session is not None and not self._session.closed:
                # A loop that is gone took its sockets with it.
                self._session.detach()
            connector = aiohttp.TCPConnector(
                limit=0, keepalive_timeout=self._keepalive_s, ssl=self._tls
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),  # httpx's client keeps cookies
                auto_decompress=False,  # httpx decodes by Content-Encoding
                max_line_size=MAX_HEADER_BYTES,
                max_field_size=MAX_HEADER_BYTES,
            )
            self._loop = loop
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session_here()
        timeout = request.extensions.get("timeout", {})
        body = await request.aread()
        headers = request.headers.multi_items()
        proxy, credentials = self._proxy_for(request.url) if self._proxies else (None, None)
        proxy_headers = None
        if credentials is not None:
            # A plain request goes to the proxy whole, its credentials among its
            # headers; an HTTPS one only opens a tunnel with them (CONNECT).
            if request.url.scheme == "http":
                headers.append(("Proxy-Authorization", credentials))
            else:
                proxy_headers = {"Proxy-Authorization": credentials}
        try:
            response = await session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=body or None,
                allow_redirects=False,  # httpx follows redirects itself
                proxy=proxy,
                proxy_headers=proxy_headers,
                timeout=aiohttp.ClientTimeout(
                    connect=timeout.get("pool"),
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                ),
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _httpx_error(exc, request) from exc
        version = response.version
        return httpx.Response(
            status_code=response.status,
            headers=list(response.raw_headers),
            stream=_Body(response, request),
            request=request,
            extensions={
                "http_version": f"HTTP/{version.major}.{version.minor}".encode()
                if version
                else b"HTTP/1.1",
                "reason_phrase": (response.reason or "").encode(),
            },
        )

    def _proxy_for(self, url: httpx.URL) -> tuple[str | None, str | None]:
        proxy = self._proxies.get(url.scheme)
        if proxy is None:
            return None, None
        bypassed = self._bypassed.get(url.host)
        if bypassed is None:  # NO_PROXY, matched as urllib matches it; hosts are few
            bypassed = self._bypassed[url.host] = bool(urllib.request.proxy_bypass(url.host))
        return (None, None) if bypassed else proxy

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


Proxy = tuple[str, str | None]  # the proxy's URL, and its Proxy-Authorization value if any


def env_proxies() -> dict[str, Proxy]:
    """The proxy per URL scheme from ``HTTP_PROXY`` / ``HTTPS_PROXY`` (either
    case), with credentials in the URL sent as ``Proxy-Authorization``. A proxy
    that is not ``http://`` is a ``ConfigError``: aiohttp tunnels through plain
    HTTP proxies only, and a request silently sent direct would be worse."""
    found = urllib.request.getproxies_environment()
    proxies: dict[str, Proxy] = {}
    for scheme in ("http", "https"):
        raw = found.get(scheme)
        if not raw:
            continue
        name = f"{scheme.upper()}_PROXY"
        url = urllib.parse.urlsplit(raw if "://" in raw else f"http://{raw}")
        try:
            valid = url.scheme == "http" and bool(url.hostname) and url.port != 0
        except ValueError:  # a port that is not a number (never echo the URL: a password)
            valid = False
        if not valid:
            raise ConfigError(
                f"{name} must be http://host:port or http://user:password@host:port: "
                f"aiohttp tunnels through plain HTTP proxies only (got a {url.scheme}:// URL)"
            )
        credentials = None
        if url.username is not None:
            user, password = (urllib.parse.unquote(p or "") for p in (url.username, url.password))
            credentials = aiohttp.encode_basic_auth(user, password)
        proxies[scheme] = (f"http://{url.netloc.rpartition('@')[2]}", credentials)
    return proxies


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_chunked(READ_CHUNK):
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _httpx_error(exc, self._request) from exc

    async def aclose(self) -> None:
        # Back to the pool when the body was read to its end, else closed.
        self._response.release()


def _httpx_error(exc: BaseException, request: httpx.Request) -> httpx.TransportError:
    """httpx's error for an aiohttp failure. The first matching row decides: a
    connect timeout is a ``ServerTimeoutError`` too, and a proxy failure a
    connector error."""
    message = str(exc) or type(exc).__name__
    kind: type[httpx.TransportError]
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        kind = httpx.ConnectTimeout  # no connection: the request was not sent
    elif isinstance(exc, TimeoutError):  # aiohttp's read timeouts are TimeoutErrors
        kind = httpx.ReadTimeout
    elif isinstance(exc, aiohttp.ClientProxyConnectionError | aiohttp.ClientHttpProxyError):
        kind = httpx.ProxyError  # the proxy was unreachable or refused the tunnel
    elif isinstance(exc, aiohttp.ClientConnectorError):
        kind = httpx.ConnectError  # refused, DNS, TLS handshake: not sent
    elif isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientResponseError):
        kind = httpx.RemoteProtocolError  # closed or garbled after sending: maybe seen
    elif isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ClientOSError | ConnectionError):
        kind = httpx.ReadError
    elif isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        kind = httpx.UnsupportedProtocol
    else:
        kind = httpx.RemoteProtocolError
    return kind(message, request=request)


class _SetCookies(httpx.Cookies):
    """httpx's cookie jar, skipping answers that set no cookie. httpx hands every
    answer to ``http.cookiejar`` (a ``urllib`` request and response built
    apiece), which found nothing in an API's answers for a few per cent of a
    worker's CPU; an answer with ``Set-Cookie`` is stored as before."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers or "set-cookie2" in response.headers:
            super().extract_cookies(response)


class LeanAsyncClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` with the cookie jar above (``jar``); otherwise the same."""

    jar: type[httpx.Cookies] = _SetCookies

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cookies = self._cookies  # through the setter below

    @property
    def cookies(self) -> httpx.Cookies:
        return self._cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._cookies = self.jar(cookies)
