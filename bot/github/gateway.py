"""GitHubGateway: every call debate-bot makes to GitHub, and the only githubkit user.

githubkit stays the HTTP client (typed REST operations, App JWT signing, the
GraphQL endpoint), but three of its defaults are replaced on purpose:

- ``auto_retry=False``: githubkit's default policy sleeps until the primary
  rate-limit reset (up to an hour) inside one request, and sleeps with
  ``anyio.sleep`` we cannot inject. We wrap each call in a tenacity loop whose
  waits come from ``bot.github.retry.decide`` (``Retry-After``, rate-limit
  reset, 5xx backoff), each capped at ``settings.github_max_retry_wait_s``, with
  the gateway's injected ``sleep``. Every attempt is reported to ``on_request``.
- Installation tokens are fetched and cached by ``bot.github.auth.TokenCache``
  (on the injected clock, refreshed 5 minutes early, refetched once after a 401),
  not by githubkit's process-global cache, which is keyed by app id only and
  would be shared between gateways with different keys or servers.
- Responses are read as plain JSON, not githubkit's strict pydantic models:
  GitHub adds fields and relaxes types over time, and a model mismatch must not
  break a debate (githubkit's strict webhook models already reject real deliveries).

githubkit opens a fresh ``httpx.AsyncClient`` per request when it is not used as
a context manager; all of them share one pooled transport, so connections are
reused across calls, installations and tasks.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
import pydantic
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from githubkit import AppAuthStrategy, GitHub, UnauthAuthStrategy
from githubkit.cache import MemCacheStrategy
from githubkit.exception import RequestError, RequestFailed, RequestTimeout
from githubkit.response import Response
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from bot.config import Settings
from bot.errors import ConfigError, GitHubError
from bot.github.auth import InstallationToken, TokenCache
from bot.github.pacing import WritePacer
from bot.github.retry import decide

log = logging.getLogger(__name__)

OnRequest = Callable[[str, str, int], None]
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

APP_INSTALLATION_ROUTE = "/app/installations/{installation_id}/access_tokens"
GHES_API_VERSION = "2022-11-28"  # the one REST version every supported GHES release accepts
MAX_PAGES = 100  # 10,000 items at per_page=100: a bound, not an expectation
PER_PAGE = 100
REACTIONS = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})
PERMISSIONS = ("admin", "maintain", "write", "triage", "read")

_REVIEW_THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes { id isResolved comments(first: 100) { nodes { databaseId } } }
      }
    }
  }
}
"""

_RESOLVE_THREAD_MUTATION = """
mutation($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
"""


def graphql_url(api_url: str) -> str:
    """GraphQL lives at ``/graphql`` on github.com, ``/api/graphql`` on GHES."""
    base = api_url.rstrip("/")
    if base.endswith("/api/v3"):
        return base[: -len("/api/v3")] + "/api/graphql"
    return base + "/graphql"


def is_enterprise_server(api_url: str) -> bool:
    return api_url.rstrip("/").endswith("/api/v3")


async def convert_manifest(api_url: str, code: str, *, timeout_s: float = 30.0) -> dict[str, Any]:
    """``POST /app-manifests/{code}/conversions``: the app GitHub just created
    from a manifest, with its id, private key and webhook secret. Needs no
    credentials (the one-hour code is the credential), so no gateway exists yet."""
    url = f"{api_url.rstrip('/')}/app-manifests/{quote(code, safe='')}/conversions"
    headers = {"Accept": "application/vnd.github+json", "User-Agent": "debate-bot"}
    if is_enterprise_server(api_url):
        headers["X-GitHub-Api-Version"] = GHES_API_VERSION
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.post(url, headers=headers)
    except httpx.HTTPError as exc:
        raise GitHubError(f"GitHub did not answer: {type(exc).__name__}") from exc
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code != 201 or not isinstance(data, dict):
        message = data.get("message") if isinstance(data, dict) else None
        raise GitHubError(
            f"GitHub refused the conversion ({response.status_code}): {message or 'no message'}",
            status=response.status_code,
        )
    return data


