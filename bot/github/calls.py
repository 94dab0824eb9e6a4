"""InstallationCalls: what every endpoint group builds on.

One installation's view of a ``GitHubSession``: single calls, ``Link``-header
pagination and GraphQL, plus small readers of GitHub's answers. The endpoint
groups (``issues``, ``pulls``, ``repos``) subclass it and ``InstallationClient``
in ``bot.github.gateway`` combines them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import httpx
from githubkit.response import Response

from bot.core.logs import get_logger
from bot.github.session import GitHubSession, Op, github_error, json_body, json_dict

log = get_logger(__name__)

MAX_PAGES = 100  # 10,000 items at per_page=100: a bound, not an expectation
PER_PAGE = 100


def split_repo(repo: str) -> tuple[str, str]:
    owner, sep, name = repo.partition("/")
    if not sep or not owner or not name or "/" in name:
        raise github_error(f"invalid repository name {repo!r}")
    return owner, name


def dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


class InstallationCalls:
    def __init__(
        self,
        session: GitHubSession,
        installation_id: int,
        bot_login: Callable[[], Awaitable[str]],
        since: float | None = None,
    ) -> None:
        self._session = session
        self._gh = session.gh
        self._bot_login = bot_login
        self.installation_id = installation_id
        # When the run these calls serve started (or their delivery arrived), epoch
        # seconds: the installation's waiting writes go oldest first
        # (bot/github/pacing.py); None: counted from when a write queues.
        self.since = since

    @property
    def rate_limit_remaining(self) -> int | None:
        return self._session.rate_limit_remaining(self.installation_id)

    async def bot_login(self) -> str:
        return await self._bot_login()

    async def _call(
        self,
        method: str,
        route: str,
        op: Op,
        *,
        write: bool = False,
        ok_statuses: Iterable[int] = (),
        replay_safe: bool | None = None,
    ) -> Response[Any]:
        """``replay_safe``: repeating the call after an unclear failure (5xx, a
        dropped connection) cannot create a second object. Default: all but POST."""
        return await self._session.send(
            method,
            route,
            op,
            installation_id=self.installation_id,
            write=write,
            replay_safe=method != "POST" if replay_safe is None else replay_safe,
            ok_statuses=ok_statuses,
            since=self.since,
        )

    async def _paginate(self, route: str, first: Op) -> list[dict[str, Any]]:
        """Follow ``Link: rel="next"`` (never to another host) and concatenate pages."""
        items: list[dict[str, Any]] = []
        async for page in self._pages(route, first):
            items.extend(page)
        return items

    async def _pages(self, route: str, first: Op) -> AsyncIterator[list[dict[str, Any]]]:
        """Each page's objects in turn, following ``Link: rel="next"`` (never to
        another host); a caller may stop early (e.g. past a date)."""
        response = await self._call("GET", route, first)
        origin = httpx.URL(self._session.api_url)
        for _ in range(MAX_PAGES):
            page = json_body(response)
            if not isinstance(page, list):
                raise github_error(f"GitHub GET {route} did not return a list")
            yield [x for x in page if isinstance(x, dict)]
            next_url = response.raw_response.links.get("next", {}).get("url")
            if not next_url:
                return
            target = httpx.URL(next_url)
            if (target.scheme, target.host, target.port) != (
                origin.scheme,
                origin.host,
                origin.port,
            ):
                raise github_error(f"GitHub GET {route} paginated to another host")

            async def follow(h: dict[str, str], url: str = next_url) -> Response[Any]:
                return await self._gh.arequest("GET", url, headers=h)

            response = await self._call("GET", route, follow)
        log.warning("github.pagination_stopped", route=route, pages=MAX_PAGES)

    async def _graphql(
        self, kind: str, query: str, variables: dict[str, Any], *, write: bool
    ) -> dict[str, Any]:
        async def op(h: dict[str, str]) -> Response[Any]:
            return await self._gh.arequest(
                "POST",
                self._session.graphql_url,
                json={"query": query, "variables": variables},
                headers=h,
            )

        # Queries, and a resolve mutation that is a no-op the second time.
        response = await self._call("POST", f"graphql:{kind}", op, write=write, replay_safe=True)
        payload = json_dict(response)
        errors = payload.get("errors")
        if errors:
            messages = "; ".join(str(e.get("message", "")) for e in errors if isinstance(e, dict))[
                :300
            ]
            limited = any(
                isinstance(e, dict) and e.get("type") in ("RATE_LIMIT", "RATE_LIMITED")
                for e in errors
            )
            raise github_error(
                f"GitHub GraphQL {kind} failed: {messages}",
                github_status=403 if limited else None,
                rate_limited=limited,
            )
        data = payload.get("data")
        if not isinstance(data, dict):
            raise github_error(f"GitHub GraphQL {kind} returned no data")
        return data
