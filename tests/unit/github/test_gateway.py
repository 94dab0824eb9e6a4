"""GitHubGateway against the fake GitHub server, over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import SecretStr

from bot.core.errors import ConfigError, GitHubError
from bot.core.settings import Settings
from bot.github.gateway import GitHubGateway, convert_manifest, graphql_url
from bot.github.pacing import JITTER_MARGIN_S, WritePacer
from bot.github.retry import decide, parse_retry_after
from testkit.fakes.github_server import FakeGitHub

APP_ID = 4242
INSTALLATION = 77
REPO = "acme/widgets"
TOKEN_ROUTE = "/app/installations/{installation_id}/access_tokens"
COMMENTS_ROUTE = "/repos/{owner}/{repo}/issues/{issue_number}/comments"
PAGE_SIZE = 100  # what the gateway asks GitHub for


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture(scope="module")
def app_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def fake(app_key):
    public = app_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with FakeGitHub(app_id=APP_ID, public_key_pem=public) as server:
        server.add_repo(REPO, installation_id=INSTALLATION)
        yield server


class FakeTime:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def ftime() -> FakeTime:
    return FakeTime()


def make_settings(api_url: str, key_pem: str, **overrides) -> Settings:
    values = {
        "app_id": APP_ID,
        "private_key": SecretStr(key_pem),
        "github_api_url": api_url,
        "github_write_interval_s": 0.0,
        "github_max_retry_wait_s": 5.0,
        **overrides,
    }
    return Settings(_env_file=None, **values)


@pytest.fixture
def calls() -> list[tuple[str, str, int]]:
    return []


@pytest.fixture
async def gateway(fake, app_key, ftime, calls):
    gw = GitHubGateway(
        make_settings(fake.api_url, _pem(app_key)),
        clock=ftime.clock,
        sleep=ftime.sleep,
        on_request=lambda m, r, s, _limited: calls.append((m, r, s)),
    )
    yield gw
    await gw.aclose()


# -- tokens --------------------------------------------------------------------


async def test_one_token_for_many_calls_then_refresh_after_expiry(fake, gateway, ftime):
    fake.add_issue(REPO, title="t")
    gh = await gateway.installation(INSTALLATION)
    for i in range(5):
        await gh.create_comment(REPO, 1, f"comment {i}")
    assert await gateway.installation(INSTALLATION) is gh
    assert fake.token_requests == 1

    ftime.now += 3600  # past expires_at - 5 min on the gateway's clock
    await gh.create_comment(REPO, 1, "after expiry")
    assert fake.token_requests == 2
    assert [c["user"] for c in fake.comments(REPO, 1)] == ["debate-bot[bot]"] * 6


async def test_token_rejected_by_github_is_refetched_once(fake, gateway):
    fake.add_issue(REPO, title="t")
    gh = await gateway.installation(INSTALLATION)
    fake.expire_tokens()
    await gh.create_comment(REPO, 1, "still works")
    assert fake.token_requests == 2
    assert fake.count("POST", COMMENTS_ROUTE, status=401) == 1
    assert fake.count("POST", COMMENTS_ROUTE, status=201) == 1


async def test_jwt_signed_with_the_wrong_key_is_a_github_error(fake, ftime):
    other = _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    gw = GitHubGateway(make_settings(fake.api_url, other), clock=ftime.clock, sleep=ftime.sleep)
    try:
        with pytest.raises(GitHubError) as err:
            await gw.installation(INSTALLATION)
    finally:
        await gw.aclose()
    assert err.value.github_status == 401
    assert "PRIVATE KEY" not in str(err.value)
    assert ftime.sleeps == []  # a 401 is not retried
    assert fake.count("POST", TOKEN_ROUTE, status=401) == 1


async def test_concurrent_callers_share_one_token_fetch(fake, gateway):
    fake.add_issue(REPO, title="t")
    clients = await asyncio.gather(*(gateway.installation(INSTALLATION) for _ in range(10)))
    await asyncio.gather(*(c.get_issue(REPO, 1) for c in clients))
    assert fake.token_requests == 1


def test_fake_enforces_app_jwt_and_installation_tokens(fake, app_key):
    url = f"{fake.url}/app/installations/{INSTALLATION}/access_tokens"
    now = int(time.time())

    def app_jwt(**claims) -> str:
        payload = {"iss": str(APP_ID), "iat": now - 60, "exp": now + 540, **claims}
        return jwt.encode(payload, _pem(app_key), algorithm="RS256")

    with httpx.Client() as http:
        too_long = http.post(url, headers={"Authorization": f"Bearer {app_jwt(exp=now + 1200)}"})
        expired = http.post(url, headers={"Authorization": f"Bearer {app_jwt(exp=now - 5)}"})
        wrong_app = http.post(url, headers={"Authorization": f"Bearer {app_jwt(iss='1')}"})
        ok = http.post(url, headers={"Authorization": f"Bearer {app_jwt()}"})
        anonymous = http.get(f"{fake.url}/repos/{REPO}")
        token = ok.json()["token"]
        authed = http.get(f"{fake.url}/repos/{REPO}", headers={"Authorization": f"token {token}"})
    assert [too_long.status_code, expired.status_code, wrong_app.status_code] == [401] * 3
    assert ok.status_code == 201 and token.startswith("ghs_")
    assert anonymous.status_code == 401
    assert anonymous.json()["message"] == "Requires authentication"
    assert authed.status_code == 200 and authed.json()["default_branch"] == "main"
    assert int(authed.headers["x-ratelimit-remaining"]) < int(authed.headers["x-ratelimit-limit"])


async def test_unknown_installation_is_404(gateway):
    with pytest.raises(GitHubError) as err:
        await gateway.installation(999)
    assert err.value.github_status == 404


def test_missing_or_malformed_key_is_a_config_error(fake):
    with pytest.raises(ConfigError):
        GitHubGateway(Settings(_env_file=None, app_id=APP_ID, github_api_url=fake.api_url))
    with pytest.raises(ConfigError):
        GitHubGateway(make_settings(fake.api_url, "-----BEGIN PRIVATE KEY-----\nnope\n"))


# -- comments ------------------------------------------------------------------


async def test_comment_create_update_and_paginated_list(fake, gateway, calls):
    fake.add_issue(REPO, title="long thread")
    seeded = [fake.add_comment(REPO, 1, f"human {i}") for i in range(205)]
    gh = await gateway.installation(INSTALLATION)
    mine = await gh.create_comment(REPO, 1, "<!-- debate-bot:round run=r1 round=1 -->\nhello")
    await gh.update_comment(REPO, mine, "<!-- debate-bot:round run=r1 round=1 -->\nedited")

    listed = await gh.list_comments(REPO, 1)
    assert [c["id"] for c in listed] == [*seeded, mine]
    assert listed[-1]["body"].endswith("edited")
    assert listed[0]["body"] == "human 0"
    assert listed[-1]["user"]["login"] == await gh.bot_login() == "debate-bot[bot]"
    # 206 comments at per_page=100: three pages, following Link rel="next".
    pages = [r for r in fake.requests if r.route == COMMENTS_ROUTE and r.method == "GET"]
    assert len(pages) == 3
    assert pages[0].query["per_page"] == "100"
    assert [r.query.get("page") for r in pages[1:]] == ["2", "3"]
    assert calls.count(("GET", COMMENTS_ROUTE, 200)) == 3


async def test_body_over_65536_chars_is_422_and_not_retried(fake, gateway, ftime):
    fake.add_issue(REPO, title="t")
    gh = await gateway.installation(INSTALLATION)
    await gh.create_comment(REPO, 1, "x" * 65_536)  # exactly the limit is fine
    with pytest.raises(GitHubError) as err:
        await gh.create_comment(REPO, 1, "x" * 65_537)
    assert err.value.github_status == 422
    assert "too long" in str(err.value)
    assert fake.count("POST", COMMENTS_ROUTE) == 2
    assert ftime.sleeps == []
    with pytest.raises(GitHubError) as err:
        await gh.create_issue(REPO, "big", "y" * 70_000)
    assert err.value.github_status == 422


async def test_missing_issue_is_404_without_token_in_message(fake, gateway):
    gh = await gateway.installation(INSTALLATION)
    with pytest.raises(GitHubError) as err:
        await gh.create_comment(REPO, 404, "hi")
    assert err.value.github_status == 404
    assert "ghs_" not in str(err.value)
    assert "Not Found" in str(err.value)


# -- retries -------------------------------------------------------------------


async def test_secondary_limits_and_5xx_are_retried(fake, gateway, ftime):
    fake.add_issue(REPO, title="t")
    gh = await gateway.installation(INSTALLATION)
    cid = await gh.create_comment(REPO, 1, "first")
    fake.inject_faults(script=["secondary", 502, "secondary429", 500, None], retry_after=1)
    await gh.update_comment(REPO, cid, "made it")
    # Retry-After: 1, then backoff 2 s (attempt 2), Retry-After again, backoff 8 -> capped at 5.
    assert ftime.sleeps == [1.0, 2.0, 1.0, 5.0]
    assert [c["body"] for c in fake.comments(REPO, 1)] == ["made it"]
    statuses = [r.status for r in fake.requests if r.method == "PATCH"]
    assert statuses == [403, 502, 429, 500, 200]


async def test_a_create_is_never_blindly_repeated_after_a_5xx(fake, gateway, ftime):
    """GitHub may have created the comment before failing; the caller checks first."""
    fake.add_issue(REPO, title="t")
    gh = await gateway.installation(INSTALLATION)
    fake.inject_faults(script=["secondary", "lost502"], retry_after=1)
    with pytest.raises(GitHubError) as err:
        await gh.create_comment(REPO, 1, "maybe")
    assert err.value.github_status == 502
    assert ftime.sleeps == [1.0]  # the refused request was retried, the lost one not
    assert [c["body"] for c in fake.comments(REPO, 1)] == ["maybe"]


async def test_waits_longer_than_the_cap_are_not_taken(fake, gateway, ftime):
    fake.add_issue(REPO, title="t")
    gh = await gateway.installation(INSTALLATION)
    fake.inject_faults(script=["secondary"], retry_after=3600)
    with pytest.raises(GitHubError) as err:
        await gh.create_comment(REPO, 1, "never")
    assert err.value.github_status == 403
    assert ftime.sleeps == []
    assert fake.comments(REPO, 1) == []


async def test_primary_rate_limit_waits_until_reset_when_short(fake, gateway, ftime):
    fake.add_issue(REPO, title="t")
    gh = await gateway.installation(INSTALLATION)
    fake.inject_faults(script=["primary"], retry_after=2)
    await gh.get_issue(REPO, 1)
    assert len(ftime.sleeps) == 1
    assert 1.0 <= ftime.sleeps[0] <= 5.0


async def test_persistent_5xx_gives_up_after_bounded_attempts(fake, gateway, ftime):
    fake.add_issue(REPO, title="t")
    gh = await gateway.installation(INSTALLATION)
    fake.inject_faults(script=[503] * 10)
    with pytest.raises(GitHubError) as err:
        await gh.get_issue(REPO, 1)
    assert err.value.github_status == 503
    assert ftime.sleeps == [1.0, 2.0, 4.0, 5.0]
    assert fake.count("GET", "/repos/{owner}/{repo}/issues/{issue_number}") == 5


async def test_random_faults_on_every_route_still_complete(fake, gateway):
    fake.add_issue(REPO, title="t")
    gh = await gateway.installation(INSTALLATION)
    ids = [await gh.create_comment(REPO, 1, f"c{i}") for i in range(15)]
    fake.inject_faults(rate=0.3, seed=7, retry_after=0)
    for i, cid in enumerate(ids):
        await gh.update_comment(REPO, cid, f"edited {i}")
        await gh.add_labels(REPO, 1, [f"l{i}"])
        assert (await gh.get_issue(REPO, 1))["title"] == "t"
    assert [c["body"] for c in fake.comments(REPO, 1)] == [f"edited {i}" for i in range(15)]
    assert len(fake.labels(REPO, 1)) == 15
    assert (
        fake.count(status=403)
        + fake.count(status=500)
        + fake.count(status=502)
        + fake.count(status=503)
        > 0
    )


async def test_connection_refused_is_retried_then_fails(app_key, ftime):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    gw = GitHubGateway(
        make_settings(f"http://127.0.0.1:{port}", _pem(app_key)),
        clock=ftime.clock,
        sleep=ftime.sleep,
    )
    try:
        with pytest.raises(GitHubError) as err:
            await gw.installation(INSTALLATION)
    finally:
        await gw.aclose()
    assert err.value.github_status is None
    assert ftime.sleeps == [1.0, 2.0, 4.0, 5.0]


# -- pacing --------------------------------------------------------------------


async def test_writes_are_paced_per_installation_reads_are_not(fake, app_key, ftime):
    fake.add_issue(REPO, title="t")
    gw = GitHubGateway(
        make_settings(fake.api_url, _pem(app_key), github_write_interval_s=1.5),
        clock=ftime.clock,
        sleep=ftime.sleep,
    )
    try:
        gh = await gw.installation(INSTALLATION)
        await gh.create_comment(REPO, 1, "a")
        await gh.get_issue(REPO, 1)
        await gh.create_comment(REPO, 1, "b")
        await gh.add_labels(REPO, 1, ["debate:running"])
    finally:
        await gw.aclose()
    # The interval plus the margin for a write sent a little after its slot.
    assert ftime.sleeps == [pytest.approx(1.5 + JITTER_MARGIN_S)] * 2


async def test_a_clients_writes_wait_their_turn_by_its_age(fake, app_key):
    """The age a client was made with (its run's start, its delivery's arrival)
    orders the installation's waiting writes: an older run's pass a newer run's,
    and the shared client's (no age) count from when they queued."""
    fake.add_issue(REPO, title="t")
    now = [1000.0]

    async def sleep(seconds: float) -> None:
        await asyncio.sleep(0.05)  # long beside a loopback call: arrival follows the turns
        now[0] += seconds

    settings = make_settings(fake.api_url, _pem(app_key), github_write_interval_s=1.0)
    gw = GitHubGateway(settings, clock=lambda: now[0], sleep=sleep)
    try:
        shared = await gw.installation(INSTALLATION)
        assert shared.since is None and await gw.installation(INSTALLATION) is shared
        pacing = await gw.installation(INSTALLATION, since=50.0)
        newer = await gw.installation(INSTALLATION, since=300.0)
        older = await gw.installation(INSTALLATION, since=100.0)
        await shared.create_comment(REPO, 1, "first")
        first = asyncio.create_task(pacing.create_comment(REPO, 1, "in the pacer"))
        await asyncio.sleep(0.01)  # it holds the turn, waiting its second
        await asyncio.gather(
            first,
            newer.create_comment(REPO, 1, "new debate"),
            shared.create_comment(REPO, 1, "acknowledgment"),
            older.create_comment(REPO, 1, "debate in progress"),
        )
    finally:
        await gw.aclose()
    assert [c["body"] for c in fake.comments(REPO, 1)] == [
        "first",
        "in the pacer",
        "debate in progress",
        "new debate",
        "acknowledgment",
    ]


