"""GitHubGateway: every call debate-bot makes to GitHub.

The transport policy (auth, pacing, retries, accounting, transient-or-final)
lives in ``bot.github.session``; the endpoints an installation can call are
grouped by area in ``issues``, ``pulls`` and ``repos`` and combined here into
``InstallationClient``. The app's own endpoints (``GET /app``, its installations,
its webhook deliveries) and the credential-less manifest conversion are here too.
"""

from __future__ import annotations

import types
from functools import cached_property
from typing import Any
from urllib.parse import quote

import httpx
from githubkit.response import Response
from githubkit.utils import UNSET

from bot.github.calls import split_repo
from bot.github.issues import IssueEndpoints
from bot.github.pulls import PullEndpoints, PullHistoryEndpoints
from bot.github.repos import RepoEndpoints
from bot.github.session import (
    GHES_API_VERSION,
    GitHubSession,
    Op,
    github_error,
    graphql_url,
    is_enterprise_server,
    json_body,
    json_dict,
)

__all__ = ["GitHubGateway", "InstallationClient", "convert_manifest", "graphql_url"]


async def convert_manifest(
    api_url: str,
    code: str,
    *,
    timeout_s: float = 30.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """``POST /app-manifests/{code}/conversions``: the app GitHub just created
    from a manifest, with its id, private key and webhook secret. Needs no
    credentials (the one-hour code is the credential), so no gateway exists yet."""
    url = f"{api_url.rstrip('/')}/app-manifests/{quote(code, safe='')}/conversions"
    headers = {"Accept": "application/vnd.github+json", "User-Agent": "debate-bot"}
    if is_enterprise_server(api_url):
        headers["X-GitHub-Api-Version"] = GHES_API_VERSION
    try:
        async with httpx.AsyncClient(timeout=timeout_s, transport=transport) as client:
            response = await client.post(url, headers=headers)
    except httpx.HTTPError as exc:
        raise github_error(f"GitHub did not answer: {type(exc).__name__}") from exc
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code != 201 or not isinstance(data, dict):
        message = data.get("message") if isinstance(data, dict) else None
        raise github_error(
            f"GitHub refused the conversion ({response.status_code}): {message or 'no message'}",
            github_status=response.status_code,
        )
    return data


ACTIONS_BOT = "github-actions[bot]"


class InstallationClient(IssueEndpoints, PullEndpoints, PullHistoryEndpoints, RepoEndpoints):
    """GitHub as one installation sees it. Obtain it from ``GitHubGateway.installation``."""


class GitHubGateway(GitHubSession):
    """The session (see ``GitHubSession`` for its arguments; ``transport=`` replaces
    the pooled HTTP transport, e.g. with ``httpx.ASGITransport`` in tests), the
    app's own endpoints, and one ``InstallationClient`` per installation."""

    _bot_login: str | None = None  # from GET /app, once

    @cached_property
    def _clients(self) -> dict[int, InstallationClient]:
        return {}

    async def installation(
        self, installation_id: int, *, since: float | None = None
    ) -> InstallationClient:
        """A client acting as the installation; its token is fetched (or reused) now.
        ``since``: when the run it serves started (or its delivery arrived), epoch
        seconds, so its writes wait their turn oldest first (bot/github/pacing.py);
        None: counted from when each write queues."""
        await self.token(installation_id)
        if since is not None:  # a run's or a delivery's own: a few fields, not kept
            return InstallationClient(self, installation_id, self.bot_login, since)
        client = self._clients.get(installation_id)
        if client is None:
            client = InstallationClient(self, installation_id, self.bot_login)
            self._clients[installation_id] = client
        return client

    async def __aenter__(self) -> GitHubGateway:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the app's own endpoints (authenticated as the app) --------------------

    async def _as_app(
        self, route: str, op: Op, method: str = "GET", *, replay_safe: bool = True
    ) -> Response[Any]:
        return await self.send(
            method, route, op, installation_id=None, write=False, replay_safe=replay_safe
        )

    async def app_info(self) -> dict[str, Any]:
        """``GET /app`` as the app itself: slug, granted permissions, events."""
        headers = self.base_headers

        async def op(_: dict[str, str]) -> Response[Any]:
            return await self.app.rest.apps.async_get_authenticated(headers=headers)

        return json_dict(await self._as_app("/app", op))

    async def installation_ids(self, limit: int = 100) -> list[int]:
        """The ids of the app's installations (``GET /app/installations``), at most ``limit``."""
        headers = self.base_headers

        async def op(_: dict[str, str]) -> Response[Any]:
            return await self.app.rest.apps.async_list_installations(
                per_page=min(limit, 100), headers=headers
            )

        data = json_body(await self._as_app("/app/installations", op))
        if not isinstance(data, list):
            raise github_error("GitHub returned an unexpected response shape")
        return [int(i["id"]) for i in data[:limit] if isinstance(i, dict) and "id" in i]

    async def repo_installation(self, repo: str) -> int:
        """The id of the app's installation on ``repo`` (404: the app is not installed there)."""
        owner, name = split_repo(repo)
        headers = self.base_headers

        async def op(_: dict[str, str]) -> Response[Any]:
            return await self.app.rest.apps.async_get_repo_installation(
                owner, name, headers=headers
            )

        data = json_dict(await self._as_app("/repos/{owner}/{repo}/installation", op))
        if not isinstance(data.get("id"), int):
            raise github_error("GitHub returned an installation without an id")
        return int(data["id"])

    async def bot_login(self) -> str:
        """The login the app comments as (``<slug>[bot]``), from ``GET /app``, once.

        Used to recognize the bot's own comments when looking for one by marker:
        anyone can type a marker line, only the app can author as the app."""
        if self._bot_login is None and self.in_actions:
            self._bot_login = ACTIONS_BOT  # the job token comments as Actions' own bot
        if self._bot_login is None:
            slug = (await self.app_info()).get("slug")
            if not isinstance(slug, str) or not slug:
                raise github_error("GitHub returned the app without a slug")
            self._bot_login = f"{slug}[bot]"
        return self._bot_login

    async def hook_deliveries(
        self, *, cursor: str | None = None, per_page: int = 100
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of ``GET /app/hook/deliveries`` (every attempt to deliver to the
        app's webhook, newest first) and the cursor of the next page, from the
        ``Link: rel="next"`` header (None on the last page)."""
        headers = self.base_headers

        async def op(_: dict[str, str]) -> Response[Any]:
            return await self.app.rest.apps.async_list_webhook_deliveries(
                per_page=min(max(per_page, 1), 100),
                cursor=cursor if cursor is not None else UNSET,
                headers=headers,
            )

        response = await self._as_app("/app/hook/deliveries", op)
        data = json_body(response)
        if not isinstance(data, list):
            raise github_error("GitHub returned an unexpected response shape")
        next_url = response.raw_response.links.get("next", {}).get("url")
        next_cursor = httpx.URL(next_url).params.get("cursor") if next_url else None
        return [d for d in data if isinstance(d, dict)], next_cursor or None

    async def redeliver(self, hook_delivery_id: int) -> None:
        """``POST /app/hook/deliveries/{delivery_id}/attempts``: GitHub sends that
        delivery again (same ``X-GitHub-Delivery``). Not replayed after a 5xx or a
        dropped connection: GitHub may have acted, and the caller's next pass sees
        whether the delivery arrived before asking again."""
        headers = self.base_headers

        async def op(_: dict[str, str]) -> Response[Any]:
            return await self.app.rest.apps.async_redeliver_webhook_delivery(
                hook_delivery_id, headers=headers
            )

        route = "/app/hook/deliveries/{delivery_id}/attempts"
        await self._as_app(route, op, method="POST", replay_safe=False)
