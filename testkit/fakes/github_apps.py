"""The fake GitHub's app routes (installed by ``FakeGitHub``): the app, the manifest
flow (github.com pages, then the REST conversion), installations, installation
tokens and the app's webhook deliveries."""

from __future__ import annotations

import json
import re
import secrets
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlencode

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from testkit.fakes.github_model import (
    ApiError,
    not_found,
)

if TYPE_CHECKING:
    from testkit.fakes.github_server import FakeGitHub


def install(app: FastAPI, fake: FakeGitHub) -> None:
    P = fake.api_prefix
    lock = fake._lock

    # -- apps ----------------------------------------------------------

    @app.get(P + "/app")
    async def get_app(request: Request) -> JSONResponse:
        fake._check_app_jwt(request)
        return JSONResponse(
            {
                "id": fake.app_id,
                "slug": fake.app_slug,
                "name": fake.app_slug,
                "permissions": fake.app_permissions,
                "events": fake.app_events,
            }
        )

    # -- the manifest flow (github.com pages, then the REST conversion) ----

    @app.post("/settings/apps/new")
    @app.post("/organizations/{org}/settings/apps/new")
    async def new_app_from_manifest(request: Request) -> Response:
        form = parse_qs((await request.body()).decode())
        manifest = json.loads(form["manifest"][0])
        code = secrets.token_hex(10)
        with lock:
            fake._manifest_codes[code] = manifest
        query = urlencode({"code": code, "state": request.query_params.get("state", "")})
        return Response(
            status_code=302, headers={"location": f"{manifest['redirect_url']}?{query}"}
        )

    @app.post(P + "/app-manifests/{code}/conversions")
    async def convert_manifest(code: str) -> JSONResponse:
        with lock:
            manifest = fake._manifest_codes.pop(code, None)
        if manifest is None or fake.manifest_private_key is None:
            raise not_found()
        fake.app_permissions = dict(manifest.get("default_permissions") or {})
        fake.app_events = list(manifest.get("default_events") or [])
        fake.manifests.append(manifest)
        return JSONResponse(
            {
                "id": fake.app_id,
                "slug": fake.app_slug,
                "name": manifest.get("name"),
                "html_url": f"{fake.url}/apps/{fake.app_slug}",
                "pem": fake.manifest_private_key,
                "webhook_secret": fake.manifest_webhook_secret,
                "client_id": "Iv1.fake",
                "client_secret": "fake-client-secret",
                "permissions": fake.app_permissions,
                "events": fake.app_events,
            },
            status_code=201,
        )

    @app.get(P + "/app/installations")
    async def list_installations(request: Request) -> JSONResponse:
        fake._check_app_jwt(request)
        with lock:
            ids = sorted(fake._installations)
        return fake._page(
            request,
            [
                {
                    "id": i,
                    "app_id": fake.app_id,
                    "app_slug": fake.app_slug,
                    "permissions": fake._permissions_of(i),
                    "events": fake.app_events,
                }
                for i in ids
            ],
        )

    @app.get(P + "/repos/{owner}/{repo}/installation")
    async def repo_installation(owner: str, repo: str, request: Request) -> JSONResponse:
        """The app's installation on a repository (app JWT); 404 when not installed."""
        fake._check_app_jwt(request)
        with lock:
            r = fake._repos.get(f"{owner}/{repo}")
            if r is None:
                raise not_found()
            return JSONResponse(
                {
                    "id": r.installation_id,
                    "app_id": fake.app_id,
                    "app_slug": fake.app_slug,
                    "permissions": fake._permissions_of(r.installation_id),
                    "events": fake.app_events,
                }
            )

    @app.post(P + "/app/installations/{installation_id:int}/access_tokens")
    async def create_token(installation_id: int, request: Request) -> JSONResponse:
        fake._check_app_jwt(request)
        with lock:
            if installation_id not in fake._installations:
                raise not_found()
            token = "ghs_" + secrets.token_hex(18)
            expires = time.time() + fake.token_ttl_s
            fake._tokens[token] = (installation_id, expires)
        expires_at = datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return JSONResponse(
            {
                "token": token,
                "expires_at": expires_at,
                "permissions": fake._permissions_of(installation_id),
                "repository_selection": "all",
            },
            status_code=201,
        )

    # -- the app's webhook deliveries ----------------------------------

    @app.get(P + "/app/hook/deliveries")
    async def list_hook_deliveries(request: Request) -> JSONResponse:
        """Newest first; ``cursor`` (from the ``Link`` header) names a page's first attempt."""
        fake._check_app_jwt(request)
        try:
            per_page = min(100, max(1, int(request.query_params.get("per_page", 30))))
        except ValueError:
            raise ApiError(400, "Invalid pagination parameters") from None
        cursor = request.query_params.get("cursor")
        with lock:
            items = sorted(fake.hook_deliveries, key=lambda d: d.id, reverse=True)
        if cursor is not None:
            if (m := re.fullmatch(r"v1_(\d+)", cursor)) is None:
                raise ApiError(400, "Invalid cursor")
            items = [d for d in items if d.id <= int(m.group(1))]
        page, rest = items[:per_page], items[per_page:]
        headers = {}
        if rest:
            query = urlencode({"per_page": per_page, "cursor": f"v1_{rest[0].id}"})
            next_url = f"{str(request.url).split('?')[0]}?{query}"
            headers["Link"] = f'<{next_url}>; rel="next"'
        return JSONResponse([d.json() for d in page], headers=headers)

    @app.post(P + "/app/hook/deliveries/{delivery_id:int}/attempts")
    async def redeliver_hook_delivery(delivery_id: int, request: Request) -> JSONResponse:
        """Sends the attempt's event again (same guid) before answering 202, so a
        test sees the new attempt as soon as the bot has its answer."""
        fake._check_app_jwt(request)
        with lock:
            attempt = next((d for d in fake.hook_deliveries if d.id == delivery_id), None)
        if attempt is None:
            raise not_found()
        if datetime.now(UTC) - attempt.delivered_at > fake.redelivery_max_age:
            raise ApiError(
                422,
                "Validation Failed",
                errors=[{"resource": "HookDelivery", "code": "invalid", "field": "id"}],
            )
        await anyio.to_thread.run_sync(lambda: fake._send_hook(attempt, redelivery=True))
        return JSONResponse({}, status_code=202)