async def test_pacer_spaces_writes_even_when_sleep_does_not_move_the_clock():
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    pacer = WritePacer(1.0, clock=lambda: 50.0, sleep=sleep)
    for _ in range(3):
        await pacer.wait_turn()
    assert slept == [1.0, 2.0]


async def test_pacer_counts_from_a_late_wake_up():
    # A busy loop wakes the writer 0.3 s after its slot: the next write still
    # waits a whole interval after that one was sent, not after its slot.
    now = [0.0]
    slept: list[float] = []

    async def late_sleep(s: float) -> None:
        slept.append(s)
        now[0] += s + 0.3

    pacer = WritePacer(1.0, clock=lambda: now[0], sleep=late_sleep)
    for _ in range(3):
        await pacer.wait_turn()
    assert slept == [1.0, pytest.approx(1.0)]


# -- permissions, files --------------------------------------------------------


async def test_permission_levels(fake, gateway):
    for user, perm in [
        ("ada", "admin"),
        ("max", "maintain"),
        ("wil", "write"),
        ("tri", "triage"),
        ("rea", "read"),
    ]:
        fake.set_permission(REPO, user, perm)
    gh = await gateway.installation(INSTALLATION)
    got = {u: await gh.permission(REPO, u) for u in ["ada", "max", "wil", "tri", "rea", "eve"]}
    assert got == {
        "ada": "admin",
        "max": "maintain",
        "wil": "write",
        "tri": "triage",
        "rea": "read",
        "eve": "none",
    }


