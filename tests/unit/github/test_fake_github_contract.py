"""The fake GitHub speaks GitHub's REST routes: checked against the OpenAPI subset
in tests/fixtures/rest-subset.json (GitHub's own description, see SOURCES.md)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
from starlette.routing import Route

from testkit.fakes.github_server import SECONDARY_DOCS, SECONDARY_MESSAGE, FakeGitHub
from testkit.harness.service import FIXTURES, rsa_keypair

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


# -- GitHub's content-creation limits (80 a minute, 500 an hour per installation) --


@dataclass
class Writer:
    """A client of one installation of a fake whose clock the test sets."""

    gh: FakeGitHub
    client: httpx.Client
    jwt: str
    repo: str
    number: int
    token: str = ""

    def app(self, method: str, path: str) -> httpx.Response:
        auth = {"authorization": f"Bearer {self.jwt}"}
        return self.client.request(method, self.gh.api_url + path, headers=auth)

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        auth = {"authorization": f"token {self.token}"}
        return self.client.request(method, f"{self.gh.api_url}{path}", headers=auth, **kwargs)

    def comment(self, body: str = "x") -> httpx.Response:
        return self.call(
            "POST", f"/repos/{self.repo}/issues/{self.number}/comments", json={"body": body}
        )

    def comments(self) -> int:
        return len(self.gh.comments(self.repo, self.number))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _writers(gh: FakeGitHub, private: str, *installations: int) -> Iterator[list[Writer]]:
    now = int(time.time())
    app_jwt = jwt.encode(
        {"iat": now - 60, "exp": now + 540, "iss": str(gh.app_id)}, private, "RS256"
    )
    with httpx.Client() as client:
        writers = []
        for i in installations:
            repo = f"org{i}/repo"
            gh.add_repo(repo, installation_id=i)
            w = Writer(gh, client, app_jwt, repo, gh.add_issue(repo, title="t"))
            r = w.app("POST", f"/app/installations/{i}/access_tokens")
            assert r.status_code == 201
            w.token = r.json()["token"]
            writers.append(w)
        yield writers


@pytest.fixture
def writers(clock: Clock) -> Iterator[list[Writer]]:
    private, public = rsa_keypair()
    with FakeGitHub(app_id=7, public_key_pem=public) as gh:
        gh.clock = clock
        yield from _writers(gh, private, 1, 2)


def _refused(r: httpx.Response) -> int:
    """The Retry-After of GitHub's secondary-limit answer (asserting its shape)."""
    assert r.status_code == 403
    assert r.json() == {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}
    return int(r.headers["retry-after"])


def test_the_81st_write_in_a_minute_is_refused_and_has_no_effect(
    writers: list[Writer], clock: Clock
) -> None:
    w = writers[0]
    for i in range(80):
        assert w.comment().status_code == 201, i
        clock.now += 0.5  # the 80 over 40 s
    assert _refused(w.comment()) == 20  # the first of the 80 leaves the window in 20 s
    assert w.comments() == 80
    assert w.gh.content_limited(1) == 1
    assert w.gh.content_limited() == 1
    assert w.gh.limited_requests(1) == 0  # the injected windows are counted apart
    # Every content-creating method counts: a PATCH is refused too.
    cid = w.gh.comments(w.repo, w.number)[0]["id"]
    edit = w.call("PATCH", f"/repos/{w.repo}/issues/comments/{cid}", json={"body": "edited"})
    _refused(edit)
    assert w.gh.comments(w.repo, w.number)[0]["body"] == "x"
    assert w.gh.content_limited(1) == 2


def test_reads_app_jwt_calls_and_graphql_are_not_counted(
    writers: list[Writer], clock: Clock
) -> None:
    w = writers[0]
    for _ in range(80):
        assert w.comment().status_code == 201
        assert w.call("GET", f"/repos/{w.repo}/issues/{w.number}/comments").status_code == 200
    assert w.app("POST", "/app/installations/1/access_tokens").status_code == 201
    assert w.app("GET", "/app").status_code == 200
    gql = w.call("POST", "/graphql", json={"query": "query { viewer { login } }"})
    assert gql.status_code == 200
    assert w.call("GET", f"/repos/{w.repo}/issues/{w.number}").status_code == 200
    _refused(w.comment())
    assert w.gh.content_limited(1) == 1


def test_another_installation_is_not_limited(writers: list[Writer]) -> None:
    first, second = writers
    for _ in range(80):
        assert first.comment().status_code == 201
    _refused(first.comment())
    assert second.comment().status_code == 201
    assert first.gh.content_limited(2) == 0


def test_the_minute_window_frees_as_the_clock_moves(writers: list[Writer], clock: Clock) -> None:
    w = writers[0]
    for _ in range(80):
        assert w.comment().status_code == 201
    assert _refused(w.comment()) == 60
    clock.now += 59
    assert _refused(w.comment()) == 1
    clock.now += 1
    assert w.comment().status_code == 201
    assert w.comments() == 81


def test_the_hour_window_holds_500_and_frees_after_an_hour(
    writers: list[Writer], clock: Clock
) -> None:
    w = writers[0]
    start = clock.now
    for minute in range(10):  # 50 a minute: never the minute's limit
        clock.now = start + 60 * minute
        for _ in range(50):
            assert w.comment().status_code == 201
    clock.now = start + 600
    assert _refused(w.comment()) == 3000  # the first 50 leave the hour at start + 3600
    clock.now = start + 3600
    assert w.comment().status_code == 201
    assert w.gh.content_limited(1) == 1


def test_the_limit_can_be_turned_off(clock: Clock) -> None:
    private, public = rsa_keypair()
    with FakeGitHub(app_id=7, public_key_pem=public, content_limits=False) as gh:
        gh.clock = clock
        for w in _writers(gh, private, 1):
            for _ in range(81):
                assert w[0].comment().status_code == 201
            assert gh.content_limited() == 0
