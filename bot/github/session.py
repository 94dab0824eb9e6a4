"""GitHubSession: how debate-bot talks to GitHub, under every endpoint.

It holds the transport policy: App and installation auth, write pacing, bounded
retries, the accounting of calls, and the judgement of a failure as transient or
final (``github_error``). The endpoints themselves live in ``bot.github.gateway``
and the modules it assembles.

githubkit stays the HTTP client (typed REST operations, App JWT signing, the
GraphQL endpoint), but three of its defaults are replaced on purpose:

- ``auto_retry=False``: githubkit's default policy sleeps until the primary
  rate-limit reset (up to an hour) inside one request, and sleeps with
  ``anyio.sleep`` we cannot inject. We wrap each call in a tenacity loop whose
  waits come from ``bot.github.retry.decide`` (``Retry-After``, rate-limit
  reset, 5xx backoff), each capped at ``settings.github_max_retry_wait_s``, with
  the session's injected ``sleep``. Every attempt is reported to ``on_request``.
- Installation tokens are fetched and cached by ``bot.github.auth.TokenCache``
  (on the injected clock, refreshed 5 minutes early, refetched once after a 401),
  not by githubkit's process-global cache, which is keyed by app id only and
  would be shared between gateways with different keys or servers.
- Responses are read as plain JSON, not githubkit's strict pydantic models:
  GitHub adds fields and relaxes types over time, and a model mismatch must not
  break a debate (githubkit's strict webhook models already reject real deliveries).

githubkit opens a fresh ``httpx.AsyncClient`` per request when it is not used as
a context manager; all of them share one pooled transport, so connections are
reused across calls, installations and tasks. The transport is injectable
(``httpx.ASGITransport`` in tests, as for the model router).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pydantic
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from githubkit import AppAuthStrategy, GitHub, TokenAuthStrategy, UnauthAuthStrategy
from githubkit.cache import MemCacheStrategy
from githubkit.exception import RequestError, RequestFailed, RequestTimeout
from githubkit.response import Response
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from bot.core.aio import store_call
from bot.core.errors import (
    ConfigError,
    GitHubError,
    RateLimited,
    StoreError,
    TargetGone,
    TransientGitHubError,
)
from bot.core.logs import get_logger
from bot.core.settings import Settings
from bot.core.transport import AiohttpTransport, LeanAsyncClient
from bot.github.auth import InstallationToken, TokenCache
from bot.github.pacing import SharedSlots, WritePacer, spacing
from bot.github.retry import decide, rate_limit_wait

log = get_logger(__name__)

# method, route template, status (0: no answer), and whether it was a rate limit.
OnRequest = Callable[[str, str, int, bool], None]
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
# One GitHub operation, given the headers to send (auth, API version).
Op = Callable[[dict[str, str]], Awaitable[Response[Any]]]

APP_INSTALLATION_ROUTE = "/app/installations/{installation_id}/access_tokens"
GHES_API_VERSION = "2022-11-28"  # the one REST version every supported GHES release accepts


# Routes on one issue or pull request thread (the run's own issue, its comments,
# reactions and labels). A 404 or 410 there means the thread is gone: deleted (410
# "This issue was deleted"), transferred to a repository the installation cannot
# see, or the repository itself removed from the installation (404).
THREAD_ROUTES = (
    "/repos/{owner}/{repo}/issues/{issue_number}",
    "/repos/{owner}/{repo}/issues/comments/",
    "/repos/{owner}/{repo}/pulls/{pull_number}",
    "/repos/{owner}/{repo}/pulls/comments/",
)
LOCKED = "issue is locked"  # "Unable to create comment because issue is locked." (403)


EMPTY_REPOSITORY = "git repository is empty"  # 409 "Git Repository is empty."


def is_empty_repository(exc: GitHubError) -> bool:
    """GitHub's answer for a repository nothing was pushed to yet: 409 "Git
    Repository is empty." from its git refs, trees, contents and archives. Final:
    no retry changes it until someone pushes."""
    return exc.github_status == 409 and EMPTY_REPOSITORY in str(exc).lower()


def is_target_gone(status: int, detail: str, route: str) -> bool:
    if status == 403:
        return LOCKED in detail.lower()
    return status in (404, 410) and route.startswith(THREAD_ROUTES)


def github_error(
    message: str,
    *,
    github_status: int | None = None,
    detail: str = "",
    route: str = "",
    rate_limited: bool = False,
) -> GitHubError:
    """The one place a GitHub failure is judged transient (worth waiting out) or final.

    Transient: no answer or no usable answer (``github_status`` None), 5xx, 429, and a
    403 that is a rate limit (``rate_limited``: ``Retry-After``, ``x-ratelimit-remaining:
    0`` or GitHub's rate-limit message, see ``bot.github.retry.rate_limit_wait``).
    ``TargetGone`` (final): 404/410 on a thread route, or 403 "… issue is locked"
    (``detail`` is GitHub's own message). Any other 403 (a missing permission:
    "Resource not accessible by integration") and other 4xx are final.
    """
    if rate_limited or github_status is None or github_status >= 500 or github_status == 429:
        return TransientGitHubError(message, github_status=github_status)
    if is_target_gone(github_status, detail, route):
        return TargetGone(message, github_status=github_status)
    return GitHubError(message, github_status=github_status)


def graphql_url(api_url: str) -> str:
    """GraphQL lives at ``/graphql`` on github.com, ``/api/graphql`` on GHES."""
    base = api_url.rstrip("/")
    if base.endswith("/api/v3"):
        return base[: -len("/api/v3")] + "/api/graphql"
    return base + "/graphql"


def is_enterprise_server(api_url: str) -> bool:
    return api_url.rstrip("/").endswith("/api/v3")


def json_body(response: Response[Any]) -> Any:
    try:
        return response.raw_response.json()
    except ValueError as exc:
        raise github_error("GitHub returned a body that is not JSON") from exc


def json_dict(response: Response[Any]) -> dict[str, Any]:
    data = json_body(response)
    if not isinstance(data, dict):
        raise github_error("GitHub returned an unexpected response shape")
    return data


def response_message(response: httpx.Response) -> str:
    """GitHub's ``message`` and its ``errors`` details, bounded, for error texts."""
    try:
        data = response.json()
    except ValueError:
        return response.reason_phrase or ""
    if not isinstance(data, dict):
        return ""
    message = str(data.get("message", ""))[:300]
    errors = data.get("errors")
    if isinstance(errors, list):
        details = [
            str(e.get("message") or e.get("code") or "") for e in errors if isinstance(e, dict)
        ]
        details = [d for d in details if d]
        if details:
            message += " (" + "; ".join(details)[:300] + ")"
    return message


class _SharedTransport(httpx.AsyncBaseTransport):
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


class _GitHub(GitHub[Any]):
    """githubkit's client, with one httpx client for all its requests: outside
    ``async with`` githubkit builds and closes a client per request, which cost
    a seventh of a GitHub call's CPU. The transport is shared and outlives them
    anyway (``_SharedTransport``); the client keeps no cookies, as a client
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


class _Retry(Exception):
    """Internal: a failed attempt that may be repeated after ``wait_s``."""

    def __init__(self, wait_s: float, error: GitHubError) -> None:
        super().__init__(str(error))
        self.wait_s = wait_s
        self.error = error


def _retry_wait(state: RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome is not None else None
    return exc.wait_s if isinstance(exc, _Retry) else 0.0


@dataclass
class _InstallationState:
    pacer: WritePacer
    rate_limit_remaining: int | None = None
    # Monotonic time before which no call goes to the installation: a rate limit
    # GitHub asked us to wait out binds every call, not only the one refused.
    blocked_until: float = 0.0


def _app_key(settings: Settings) -> str:
    if settings.app_id is None:
        raise ConfigError("DEBATE_BOT_APP_ID is required to call GitHub")
    pem = settings.private_key_pem()
    if not pem:
        raise ConfigError(
            "DEBATE_BOT_PRIVATE_KEY or DEBATE_BOT_PRIVATE_KEY_FILE is required to call GitHub"
        )
    try:
        load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError("the GitHub App private key is not a valid PEM private key") from exc
    return pem


class GitHubSession:
    """githubkit clients for the app and its installations, and ``send``, the one
    way a call reaches GitHub."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        wall: Clock = time.time,
        on_request: OnRequest | None = None,
        max_attempts: int = 5,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        actions_token: str | None = None,
        write_slots: SharedSlots | None = None,
    ) -> None:
        # In a GitHub Actions job (`debate-bot action`) the job's token stands in
        # for the installation token; there is no app key and no app endpoint.
        self._actions_token = actions_token
        # Shared pacing (PostgreSQL): reserves a write slot in the database; blocking,
        # so it runs in a thread.
        self._write_slots = write_slots
        pem = "" if actions_token else _app_key(settings)

        self.api_url = settings.github_api_url.rstrip("/")
        self.graphql_url = graphql_url(self.api_url)
        self._max_wait_s = settings.github_max_retry_wait_s
        self._write_interval_s = spacing(settings.github_write_interval_s)
        self._clock = clock
        self._sleep = sleep
        self._wall = wall
        self._on_request = on_request
        self._max_attempts = max(1, max_attempts)
        # An injected transport is owned from here on: ``aclose`` closes it. Every
        # run and every intake slot may have a call in flight, each connection kept
        # alive (httpx's default pool keeps 20, so a busy worker redid TLS handshakes).
        self._transport = _SharedTransport(transport or AiohttpTransport())
        common: dict[str, Any] = {
            "base_url": self.api_url,
            "user_agent": "debate-bot",
            "timeout": httpx.Timeout(timeout_s, connect=10.0),
            "async_transport": self._transport,
            "http_cache": False,
            "auto_retry": False,
            # A private cache: githubkit's default one is process-global and keyed
            # by app id only (JWTs of two gateways would leak into each other).
            "cache_strategy": MemCacheStrategy(),
        }
        # As the app (JWT); with an Actions token, app endpoints are never called.
        app_auth = (
            TokenAuthStrategy(actions_token)
            if actions_token
            else AppAuthStrategy(settings.app_id or 0, pem)
        )
        self.app = _GitHub(app_auth, **common)
        self.gh = _GitHub(UnauthAuthStrategy(), **common)  # ``send`` adds the installation token
        self._base_headers: dict[str, str] = {}
        if is_enterprise_server(self.api_url):
            # githubkit sends its newest REST version; GHES rejects versions it lacks.
            self._base_headers["X-GitHub-Api-Version"] = GHES_API_VERSION
        self._tokens = TokenCache(self._fetch_token, clock=clock, wall=wall)
        self._states: dict[int, _InstallationState] = {}

    @property
    def base_headers(self) -> dict[str, str]:
        """The headers every call sends (a copy: callers may add to it)."""
        return dict(self._base_headers)

    async def token(self, installation_id: int) -> str:
        """The installation's access token, fetched now or reused."""
        return await self._tokens.get(installation_id)

    def rate_limit_remaining(self, installation_id: int) -> int | None:
        """The last ``x-ratelimit-remaining`` seen for the installation (for metrics)."""
        state = self._states.get(installation_id)
        return None if state is None else state.rate_limit_remaining

    @property
    def rate_limits(self) -> dict[int, int]:
        return {
            iid: s.rate_limit_remaining
            for iid, s in self._states.items()
            if s.rate_limit_remaining is not None
        }

    async def aclose(self) -> None:
        await self._transport.really_close()

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
                    self._block(state, wait_s, "(held by another process)")
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

    def _state(self, installation_id: int) -> _InstallationState:
        state = self._states.get(installation_id)
        if state is None:
            pacer = (
                WritePacer(self._write_interval_s, clock=self._clock, sleep=self._sleep)
                if self._write_slots is None
                else self._shared_pacer(installation_id)
            )
            state = _InstallationState(pacer=pacer)
            self._states[installation_id] = state
        return state

    @property
    def in_actions(self) -> bool:
        return self._actions_token is not None

    async def _fetch_token(self, installation_id: int) -> InstallationToken:
        if self._actions_token is not None:  # valid for the whole job
            return InstallationToken(self._actions_token, datetime.now(UTC) + timedelta(hours=6))
        headers = self.base_headers

        async def op(_: dict[str, str]) -> Response[Any]:
            return await self.app.rest.apps.async_create_installation_access_token(
                installation_id, headers=headers
            )

        response = await self.send(
            "POST", APP_INSTALLATION_ROUTE, op, installation_id=None, write=False, replay_safe=True
        )
        data = json_dict(response)
        token, expires_at = data.get("token"), data.get("expires_at")
        if not isinstance(token, str) or not isinstance(expires_at, str):
            raise github_error("GitHub returned an installation token response without a token")
        try:
            when = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
        except ValueError as exc:
            raise github_error("GitHub returned an unreadable token expiry") from exc
        return InstallationToken(token=token, expires_at=when)

    async def send(
        self,
        method: str,
        route: str,
        op: Op,
        *,
        installation_id: int | None,
        write: bool,
        replay_safe: bool,
        ok_statuses: Iterable[int] = (),
    ) -> Response[Any]:
        """Run ``op`` with auth headers, pacing, bounded retries and accounting.

        ``installation_id`` None: ``op`` authenticates itself (as the app).
        ``ok_statuses`` are error statuses the caller handles itself (e.g. 404 on a
        file lookup): they come back as a response instead of a GitHubError.
        """
        state = self._state(installation_id) if installation_id is not None else None
        accepted = frozenset(ok_statuses)
        refreshed = False

        async def attempt_once(attempt: int) -> Response[Any]:
            nonlocal refreshed
            if state is not None:
                await self._wait_unblocked(state, method, route)
            headers = self.base_headers
            token: str | None = None
            if installation_id is not None:
                token = await self._tokens.get(installation_id)
                headers["Authorization"] = f"token {token}"
            if write and state is not None:
                await state.pacer.wait_turn()
            try:
                response = await op(headers)
            except RequestFailed as exc:
                raw = exc.response.raw_response
                detail = response_message(raw)
                limited = rate_limit_wait(
                    status=raw.status_code,
                    headers=raw.headers,
                    message=detail,
                    attempt=attempt,
                    now_epoch=self._wall(),
                )
                self._observe(
                    method, route, raw.status_code, raw.headers, state, limited is not None
                )
                if raw.status_code in accepted:
                    return exc.response
                error = github_error(
                    f"GitHub {method} {route} failed: {raw.status_code} {detail}",
                    github_status=raw.status_code,
                    detail=detail,
                    route=route,
                    rate_limited=limited is not None,
                )
                if raw.status_code == 401 and token is not None and not refreshed:
                    # The token may have been revoked or expired early: fetch a new one once.
                    refreshed = True
                    log.warning("github.token_rejected", method=method, route=route)
                    self._tokens.invalidate(installation_id or 0, token)
                    raise _Retry(0.0, error) from None
                if raw.status_code >= 500 and not replay_safe:
                    # GitHub may have created the object before failing: the caller
                    # checks before trying again (see bot/service/worker/publish.py).
                    raise error from None
                # A rate-limited POST is repeated even when not replay-safe: GitHub
                # refuses it rather than performing it ("temporarily blocked from
                # content creation. Please retry your request again later.") and its
                # rate-limit docs say to retry the request once the wait is over.
                decision = decide(
                    status=raw.status_code,
                    headers=raw.headers,
                    message=detail,
                    attempt=attempt,
                    max_wait_s=self._max_wait_s,
                    now_epoch=self._wall(),
                )
                if limited is not None and state is not None:
                    quiet_s = limited[0] if decision.wait_s is None else decision.wait_s
                    self._block(state, quiet_s, route)
                    await self._share_block(installation_id, quiet_s)
                if limited is not None and decision.wait_s is None:  # longer than the cap
                    resume_at = self._wall() + limited[0]
                    raise RateLimited(
                        str(error), github_status=raw.status_code, resume_at=resume_at
                    ) from None
                if decision.retry and decision.wait_s is not None:
                    log.info("github.retrying", method=method, route=route, reason=decision.reason)
                    raise _Retry(decision.wait_s, error) from None
                raise error from None
            except RequestError as exc:
                self._observe(method, route, 0, None, state)
                inner = exc.exc
                error = github_error(f"GitHub {method} {route} failed: {type(inner).__name__}")
                # A connect failure never reached GitHub; a timeout or a dropped
                # connection might have, so only requests safe to replay are repeated.
                never_sent = isinstance(inner, httpx.ConnectError | httpx.ConnectTimeout)
                if isinstance(exc, RequestTimeout | RequestError) and (never_sent or replay_safe):
                    decision = decide(
                        status=0,
                        headers={},
                        message="",
                        attempt=attempt,
                        max_wait_s=self._max_wait_s,
                        now_epoch=self._wall(),
                    )
                    if decision.wait_s is not None:
                        raise _Retry(decision.wait_s, error) from None
                raise error from None
            except pydantic.ValidationError as exc:
                # githubkit validates request bodies before sending them.
                raise github_error(f"invalid request for GitHub {method} {route}") from exc
            self._observe(method, route, response.status_code, response.headers, state)
            return response

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._max_attempts),
            retry=retry_if_exception_type(_Retry),
            wait=_retry_wait,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await attempt_once(attempt.retry_state.attempt_number)
        except _Retry as exc:
            raise exc.error from None
        raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover

    def _block(self, state: _InstallationState, wait_s: float, route: str) -> None:
        """Hold every call to the installation for ``wait_s`` (GitHub: "Continuing to
        make requests while you are rate limited may result in the banning of your
        integration"). A wait beyond the cap is recorded too: calls then fail at once."""
        until = self._clock() + wait_s
        if until > state.blocked_until:
            state.blocked_until = until
            log.warning("github.rate_limited", route=route, wait_s=round(wait_s, 1))

    async def _share_block(self, installation_id: int | None, wait_s: float) -> None:
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

    async def _wait_unblocked(self, state: _InstallationState, method: str, route: str) -> None:
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

    def _observe(
        self,
        method: str,
        route: str,
        status: int,
        headers: Mapping[str, str] | None,
        state: _InstallationState | None,
        rate_limited: bool = False,
    ) -> None:
        if state is not None and headers is not None:
            remaining = headers.get("x-ratelimit-remaining")
            if remaining is not None and remaining.isdigit():
                state.rate_limit_remaining = int(remaining)
        if self._on_request is not None:
            try:
                self._on_request(method, route, status, rate_limited)
            except Exception:  # metrics must never break a GitHub call
                log.exception("github.on_request_failed")