async def test_read_file(fake, gateway):
    fake.put_file(REPO, "docs/plan.md", "# Plan\n\nüber alles\n")
    fake.put_file(REPO, "docs/plan.md", "# Plan on a branch\n", ref="feature")
    fake.put_file(REPO, "img/logo.png", b"\x89PNG\r\n\x1a\n\xff\xfe")
    fake.put_file(REPO, "big.md", "a" * (1024 * 1024 + 10))
    gh = await gateway.installation(INSTALLATION)
    assert await gh.default_branch(REPO) == "main"
    assert await gh.read_file(REPO, "docs/plan.md") == "# Plan\n\nüber alles\n"
    assert await gh.read_file(REPO, "docs/plan.md", ref="feature") == "# Plan on a branch\n"
    assert await gh.read_file(REPO, ".github/debate.yml") is None
    big = await gh.read_file(REPO, "big.md")
    assert big is not None and len(big) == 1024 * 1024 + 10
    with pytest.raises(GitHubError):
        await gh.read_file(REPO, "docs")
    with pytest.raises(GitHubError):
        await gh.read_file(REPO, "img/logo.png")


async def test_repo_of_another_installation_is_not_found(fake, gateway):
    fake.add_repo("other/repo", installation_id=78)
    fake.put_file("other/repo", "README.md", "secret")
    gh = await gateway.installation(INSTALLATION)
    assert await gh.read_file("other/repo", "README.md") is None
    with pytest.raises(GitHubError) as err:
        await gh.default_branch("other/repo")
    assert err.value.github_status == 404