class _SharedTransport(httpx.AsyncBaseTransport):
    """A pooled transport that outlives githubkit's per-request clients."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:  # the clients close it on exit; only the gateway may
        return None

    async def really_close(self) -> None:
        await self._inner.aclose()


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
    tokens_seen: set[str] = field(default_factory=set)


def _split(repo: str) -> tuple[str, str]:
    owner, sep, name = repo.partition("/")
    if not sep or not owner or not name or "/" in name:
        raise GitHubError(f"invalid repository name {repo!r}")
    return owner, name


def _response_message(response: httpx.Response) -> str:
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


def _json(response: Response[Any]) -> Any:
    try:
        return response.raw_response.json()
    except ValueError as exc:
        raise GitHubError("GitHub returned a body that is not JSON") from exc


def _json_dict(response: Response[Any]) -> dict[str, Any]:
    data = _json(response)
    if not isinstance(data, dict):
        raise GitHubError("GitHub returned an unexpected response shape")
    return data


class GitHubGateway:
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
    ) -> None:
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

        self.api_url = settings.github_api_url.rstrip("/")
        self.graphql_url = graphql_url(self.api_url)
        self._max_wait_s = settings.github_max_retry_wait_s
        self._write_interval_s = settings.github_write_interval_s
        self._clock = clock
        self._sleep = sleep
        self._wall = wall
        self._on_request = on_request
        self._max_attempts = max(1, max_attempts)
        self._transport = _SharedTransport(httpx.AsyncHTTPTransport(retries=0))
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
        self._app_gh = GitHub(AppAuthStrategy(settings.app_id, pem), **common)
        self._gh = GitHub(UnauthAuthStrategy(), **common)
        self._base_headers: dict[str, str] = {}
        if is_enterprise_server(self.api_url):
            # githubkit sends its newest REST version; GHES rejects versions it lacks.
            self._base_headers["X-GitHub-Api-Version"] = GHES_API_VERSION
        self._tokens = TokenCache(self._fetch_token, clock=clock, wall=wall)
        self._states: dict[int, _InstallationState] = {}
        self._bot_login: str | None = None
        self._clients: dict[int, InstallationClient] = {}

    # -- public --------------------------------------------------------------

    async def installation(self, installation_id: int) -> InstallationClient:
        """A client acting as the installation; its token is fetched (or reused) now."""
        await self._tokens.get(installation_id)
        client = self._clients.get(installation_id)
        if client is None:
            client = InstallationClient(self, installation_id)
            self._clients[installation_id] = client
        return client

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

    async def __aenter__(self) -> GitHubGateway:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- internals used by InstallationClient --------------------------------

    def _state(self, installation_id: int) -> _InstallationState:
        state = self._states.get(installation_id)
        if state is None:
            pacer = WritePacer(self._write_interval_s, clock=self._clock, sleep=self._sleep)
            state = _InstallationState(pacer=pacer)
            self._states[installation_id] = state
        return state

    async def app_info(self) -> dict[str, Any]:
        """``GET /app`` as the app itself: slug, granted permissions, events."""
        headers = dict(self._base_headers)

        async def op(_: dict[str, str]) -> Response[Any]:
            return await self._app_gh.rest.apps.async_get_authenticated(headers=headers)

        response = await self._send(
            "GET", "/app", op, installation_id=None, write=False, replay_safe=True
        )
        return _json_dict(response)

    async def installation_ids(self, limit: int = 100) -> list[int]:
        """The ids of the app's installations (``GET /app/installations``), at most ``limit``."""
        headers = dict(self._base_headers)

        async def op(_: dict[str, str]) -> Response[Any]:
            return await self._app_gh.rest.apps.async_list_installations(
                per_page=min(limit, 100), headers=headers
            )

        response = await self._send(
            "GET", "/app/installations", op, installation_id=None, write=False, replay_safe=True
        )
        data = _json(response)
        if not isinstance(data, list):
            raise GitHubError("GitHub returned an unexpected response shape")
        return [int(i["id"]) for i in data[:limit] if isinstance(i, dict) and "id" in i]

    async def bot_login(self) -> str:
        """The login the app comments as (``<slug>[bot]``), from ``GET /app``, once.

        Used to recognize the bot's own comments when looking for one by marker:
        anyone can type a marker line, only the app can author as the app."""
        if self._bot_login is None:
            slug = (await self.app_info()).get("slug")
            if not isinstance(slug, str) or not slug:
                raise GitHubError("GitHub returned the app without a slug")
            self._bot_login = f"{slug}[bot]"
        return self._bot_login

    async def _fetch_token(self, installation_id: int) -> InstallationToken:
        headers = dict(self._base_headers)

        async def op(_: dict[str, str]) -> Response[Any]:
            return await self._app_gh.rest.apps.async_create_installation_access_token(
                installation_id, headers=headers
            )

        response = await self._send(
            "POST", APP_INSTALLATION_ROUTE, op, installation_id=None, write=False, replay_safe=True
        )
        data = _json_dict(response)
        token, expires_at = data.get("token"), data.get("expires_at")
        if not isinstance(token, str) or not isinstance(expires_at, str):
            raise GitHubError("GitHub returned an installation token response without a token")
        try:
            when = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
        except ValueError as exc:
            raise GitHubError("GitHub returned an unreadable token expiry") from exc
        return InstallationToken(token=token, expires_at=when)

    async def _send(
        self,
        method: str,
        route: str,
        op: Callable[[dict[str, str]], Awaitable[Response[Any]]],
        *,
        installation_id: int | None,
        write: bool,
        replay_safe: bool,
        ok_statuses: Iterable[int] = (),
    ) -> Response[Any]:
        """Run ``op`` with auth headers, pacing, bounded retries and accounting.

        ``ok_statuses`` are error statuses the caller handles itself (e.g. 404 on a
        file lookup): they come back as a response instead of a GitHubError.
        """
        state = self._state(installation_id) if installation_id is not None else None
        accepted = frozenset(ok_statuses)
        refreshed = False

        async def attempt_once(attempt: int) -> Response[Any]:
            nonlocal refreshed
            headers = dict(self._base_headers)
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
                self._observe(method, route, raw.status_code, raw.headers, state)
                if raw.status_code in accepted:
                    return exc.response
                error = GitHubError(
                    f"GitHub {method} {route} failed: {raw.status_code} {_response_message(raw)}",
                    status=raw.status_code,
                )
                if raw.status_code == 401 and token is not None and not refreshed:
                    # The token may have been revoked or expired early: fetch a new one once.
                    refreshed = True
                    self._tokens.invalidate(installation_id or 0, token)
                    raise _Retry(0.0, error) from None
                if raw.status_code >= 500 and not replay_safe:
                    # GitHub may have created the object before failing: the caller
                    # checks before trying again (see bot/worker/publish.py).
                    raise error from None
                decision = decide(
                    status=raw.status_code,
                    headers=raw.headers,
                    message=_response_message(raw),
                    attempt=attempt,
                    max_wait_s=self._max_wait_s,
                    now_epoch=self._wall(),
                )
                if decision.retry and decision.wait_s is not None:
                    log.info("retrying GitHub %s %s: %s", method, route, decision.reason)
                    raise _Retry(decision.wait_s, error) from None
                raise error from None
            except RequestError as exc:
                self._observe(method, route, 0, None, state)
                inner = exc.exc
                error = GitHubError(
                    f"GitHub {method} {route} failed: {type(inner).__name__}", status=None
                )
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
                raise GitHubError(f"invalid request for GitHub {method} {route}") from exc
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

    def _observe(
        self,
        method: str,
        route: str,
        status: int,
        headers: Mapping[str, str] | None,
        state: _InstallationState | None,
    ) -> None:
        if state is not None and headers is not None:
            remaining = headers.get("x-ratelimit-remaining")
            if remaining is not None and remaining.isdigit():
                state.rate_limit_remaining = int(remaining)
        if self._on_request is not None:
            try:
                self._on_request(method, route, status)
            except Exception:  # metrics must never break a GitHub call
                log.exception("on_request callback failed")


