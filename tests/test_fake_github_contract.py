"""The fake GitHub speaks GitHub's REST routes: checked against the OpenAPI subset
in tests/fixtures/rest-subset.json (GitHub's own description, see SOURCES.md)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx
import jwt
import pytest
from starlette.routing import Route

from tests.fakes.github_server import FakeGitHub
from tests.harness.service import FIXTURES, rsa_keypair

SUBSET: dict[str, Any] = json.loads((FIXTURES / "rest-subset.json").read_text())
PATHS: dict[str, dict[str, Any]] = SUBSET["paths"]
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}

# Operations in the subset that the bot never calls, so the fake need not serve them.
NOT_USED = {
    ("get", "/repos/{owner}/{repo}/installation"),
    ("patch", "/repos/{owner}/{repo}/issues/{issue_number}"),
}


def _fake_routes() -> dict[str, set[str]]:
    """The fake's routes as OpenAPI templates (``{id:int}`` -> ``{id}``) and methods."""
    _, public = rsa_keypair()
    app = FakeGitHub(app_id=1, public_key_pem=public)._build_app()
    routes: dict[str, set[str]] = {}
    for route in app.routes:
        if isinstance(route, Route) and route.methods:
            template = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
            routes.setdefault(template, set()).update(m.lower() for m in route.methods)
    return routes


ROUTES = _fake_routes()


def _shape(template: str) -> str:
    return re.sub(r"\{\w+\}", "{}", template)


def test_the_subset_is_the_rest_description() -> None:
    assert SUBSET["openapi"].startswith("3.0")
    assert len(PATHS) >= 14


@pytest.mark.parametrize(
    ("method", "path"),
    sorted(
        (m, p)
        for p, ops in PATHS.items()
        for m in ops
        if m in HTTP_METHODS and (m, p) not in NOT_USED
    ),
)
def test_every_operation_the_bot_uses_is_served(method: str, path: str) -> None:
    assert method in ROUTES.get(path, set()), f"the fake does not serve {method.upper()} {path}"


def test_served_routes_use_githubs_templates_and_methods() -> None:
    by_shape = {_shape(p): p for p in PATHS}
    checked = 0
    for template, methods in ROUTES.items():
        real = by_shape.get(_shape(template))
        if real is None:
            continue  # an endpoint outside the subset (git refs, GraphQL, …)
        checked += 1
        assert template == real, f"{template} names its parameters unlike GitHub's {real}"
        documented = set(PATHS[real]) & HTTP_METHODS
        # The subset holds only the methods the bot uses; any other served method
        # on the same path must at least be a real one.
        assert methods & documented, f"{template}: none of {methods} is documented"
    assert checked >= len(PATHS) - 1


def test_installation_token_has_the_required_fields() -> None:
    private, public = rsa_keypair()
    schema = SUBSET["components"]["schemas"]["installation-token"]
    with FakeGitHub(app_id=7, public_key_pem=public) as gh:
        gh.add_installation(99)
        now = int(time.time())
        token = jwt.encode({"iat": now - 60, "exp": now + 540, "iss": "7"}, private, "RS256")
        r = httpx.post(
            f"{gh.api_url}/app/installations/99/access_tokens",
            headers={"authorization": f"Bearer {token}", "accept": "application/vnd.github+json"},
        )
    documented = PATHS["/app/installations/{installation_id}/access_tokens"]["post"]["responses"]
    assert str(r.status_code) in documented
    body = r.json()
    assert set(schema["required"]) <= set(body)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body["expires_at"])