# -- reactions, labels, issues, pulls -------------------------------------------


async def test_reactions_and_labels(fake, gateway):
    fake.add_issue(REPO, title="t", labels=["bug"])
    cid = fake.add_comment(REPO, 1, "/debate go")
    gh = await gateway.installation(INSTALLATION)
    await gh.add_reaction(REPO, cid, "eyes")
    await gh.add_reaction(REPO, cid, "eyes")  # GitHub answers 200 for a repeat
    await gh.add_reaction(REPO, cid, "rocket")
    await gh.add_issue_reaction(REPO, 1, "confused")
    assert fake.reactions(REPO, comment_id=cid) == ["eyes", "rocket"]
    assert fake.reactions(REPO, issue_number=1) == ["confused"]
    with pytest.raises(GitHubError):
        await gh.add_reaction(REPO, cid, "thumbsup")

    await gh.add_labels(REPO, 1, ["debate:running"])
    await gh.remove_label(REPO, 1, "debate:running")
    await gh.remove_label(REPO, 1, "debate:running")  # already gone: ignored
    await gh.add_labels(REPO, 1, ["debate:done", "needs review"])
    await gh.remove_label(REPO, 1, "needs review")
    assert fake.labels(REPO, 1) == ["bug", "debate:done"]


async def test_issue_and_pull_reads(fake, gateway):
    pr = fake.add_pull(
        REPO,
        title="Add auth",
        body="Implements the plan",
        head_ref="auth",
        files=[
            {"filename": f"src/f{i}.py", "status": "added", "patch": "@@ +1 @@\n+x"}
            for i in range(130)
        ],
    )
    gh = await gateway.installation(INSTALLATION)
    number = await gh.create_issue(REPO, "[PROPOSAL] X", "body", labels=["debate"])
    issue = await gh.get_issue(REPO, number)
    assert issue["title"] == "[PROPOSAL] X"
    assert [lb["name"] for lb in issue["labels"]] == ["debate"]
    assert "pull_request" not in issue
    assert "pull_request" in await gh.get_issue(REPO, pr)

    pull = await gh.get_pull(REPO, pr)
    assert pull["head"]["ref"] == "auth"
    assert pull["head"]["sha"] == fake.head_sha(REPO, pr)
    assert pull["base"]["ref"] == "main"
    files = await gh.list_pull_files(REPO, pr)
    assert [f["filename"] for f in files] == [f"src/f{i}.py" for i in range(130)]
    with pytest.raises(GitHubError) as err:
        await gh.get_pull(REPO, number)  # an issue is not a pull request
    assert err.value.github_status == 404


