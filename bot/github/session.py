"""GitHubSession: how debate-bot talks to GitHub, under every endpoint.

It holds the transport policy: App and installation auth, bounded retries, and
the judgement of a failure as transient or final (``github_error``); write
pacing, rate-limit holds and the accounting of calls are kept per installation
by ``bot.github.throttle``, and the githubkit client it sends through is
``bot.github.client``. The endpoints themselves live in ``bot.github.gateway``
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
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pydantic
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from githubkit import AppAuthStrategy, TokenAuthStrategy, UnauthAuthStrategy
from githubkit.exception import RequestError, RequestFailed, RequestTimeout
from githubkit.response import Response
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from bot.core.errors import (
    ConfigError,
    GitHubError,
    RateLimited,
    TargetGone,
    TransientGitHubError,
)
from bot.core.logs import get_logger
from bot.core.settings import Settings
from bot.core.transport import AiohttpTransport
from bot.github.auth import InstallationToken, TokenCache
from bot.github.client import GitHubClient, SharedTransport, client_options
from bot.github.pacing import SharedSlots, spacing
from bot.github.retry import decide, rate_limit_wait
from bot.github.throttle import Clock, InstallationState, OnRequest, Sleep, Throttle

log = get_logger(__name__)

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
class _Call:
    """One ``send``: what goes to GitHub, and how a failure of it may be repeated."""

    method: str
    route: str
    op: Op
    installation_id: int | None
    write: bool
    replay_safe: bool
    accepted: frozenset[int]  # error statuses the caller handles itself
    state: InstallationState | None
    since: float | None  # the writer's age: older runs' writes go first
    refreshed: bool = False  # the installation token was fetched anew after a 401


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
        pem = "" if actions_token else _app_key(settings)

        self.api_url = settings.github_api_url.rstrip("/")
        self.graphql_url = graphql_url(self.api_url)
        self._max_wait_s = settings.github_max_retry_wait_s
        self._sleep = sleep
        self._wall = wall
        self._max_attempts = max(1, max_attempts)
        # Pacing, rate-limit holds and the accounting of calls, per installation.
        # Shared pacing (PostgreSQL, ``write_slots``) reserves write slots in the
        # database; blocking, so in a thread.
        self._throttle = Throttle(
            clock=clock,
            sleep=sleep,
            wall=wall,
            write_interval_s=spacing(settings.github_write_interval_s),
            max_wait_s=self._max_wait_s,
            on_request=on_request,
            write_slots=write_slots,
        )
        # An injected transport is owned from here on: ``aclose`` closes it. Every
        # run and every intake slot may have a call in flight, each connection kept
        # alive (httpx's default pool keeps 20, so a busy worker redid TLS handshakes).
        self._transport = SharedTransport(transport or AiohttpTransport())
        common = client_options(self.api_url, timeout_s, self._transport)
        # As the app (JWT); with an Actions token, app endpoints are never called.
        app_auth = (
            TokenAuthStrategy(actions_token)
            if actions_token
            else AppAuthStrategy(settings.app_id or 0, pem)
        )
        self.app = GitHubClient(app_auth, **common)
        # ``send`` adds the installation token.
        self.gh = GitHubClient(UnauthAuthStrategy(), **common)
        self._base_headers: dict[str, str] = {}
        if is_enterprise_server(self.api_url):
            # githubkit sends its newest REST version; GHES rejects versions it lacks.
            self._base_headers["X-GitHub-Api-Version"] = GHES_API_VERSION
        self._tokens = TokenCache(self._fetch_token, clock=clock, wall=wall)

    @property
    def base_headers(self) -> dict[str, str]:
        """The headers every call sends (a copy: callers may add to it)."""
        return dict(self._base_headers)

    async def token(self, installation_id: int) -> str:
        """The installation's access token, fetched now or reused."""
        return await self._tokens.get(installation_id)

    def rate_limit_remaining(self, installation_id: int) -> int | None:
        """The last ``x-ratelimit-remaining`` seen for the installation (for metrics)."""
        return self._throttle.rate_limit_remaining(installation_id)

    @property
    def rate_limits(self) -> dict[int, int]:
        return self._throttle.rate_limits

    async def aclose(self) -> None:
        await self._transport.really_close()

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
        since: float | None = None,
    ) -> Response[Any]:
        """Run ``op`` with auth headers, pacing, bounded retries and accounting.

        ``installation_id`` None: ``op`` authenticates itself (as the app).
        ``ok_statuses`` are error statuses the caller handles itself (e.g. 404 on a
        file lookup): they come back as a response instead of a GitHubError.
        ``since``: when the writer's run started (or its delivery arrived), for a
        write's place among the installation's waiting writes (bot/github/pacing.py).
        """
        state = self._throttle.state(installation_id) if installation_id is not None else None
        call = _Call(
            method,
            route,
            op,
            installation_id,
            write,
            replay_safe,
            frozenset(ok_statuses),
            state,
            since,
        )
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
                    return await self._attempt_once(call, attempt.retry_state.attempt_number)
        except _Retry as exc:
            raise exc.error from None
        raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover

    async def _attempt_once(self, call: _Call, attempt: int) -> Response[Any]:
        """One attempt of ``call``: its answer, or ``_Retry`` or the final error."""
        headers, token = await self._prepare(call)
        try:
            response = await call.op(headers)
        except RequestFailed as exc:
            return await self._refused(call, exc, token, attempt)
        except RequestError as exc:
            raise self._unanswered(call, exc, attempt) from None
        except pydantic.ValidationError as exc:
            # githubkit validates request bodies before sending them.
            raise github_error(f"invalid request for GitHub {call.method} {call.route}") from exc
        status, response_headers = response.status_code, response.headers
        self._throttle.observe(call.method, call.route, status, response_headers, call.state)
        return response

    async def _prepare(self, call: _Call) -> tuple[dict[str, str], str | None]:
        """The headers of one attempt (and its installation token), sent once the
        installation's rate-limit hold is over and, for a write, its turn has come."""
        if call.state is not None:
            await self._throttle.wait_unblocked(call.state, call.method, call.route)
        headers = self.base_headers
        token: str | None = None
        if call.installation_id is not None:
            token = await self._tokens.get(call.installation_id)
            headers["Authorization"] = f"token {token}"
        if call.write and call.state is not None:
            await call.state.pacer.wait_turn(call.since)
        return headers, token

    async def _refused(
        self, call: _Call, exc: RequestFailed, token: str | None, attempt: int
    ) -> Response[Any]:
        """GitHub answered with an error status: that answer when the caller handles
        it (``ok_statuses``); else raises ``_Retry``, ``RateLimited`` or the error."""
        raw = exc.response.raw_response
        detail = response_message(raw)
        limited = rate_limit_wait(
            status=raw.status_code,
            headers=raw.headers,
            message=detail,
            attempt=attempt,
            now_epoch=self._wall(),
        )
        self._throttle.observe(
            call.method, call.route, raw.status_code, raw.headers, call.state, limited is not None
        )
        if raw.status_code in call.accepted:
            return exc.response
        error = github_error(
            f"GitHub {call.method} {call.route} failed: {raw.status_code} {detail}",
            github_status=raw.status_code,
            detail=detail,
            route=call.route,
            rate_limited=limited is not None,
        )
        if raw.status_code == 401 and token is not None and not call.refreshed:
            # The token may have been revoked or expired early: fetch a new one once.
            call.refreshed = True
            log.warning("github.token_rejected", method=call.method, route=call.route)
            self._tokens.invalidate(call.installation_id or 0, token)
            raise _Retry(0.0, error) from None
        if raw.status_code >= 500 and not call.replay_safe:
            # GitHub may have created the object before failing: the caller
            # checks before trying again (see bot/service/worker/publish.py).
            raise error from None
        raise await self._after_refusal(call, raw, detail, limited, error, attempt) from None

    async def _after_refusal(
        self,
        call: _Call,
        raw: httpx.Response,
        detail: str,
        limited: tuple[float, str] | None,
        error: GitHubError,
        attempt: int,
    ) -> Exception:
        """What a refused call ends in: ``_Retry`` after the wait GitHub asks for,
        ``RateLimited`` when that wait is beyond the cap, or the error itself. A rate
        limit holds the installation's other calls too (in every process, shared)."""
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
        if limited is not None and call.state is not None:
            quiet_s = limited[0] if decision.wait_s is None else decision.wait_s
            self._throttle.block(call.state, quiet_s, call.route)
            await self._throttle.share_block(call.installation_id, quiet_s)
        if limited is not None and decision.wait_s is None:  # longer than the cap
            resume_at = self._wall() + limited[0]
            return RateLimited(str(error), github_status=raw.status_code, resume_at=resume_at)
        if decision.retry and decision.wait_s is not None:
            reason = decision.reason
            log.info("github.retrying", method=call.method, route=call.route, reason=reason)
            return _Retry(decision.wait_s, error)
        return error

    def _unanswered(self, call: _Call, exc: RequestError[Any], attempt: int) -> Exception:
        """No answer from GitHub: ``_Retry`` when the request may be repeated, else
        the error. A connect failure never reached GitHub; a timeout or a dropped
        connection might have, so only requests safe to replay are repeated."""
        self._throttle.observe(call.method, call.route, 0, None, call.state)
        inner = exc.exc
        error = github_error(f"GitHub {call.method} {call.route} failed: {type(inner).__name__}")
        never_sent = isinstance(inner, httpx.ConnectError | httpx.ConnectTimeout)
        if isinstance(exc, RequestTimeout | RequestError) and (never_sent or call.replay_safe):
            decision = decide(
                status=0,
                headers={},
                message="",
                attempt=attempt,
                max_wait_s=self._max_wait_s,
                now_epoch=self._wall(),
            )
            if decision.wait_s is not None:
                return _Retry(decision.wait_s, error)
        return error