class InstallationClient:
    """GitHub as one installation sees it. Obtain it from ``GitHubGateway.installation``."""

    def __init__(self, gateway: GitHubGateway, installation_id: int) -> None:
        self._gw = gateway
        self._gh = gateway._gh
        self.installation_id = installation_id

    @property
    def rate_limit_remaining(self) -> int | None:
        return self._gw.rate_limit_remaining(self.installation_id)

    async def _call(
        self,
        method: str,
        route: str,
        op: Callable[[dict[str, str]], Awaitable[Response[Any]]],
        *,
        write: bool = False,
        ok_statuses: Iterable[int] = (),
        replay_safe: bool | None = None,
    ) -> Response[Any]:
        """``replay_safe``: repeating the call after an unclear failure (5xx, a
        dropped connection) cannot create a second object. Default: all but POST."""
        return await self._gw._send(
            method,
            route,
            op,
            installation_id=self.installation_id,
            write=write,
            replay_safe=method != "POST" if replay_safe is None else replay_safe,
            ok_statuses=ok_statuses,
        )

    async def _paginate(
        self, route: str, first: Callable[[dict[str, str]], Awaitable[Response[Any]]]
    ) -> list[dict[str, Any]]:
        """Follow ``Link: rel="next"`` (never to another host) and concatenate pages."""
        items: list[dict[str, Any]] = []
        response = await self._call("GET", route, first)
        origin = httpx.URL(self._gw.api_url)
        for _ in range(MAX_PAGES):
            page = _json(response)
            if not isinstance(page, list):
                raise GitHubError(f"GitHub GET {route} did not return a list")
            items.extend(x for x in page if isinstance(x, dict))
            next_url = response.raw_response.links.get("next", {}).get("url")
            if not next_url:
                return items
            target = httpx.URL(next_url)
            if (target.scheme, target.host, target.port) != (
                origin.scheme,
                origin.host,
                origin.port,
            ):
                raise GitHubError(f"GitHub GET {route} paginated to another host")

            async def follow(h: dict[str, str], url: str = next_url) -> Response[Any]:
                return await self._gh.arequest("GET", url, headers=h)

            response = await self._call("GET", route, follow)
        log.warning("stopped paginating GitHub GET %s after %d pages", route, MAX_PAGES)
        return items

    async def _graphql(
        self, kind: str, query: str, variables: dict[str, Any], *, write: bool
    ) -> dict[str, Any]:
        async def op(h: dict[str, str]) -> Response[Any]:
            return await self._gh.arequest(
                "POST",
                self._gw.graphql_url,
                json={"query": query, "variables": variables},
                headers=h,
            )

        # Queries, and a resolve mutation that is a no-op the second time.
        response = await self._call("POST", f"graphql:{kind}", op, write=write, replay_safe=True)
        payload = _json_dict(response)
        errors = payload.get("errors")
        if errors:
            messages = "; ".join(str(e.get("message", "")) for e in errors if isinstance(e, dict))[
                :300
            ]
            limited = any(
                isinstance(e, dict) and e.get("type") in ("RATE_LIMIT", "RATE_LIMITED")
                for e in errors
            )
            raise GitHubError(
                f"GitHub GraphQL {kind} failed: {messages}", status=403 if limited else None
            )
        data = payload.get("data")
        if not isinstance(data, dict):
            raise GitHubError(f"GitHub GraphQL {kind} returned no data")
        return data

    # -- repository ----------------------------------------------------------

    async def permission(self, repo: str, username: str) -> str:
        """The user's role: admin | maintain | write | triage | read | none."""
        owner, name = _split(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/collaborators/{username}/permission",
            lambda h: self._gh.rest.repos.async_get_collaborator_permission_level(
                owner, name, username, headers=h
            ),
            ok_statuses=(404,),
        )
        if response.status_code == 404:
            return "none"
        data = _json_dict(response)
        # role_name tells maintain/triage apart (``permission`` folds them into
        # write/read); a custom role name falls back to the user's permission flags.
        role = data.get("role_name")
        if role in PERMISSIONS:
            return str(role)
        user = data.get("user")
        flags = user.get("permissions") if isinstance(user, dict) else None
        if isinstance(flags, dict):
            for perm, flag in (
                ("admin", "admin"),
                ("maintain", "maintain"),
                ("write", "push"),
                ("triage", "triage"),
                ("read", "pull"),
            ):
                if flags.get(flag):
                    return perm
        legacy = data.get("permission")
        return str(legacy) if legacy in PERMISSIONS else "none"

    async def default_branch(self, repo: str) -> str:
        owner, name = _split(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}",
            lambda h: self._gh.rest.repos.async_get(owner, name, headers=h),
        )
        branch = _json_dict(response).get("default_branch")
        if not isinstance(branch, str) or not branch:
            raise GitHubError("GitHub returned a repository without a default branch")
        return branch

    async def read_file(self, repo: str, path: str, ref: str | None = None) -> str | None:
        """A UTF-8 text file's content, or None when it does not exist (404)."""
        owner, name = _split(repo)
        quoted = quote(path.strip("/"), safe="/")
        route = "/repos/{owner}/{repo}/contents/{path}"
        kwargs: dict[str, Any] = {} if ref is None else {"ref": ref}
        response = await self._call(
            "GET",
            route,
            lambda h: self._gh.rest.repos.async_get_content(
                owner, name, quoted, headers=h, **kwargs
            ),
            ok_statuses=(404,),
        )
        if response.status_code == 404:
            return None
        data = _json(response)
        if isinstance(data, list):
            raise GitHubError(f"{path} is a directory, not a file", status=response.status_code)
        if not isinstance(data, dict) or data.get("type") != "file":
            kind = data.get("type") if isinstance(data, dict) else type(data).__name__
            raise GitHubError(f"{path} is a {kind}, not a file", status=response.status_code)
        if data.get("encoding") == "base64":
            try:
                raw = base64.b64decode(str(data.get("content", "")))
            except (binascii.Error, ValueError) as exc:
                raise GitHubError(f"{path}: undecodable content") from exc
        else:
            # Files over 1 MB come back with encoding "none": fetch the raw bytes.
            async def raw_op(h: dict[str, str]) -> Response[Any]:
                h = {**h, "Accept": "application/vnd.github.raw+json"}
                return await self._gh.rest.repos.async_get_content(
                    owner, name, quoted, headers=h, **kwargs
                )

            raw = (await self._call("GET", route, raw_op)).raw_response.content
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GitHubError(f"{path} is not a UTF-8 text file") from exc

    # -- issue comments ------------------------------------------------------

    async def create_comment(self, repo: str, issue_number: int, body: str) -> int:
        owner, name = _split(repo)
        response = await self._call(
            "POST",
            "/repos/{owner}/{repo}/issues/{issue_number}/comments",
            lambda h: self._gh.rest.issues.async_create_comment(
                owner, name, issue_number, body=body, headers=h
            ),
            write=True,
        )
        return int(_json_dict(response)["id"])

    async def update_comment(self, repo: str, comment_id: int, body: str) -> None:
        owner, name = _split(repo)
        await self._call(
            "PATCH",
            "/repos/{owner}/{repo}/issues/comments/{comment_id}",
            lambda h: self._gh.rest.issues.async_update_comment(
                owner, name, comment_id, body=body, headers=h
            ),
            write=True,
        )

    async def bot_login(self) -> str:
        return await self._gw.bot_login()

    async def list_comments(self, repo: str, issue_number: int) -> list[dict[str, Any]]:
        """The issue's comments as GitHub's JSON (id, body, user, …), every page."""
        owner, name = _split(repo)
        items = await self._paginate(
            "/repos/{owner}/{repo}/issues/{issue_number}/comments",
            lambda h: self._gh.rest.issues.async_list_comments(
                owner, name, issue_number, per_page=PER_PAGE, headers=h
            ),
        )
        return [c for c in items if "id" in c]

    # -- reactions -----------------------------------------------------------

    async def add_reaction(
        self, repo: str, comment_id: int, content: str, *, review_comment: bool = False
    ) -> None:
        owner, name = _split(repo)
        _check_reaction(content)
        data: Any = {"content": content}
        if review_comment:
            await self._call(
                "POST",
                "/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions",
                lambda h: self._gh.rest.reactions.async_create_for_pull_request_review_comment(
                    owner, name, comment_id, data=data, headers=h
                ),
                write=True,
                replay_safe=True,  # GitHub answers 200 for a repeat
            )
        else:
            await self._call(
                "POST",
                "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
                lambda h: self._gh.rest.reactions.async_create_for_issue_comment(
                    owner, name, comment_id, data=data, headers=h
                ),
                write=True,
                replay_safe=True,  # GitHub answers 200 for a repeat
            )

    async def add_issue_reaction(self, repo: str, issue_number: int, content: str) -> None:
        owner, name = _split(repo)
        _check_reaction(content)
        data: Any = {"content": content}
        await self._call(
            "POST",
            "/repos/{owner}/{repo}/issues/{issue_number}/reactions",
            lambda h: self._gh.rest.reactions.async_create_for_issue(
                owner, name, issue_number, data=data, headers=h
            ),
            write=True,
            replay_safe=True,  # GitHub answers 200 for a repeat
        )

    # -- labels and issues ---------------------------------------------------

    async def add_labels(self, repo: str, issue_number: int, labels: Iterable[str]) -> None:
        owner, name = _split(repo)
        wanted = list(labels)
        if not wanted:
            return
        await self._call(
            "POST",
            "/repos/{owner}/{repo}/issues/{issue_number}/labels",
            lambda h: self._gh.rest.issues.async_add_labels(
                owner, name, issue_number, labels=wanted, headers=h
            ),
            write=True,
            replay_safe=True,  # GitHub answers 200 for a repeat
        )

    async def remove_label(self, repo: str, issue_number: int, label: str) -> None:
        """Remove a label; a label that is not there (404) is not an error."""
        owner, name = _split(repo)
        await self._call(
            "DELETE",
            "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}",
            lambda h: self._gh.rest.issues.async_remove_label(
                owner, name, issue_number, quote(label, safe=""), headers=h
            ),
            write=True,
            ok_statuses=(404,),
        )

    async def create_issue(
        self, repo: str, title: str, body: str, labels: Iterable[str] = ()
    ) -> int:
        owner, name = _split(repo)
        data: Any = {"title": title, "body": body}
        if labels:
            data["labels"] = list(labels)
        response = await self._call(
            "POST",
            "/repos/{owner}/{repo}/issues",
            lambda h: self._gh.rest.issues.async_create(owner, name, data=data, headers=h),
            write=True,
        )
        return int(_json_dict(response)["number"])

    async def find_own_issue(self, repo: str, marker: str) -> int | None:
        """The newest issue the app filed whose body carries ``marker`` (one page:
        it is asked right after filing, or on resuming the run that filed it)."""
        owner, name = _split(repo)
        me = await self.bot_login()
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/issues",
            lambda h: self._gh.rest.issues.async_list_for_repo(
                owner,
                name,
                creator=me,
                state="all",
                sort="created",
                direction="desc",
                per_page=PER_PAGE,
                headers=h,
            ),
        )
        for issue in _json(response) or []:
            if isinstance(issue, dict) and marker in str(issue.get("body") or ""):
                return int(issue["number"])
        return None

    async def get_issue(self, repo: str, number: int) -> dict[str, Any]:
        """The issue as GitHub returns it (``pull_request`` present on PRs)."""
        owner, name = _split(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/issues/{issue_number}",
            lambda h: self._gh.rest.issues.async_get(owner, name, number, headers=h),
        )
        return _json_dict(response)

    # -- pull requests -------------------------------------------------------

    async def get_pull(self, repo: str, number: int) -> dict[str, Any]:
        owner, name = _split(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/pulls/{pull_number}",
            lambda h: self._gh.rest.pulls.async_get(owner, name, number, headers=h),
        )
        return _json_dict(response)

    async def list_pull_files(self, repo: str, number: int) -> list[dict[str, Any]]:
        owner, name = _split(repo)
        return await self._paginate(
            "/repos/{owner}/{repo}/pulls/{pull_number}/files",
            lambda h: self._gh.rest.pulls.async_list_files(
                owner, name, number, per_page=PER_PAGE, headers=h
            ),
        )

    async def get_review_comment(self, repo: str, comment_id: int) -> dict[str, Any]:
        owner, name = _split(repo)
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/pulls/comments/{comment_id}",
            lambda h: self._gh.rest.pulls.async_get_review_comment(
                owner, name, comment_id, headers=h
            ),
        )
        return _json_dict(response)

    async def list_review_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        owner, name = _split(repo)
        return await self._paginate(
            "/repos/{owner}/{repo}/pulls/{pull_number}/comments",
            lambda h: self._gh.rest.pulls.async_list_review_comments(
                owner, name, number, per_page=PER_PAGE, headers=h
            ),
        )

    async def reply_review_comment(
        self, repo: str, pull_number: int, comment_id: int, body: str
    ) -> int:
        owner, name = _split(repo)
        response = await self._call(
            "POST",
            "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies",
            lambda h: self._gh.rest.pulls.async_create_reply_for_review_comment(
                owner, name, pull_number, comment_id, body=body, headers=h
            ),
            write=True,
        )
        return int(_json_dict(response)["id"])

    async def update_review_comment(self, repo: str, comment_id: int, body: str) -> None:
        owner, name = _split(repo)
        await self._call(
            "PATCH",
            "/repos/{owner}/{repo}/pulls/comments/{comment_id}",
            lambda h: self._gh.rest.pulls.async_update_review_comment(
                owner, name, comment_id, body=body, headers=h
            ),
            write=True,
        )

    async def _review_threads(self, repo: str, pull_number: int) -> AsyncIterator[dict[str, Any]]:
        """The pull request's review threads (GraphQL: REST does not carry resolution)."""
        owner, name = _split(repo)
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            data = await self._graphql(
                "reviewThreads",
                _REVIEW_THREADS_QUERY,
                {"owner": owner, "name": name, "number": pull_number, "cursor": cursor},
                write=False,
            )
            threads = _dig(data, "repository", "pullRequest", "reviewThreads")
            if not isinstance(threads, dict):
                raise GitHubError(f"pull request {repo}#{pull_number} not found via GraphQL")
            for node in threads.get("nodes") or []:
                if isinstance(node, dict):
                    yield node
            page = threads.get("pageInfo") or {}
            if not page.get("hasNextPage"):
                return
            cursor = page.get("endCursor")

    @staticmethod
    def _thread_comment_ids(node: dict[str, Any]) -> set[int]:
        return {
            c["databaseId"]
            for c in (_dig(node, "comments", "nodes") or [])
            if isinstance(c, dict) and isinstance(c.get("databaseId"), int)
        }

    async def review_thread_states(self, repo: str, pull_number: int) -> dict[int, bool]:
        """Every review comment id on the pull request → whether its thread is resolved."""
        states: dict[int, bool] = {}
        async for node in self._review_threads(repo, pull_number):
            resolved = bool(node.get("isResolved"))
            for comment_id in self._thread_comment_ids(node):
                states[comment_id] = resolved
        return states

    async def resolve_review_thread(self, repo: str, pull_number: int, comment_id: int) -> bool:
        """Resolve the review thread holding ``comment_id``; False if no thread holds it."""
        thread: dict[str, Any] | None = None
        async for node in self._review_threads(repo, pull_number):
            if comment_id in self._thread_comment_ids(node):
                thread = node
                break
        if thread is None:
            return False
        if thread.get("isResolved"):
            return True
        result = await self._graphql(
            "resolveReviewThread",
            _RESOLVE_THREAD_MUTATION,
            {"threadId": thread["id"]},
            write=True,
        )
        return bool(_dig(result, "resolveReviewThread", "thread", "isResolved"))

    async def branch_sha(self, repo: str, branch: str) -> str:
        """The commit a branch points at."""
        owner, name = _split(repo)
        ref = "heads/" + quote(branch, safe="/")
        response = await self._call(
            "GET",
            "/repos/{owner}/{repo}/git/ref/{ref}",
            lambda h: self._gh.rest.git.async_get_ref(owner, name, ref, headers=h),
        )
        sha = _dig(response.raw_response.json(), "object", "sha")
        if not isinstance(sha, str) or not sha:
            raise GitHubError(f"GitHub returned no commit for branch {branch!r}")
        return sha

    # -- branches, files, pull creation --------------------------------------

    async def create_branch(self, repo: str, branch: str, from_sha: str) -> None:
        owner, name = _split(repo)
        await self._call(
            "POST",
            "/repos/{owner}/{repo}/git/refs",
            lambda h: self._gh.rest.git.async_create_ref(
                owner, name, ref=f"refs/heads/{branch}", sha=from_sha, headers=h
            ),
            write=True,
        )

    async def put_file(
        self,
        repo: str,
        path: str,
        branch: str,
        content: str,
        message: str,
        sha: str | None = None,
    ) -> None:
        """Create or replace a file on ``branch``.

        ``sha`` is the blob being replaced; when omitted it is looked up, so this is
        an upsert (e.g. a revised plan written over the original on a new branch).
        """
        owner, name = _split(repo)
        quoted = quote(path.strip("/"), safe="/")
        if sha is None:
            existing = await self._call(
                "GET",
                "/repos/{owner}/{repo}/contents/{path}",
                lambda h: self._gh.rest.repos.async_get_content(
                    owner, name, quoted, ref=branch, headers=h
                ),
                ok_statuses=(404,),
            )
            if existing.status_code != 404:
                found = _json(existing)
                if isinstance(found, dict) and isinstance(found.get("sha"), str):
                    sha = found["sha"]
        data: Any = {
            "message": message,
            "content": base64.b64encode(content.encode("utf-8")).decode("ascii"),
            "branch": branch,
        }
        if sha is not None:
            data["sha"] = sha
        await self._call(
            "PUT",
            "/repos/{owner}/{repo}/contents/{path}",
            lambda h: self._gh.rest.repos.async_create_or_update_file_contents(
                owner, name, quoted, data=data, headers=h
            ),
            write=True,
        )

    async def create_pull(self, repo: str, title: str, head: str, base: str, body: str) -> int:
        owner, name = _split(repo)
        data: Any = {"title": title, "head": head, "base": base, "body": body}
        response = await self._call(
            "POST",
            "/repos/{owner}/{repo}/pulls",
            lambda h: self._gh.rest.pulls.async_create(owner, name, data=data, headers=h),
            write=True,
        )
        return int(_json_dict(response)["number"])


def _check_reaction(content: str) -> None:
    if content not in REACTIONS:
        raise GitHubError(f"unknown reaction {content!r}")


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