async def test_review_comment_reply_and_thread_resolution(fake, gateway):
    pr = fake.add_pull(REPO, title="p", head_ref="topic")
    # 120 other threads: the target sits on the second GraphQL page.
    for i in range(120):
        fake.add_review_comment(REPO, pr, body=f"nit {i}", path="a.py", line=i + 1)
    concern = fake.add_review_comment(
        REPO,
        pr,
        body="This leaks a file handle",
        path="io.py",
        line=10,
        diff_hunk="@@ -8,3 +8,4 @@\n+open(p)",
    )
    command = fake.add_review_comment(
        REPO,
        pr,
        body="/debate arbitrate",
        path="io.py",
        in_reply_to=concern,
        user="maintainer",
        user_type="User",
    )
    gh = await gateway.installation(INSTALLATION)

    got = await gh.get_review_comment(REPO, command)
    assert got["in_reply_to_id"] == concern
    root = await gh.get_review_comment(REPO, got["in_reply_to_id"])
    assert root["diff_hunk"].startswith("@@ -8,3")
    assert root["user"]["type"] == "Bot"

    reply = await gh.reply_review_comment(REPO, pr, concern, "Verdict: DISMISSED")
    await gh.update_review_comment(REPO, reply, "Verdict: DISMISSED (edited)")
    await gh.add_reaction(REPO, command, "eyes", review_comment=True)
    listed = await gh.list_review_comments(REPO, pr)
    assert len(listed) == 123
    mine = next(c for c in listed if c["id"] == reply)
    assert mine["in_reply_to_id"] == concern
    assert mine["body"] == "Verdict: DISMISSED (edited)"
    assert mine["user"]["login"] == "debate-bot[bot]"
    assert fake.reactions(REPO, review_comment_id=command) == ["eyes"]

    assert await gh.resolve_review_thread(REPO, pr, command) is True
    assert fake.thread_resolved(REPO, concern)
    assert not fake.thread_resolved(REPO, concern - 1)
    assert await gh.resolve_review_thread(REPO, pr, 123456789) is False
    kinds = fake.counts_by_kind()
    assert kinds["POST /graphql"] == 2 + 2 + 1  # two pages twice, one mutation


async def test_branch_file_and_pull_creation(fake, gateway):
    fake.put_file(REPO, "docs/plan.md", "v1\n")
    gh = await gateway.installation(INSTALLATION)
    base = await gh.default_branch(REPO)
    base_sha = fake.branches(REPO)[base]
    await gh.create_branch(REPO, "debate/revised-plan", base_sha)
    await gh.put_file(REPO, "docs/plan.md", "debate/revised-plan", "v2 [CHANGED]\n", "Revise plan")
    await gh.put_file(REPO, "docs/notes.md", "debate/revised-plan", "new\n", "Add notes")
    number = await gh.create_pull(REPO, "Revised plan", "debate/revised-plan", base, "From debate")
    assert fake.file(REPO, "docs/plan.md") == "v1\n"
    assert fake.file(REPO, "docs/plan.md", ref="debate/revised-plan") == "v2 [CHANGED]\n"
    assert fake.file(REPO, "docs/notes.md", ref="debate/revised-plan") == "new\n"
    assert fake.issue(REPO, number)["head_ref"] == "debate/revised-plan"
    with pytest.raises(GitHubError) as err:
        await gh.create_branch(REPO, "debate/revised-plan", base_sha)
    assert err.value.github_status == 422


# -- accounting, GHES ------------------------------------------------------------


async def test_on_request_counts_every_attempt_by_route(fake, gateway, calls):
    fake.add_issue(REPO, title="t")
    gh = await gateway.installation(INSTALLATION)
    cid = await gh.create_comment(REPO, 1, "x")
    fake.inject_faults(script=[500], retry_after=0)
    await gh.update_comment(REPO, cid, "y")
    await gh.get_issue(REPO, 1)
    assert calls == [
        ("POST", TOKEN_ROUTE, 201),
        ("POST", COMMENTS_ROUTE, 201),
        ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", 500),
        ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", 200),
        ("GET", "/repos/{owner}/{repo}/issues/{issue_number}", 200),
    ]
    # The gateway's route templates are the fake's (GitHub's OpenAPI paths).
    assert Counter(f"{m} {r}" for m, r, _ in calls) == fake.counts_by_kind()
    assert gateway.rate_limit_remaining(INSTALLATION) == fake.rate_limit_remaining
    assert gh.rate_limit_remaining == fake.rate_limit_remaining
    assert gateway.rate_limits == {INSTALLATION: fake.rate_limit_remaining}


async def test_enterprise_server_base_url(app_key, ftime):
    public = app_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with FakeGitHub(app_id=APP_ID, public_key_pem=public, api_prefix="/api/v3") as ghes:
        ghes.add_repo(REPO, installation_id=INSTALLATION)
        pr = ghes.add_pull(REPO, title="p")
        concern = ghes.add_review_comment(REPO, pr, body="b", path="a.py")
        assert ghes.api_url.endswith("/api/v3")
        gw = GitHubGateway(
            make_settings(ghes.api_url, _pem(app_key)), clock=ftime.clock, sleep=ftime.sleep
        )
        try:
            gh = await gw.installation(INSTALLATION)
            await gh.create_comment(REPO, pr, "hello GHES")
            assert await gh.resolve_review_thread(REPO, pr, concern) is True
        finally:
            await gw.aclose()
        assert gw.graphql_url == ghes.url + "/api/graphql"
        paths = [r.path for r in ghes.requests]
        assert paths[0] == f"/api/v3/app/installations/{INSTALLATION}/access_tokens"
        assert "/api/graphql" in paths
        assert {r.headers.get("x-github-api-version") for r in ghes.requests} == {"2022-11-28"}


def test_graphql_url_derivation():
    assert graphql_url("https://api.github.com") == "https://api.github.com/graphql"
    assert graphql_url("https://ghe.example.com/api/v3/") == "https://ghe.example.com/api/graphql"


# -- an injected transport: the fake GitHub app in process, no socket ---------------


@pytest.fixture
def no_sockets(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a socket was connected")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.fixture
def asgi_fake(app_key):
    public = app_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    server = FakeGitHub(app_id=APP_ID, public_key_pem=public)  # never started
    server.url = "http://github.test"
    server.add_repo(REPO, installation_id=INSTALLATION)
    return server


async def test_gateway_over_an_asgi_transport_needs_no_socket(
    asgi_fake, app_key, ftime, calls, no_sockets
):
    fake = asgi_fake
    fake.add_issue(REPO, title="t")
    for i in range(PAGE_SIZE + 5):
        fake.add_comment(REPO, 1, f"c{i}")
    pr = fake.add_pull(REPO, title="p")
    concern = fake.add_review_comment(REPO, pr, body="b", path="a.py")
    gw = GitHubGateway(
        make_settings(fake.api_url, _pem(app_key)),
        clock=ftime.clock,
        sleep=ftime.sleep,
        on_request=lambda m, r, s, _limited: calls.append((m, r, s)),
        transport=httpx.ASGITransport(app=fake.asgi),
    )
    async with gw:
        gh = await gw.installation(INSTALLATION)
        created = await gh.create_comment(REPO, 1, "over ASGI")
        comments = await gh.list_comments(REPO, 1)  # two pages: Link to github.test
        assert await gh.resolve_review_thread(REPO, pr, concern) is True  # GraphQL
        assert await gw.bot_login() == "debate-bot[bot]"
    assert len(comments) == PAGE_SIZE + 6 and comments[-1]["id"] == created
    assert fake.count("GET", COMMENTS_ROUTE) == 2
    assert calls[:2] == [("POST", TOKEN_ROUTE, 201), ("POST", COMMENTS_ROUTE, 201)]
    assert fake.comments(REPO, 1)[-1]["user"] == "debate-bot[bot]"


async def test_manifest_conversion_over_an_asgi_transport_needs_no_socket(asgi_fake, no_sockets):
    fake = asgi_fake
    fake.manifest_private_key = "pem-from-github"
    transport = httpx.ASGITransport(app=fake.asgi)
    manifest = {"name": "debate-bot", "redirect_url": "http://localhost:3000/setup/done"}
    async with httpx.AsyncClient(transport=transport, base_url=fake.url) as browser:
        page = await browser.post(
            "/settings/apps/new", content=urlencode({"manifest": json.dumps(manifest)})
        )
    code = parse_qs(urlsplit(page.headers["location"]).query)["code"][0]
    app = await convert_manifest(fake.api_url, code, transport=transport)
    assert (app["id"], app["pem"]) == (APP_ID, "pem-from-github")
    with pytest.raises(GitHubError) as err:  # a code works once
        await convert_manifest(fake.api_url, code, transport=transport)
    assert err.value.github_status == 404


# -- the retry policy itself -------------------------------------------------------


def test_retry_policy_decisions():
    now = 1_700_000_000.0
    plain_403 = decide(
        status=403,
        headers={},
        message="Resource not accessible by integration",
        attempt=1,
        max_wait_s=60,
        now_epoch=now,
    )
    assert not plain_403.retry
    secondary = decide(
        status=403,
        headers={},
        message="You have exceeded a secondary rate limit",
        attempt=1,
        max_wait_s=60,
        now_epoch=now,
    )
    assert secondary.wait_s == 60
    assert (
        decide(status=404, headers={}, message="", attempt=1, max_wait_s=60, now_epoch=now).wait_s
        is None
    )
    when = format_datetime(datetime.fromtimestamp(now, UTC) + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(when, now_epoch=now) == pytest.approx(30, abs=1)
    assert parse_retry_after("garbage", now_epoch=now) is None
    reset = decide(
        status=429,
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(now) + 10)},
        message="",
        attempt=1,
        max_wait_s=60,
        now_epoch=now,
    )
    assert reset.wait_s == pytest.approx(11)
