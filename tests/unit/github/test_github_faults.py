"""GitHub-side faults at the gateway, over real loopback HTTP to the fake GitHub:
revoked tokens, secondary and primary rate limits (one shared wait per
installation), and threads deleted, transferred or locked (``TargetGone``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import SecretStr

from bot.core.errors import GitHubError, RateLimited, TargetGone, Transient, TransientGitHubError
from bot.core.settings import Settings
from bot.github.gateway import GitHubGateway
from bot.github.session import github_error
from bot.store import RunStore
from testkit.fakes.github_server import FakeGitHub

APP_ID = 4242
INSTALLATION, OTHER_INSTALLATION = 77, 78
REPO, OTHER_REPO = "acme/widgets", "acme/gadgets"
COMMENTS = "/repos/{owner}/{repo}/issues/{issue_number}/comments"


class SharedTime:
    """One fake epoch clock for the gateway (clock, wall, sleep) and the fake
    GitHub's rate-limit windows: waiting is instant, yet GitHub sees it pass."""

    def __init__(self) -> None:
        self.now = time.time()
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.sleeps.append(seconds)
            self.now += seconds


@pytest.fixture(scope="module")
def app_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture
def ftime() -> SharedTime:
    return SharedTime()


@pytest.fixture
def fake(app_key: rsa.RSAPrivateKey, ftime: SharedTime) -> Iterator[FakeGitHub]:
    public = app_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with FakeGitHub(app_id=APP_ID, public_key_pem=public) as server:
        server.clock = ftime.clock
        server.add_repo(REPO, installation_id=INSTALLATION)
        server.add_repo(OTHER_REPO, installation_id=OTHER_INSTALLATION)
        server.add_issue(REPO, title="t")
        server.add_issue(OTHER_REPO, title="u")
        yield server


async def _gateway(
    fake: FakeGitHub, key: rsa.RSAPrivateKey, ftime: SharedTime, **kwargs: Any
) -> GitHubGateway:
    cap = kwargs.pop("cap", 5.0)
    settings = Settings(
        _env_file=None,
        app_id=APP_ID,
        private_key=SecretStr(_pem(key)),
        github_api_url=fake.api_url,
        github_write_interval_s=0.0,
        github_max_retry_wait_s=cap,
    )
    return GitHubGateway(settings, clock=ftime.clock, wall=ftime.clock, sleep=ftime.sleep, **kwargs)


@pytest.fixture
async def gateway(
    fake: FakeGitHub, app_key: rsa.RSAPrivateKey, ftime: SharedTime
) -> AsyncIterator[GitHubGateway]:
    gw = await _gateway(fake, app_key, ftime)
    yield gw
    await gw.aclose()


def _sent(fake: FakeGitHub, installation: int) -> int:
    return sum(1 for r in fake.requests if r.installation == installation)


# -- 1. a revoked token --------------------------------------------------------


async def test_a_revoked_token_is_refetched_once_and_the_call_carries_on(
    fake: FakeGitHub, gateway: GitHubGateway
) -> None:
    gh, other = (
        await gateway.installation(INSTALLATION),
        await gateway.installation(OTHER_INSTALLATION),
    )
    fake.revoke_tokens(INSTALLATION)
    await gh.create_comment(REPO, 1, "still works")
    await other.create_comment(OTHER_REPO, 1, "never affected")
    assert fake.token_requests == 3  # both installations once, the revoked one again
    assert fake.count("POST", COMMENTS, status=401) == 1
    assert [c["body"] for c in fake.comments(REPO, 1)] == ["still works"]


async def test_a_second_401_fails_the_call_as_a_final_github_error(
    fake: FakeGitHub, gateway: GitHubGateway
) -> None:
    gh = await gateway.installation(INSTALLATION)
    fake.token_ttl_s = 0  # the replacement token is refused too
    fake.revoke_tokens(INSTALLATION)
    with pytest.raises(GitHubError) as err:
        await gh.create_comment(REPO, 1, "never")
    assert err.value.github_status == 401 and "Bad credentials" in str(err.value)
    assert not isinstance(err.value, Transient | TargetGone)
    assert fake.token_requests == 2
    assert fake.count("POST", COMMENTS) == 2
    assert fake.comments(REPO, 1) == []


# -- 2. secondary rate limits --------------------------------------------------


@pytest.mark.parametrize("kind", ["secondary", "secondary429"])
async def test_a_secondary_limit_holds_every_call_of_the_installation(
    fake: FakeGitHub, app_key: rsa.RSAPrivateKey, ftime: SharedTime, kind: str
) -> None:
    # One attempt per call: the refused create gives up at once, so what waits
    # below is a different call that never saw the 403 itself.
    gw = await _gateway(fake, app_key, ftime, max_attempts=1)
    try:
        gh, other = await gw.installation(INSTALLATION), await gw.installation(OTHER_INSTALLATION)
        fake.limit_installation(INSTALLATION, kind=kind, window_s=3)
        with pytest.raises(TransientGitHubError):
            await gh.create_comment(REPO, 1, "refused")
        await other.get_issue(OTHER_REPO, 1)  # another installation is not held
        assert ftime.sleeps == []
        assert (await gh.get_issue(REPO, 1))["title"] == "t"
        assert ftime.sleeps == [3.0]  # the Retry-After, waited before the GET was sent
        assert fake.limited_requests(INSTALLATION) == 1  # nothing sent inside the window
    finally:
        await gw.aclose()


@pytest.mark.parametrize("window_s", [3, 600], ids=["within-the-cap", "beyond-the-cap"])
async def test_a_limit_one_process_meets_holds_the_other_processes_writes(
    fake: FakeGitHub, app_key: rsa.RSAPrivateKey, ftime: SharedTime, tmp_path: Path, window_s: int
) -> None:
    """Two gateways (two workers) sharing pacing through one database: the second
    never saw the 403, yet its write waits for the limit to lift."""
    store = RunStore.from_url(
        f"sqlite:///{tmp_path / 'db.sqlite'}", clock=lambda: datetime.fromtimestamp(ftime.now, UTC)
    )
    store.migrate()
    first = await _gateway(fake, app_key, ftime, max_attempts=1, write_slots=store)
    second = await _gateway(fake, app_key, ftime, write_slots=store)
    try:
        a, b = await first.installation(INSTALLATION), await second.installation(INSTALLATION)
        fake.limit_installation(INSTALLATION, window_s=window_s)
        with pytest.raises(TransientGitHubError):
            await a.create_comment(REPO, 1, "refused")
        sent = _sent(fake, INSTALLATION)
        # (The store keeps microseconds: a slot can round to a sleep of a few.)
        ftime.sleeps = [s for s in ftime.sleeps if s > 0.001]
        if window_s == 3:
            await b.create_comment(REPO, 1, "after the wait")
            assert ftime.sleeps == [pytest.approx(3.0, abs=0.01)]  # waited before it was sent
        else:
            with pytest.raises(RateLimited) as held:
                await b.create_comment(REPO, 1, "held")
            assert held.value.resume_at == pytest.approx(ftime.now + 600, abs=1)
            with pytest.raises(RateLimited):  # its reads now wait too, unsent
                await b.get_issue(REPO, 1)
            assert _sent(fake, INSTALLATION) == sent and ftime.sleeps == []
        assert fake.limited_requests(INSTALLATION) == 1  # nothing sent inside the window
    finally:
        await first.aclose()
        await second.aclose()
        store.dispose()


@pytest.mark.parametrize(
    ("window_s", "retry_after", "cap", "waited"),
    [
        (2, True, 5.0, 2.0),  # Retry-After obeyed
        (60, False, 300.0, 60.0),  # no header: GitHub's minute
        (5, False, 5.0, 5.0),  # no header, a lower cap (as in the end-to-end tests)
    ],
    ids=["retry-after", "a-minute", "the-cap"],
)
async def test_a_rate_limited_create_waits_then_posts_once(
    fake: FakeGitHub,
    app_key: rsa.RSAPrivateKey,
    ftime: SharedTime,
    window_s: float,
    retry_after: bool,
    cap: float,
    waited: float,
) -> None:
    gw = await _gateway(fake, app_key, ftime, cap=cap)
    try:
        gh = await gw.installation(INSTALLATION)
        fake.limit_installation(INSTALLATION, window_s=window_s, retry_after=retry_after)
        await gh.create_comment(REPO, 1, "once")
        assert ftime.sleeps == [waited]
        assert fake.count("POST", COMMENTS) == 2
        assert [c["body"] for c in fake.comments(REPO, 1)] == ["once"]
        assert fake.limited_requests(INSTALLATION) == 1
    finally:
        await gw.aclose()


# -- 3. the primary rate limit -------------------------------------------------


async def test_a_primary_limit_within_the_cap_waits_for_the_reset(
    fake: FakeGitHub, gateway: GitHubGateway, ftime: SharedTime
) -> None:
    gh = await gateway.installation(INSTALLATION)
    fake.limit_installation(INSTALLATION, kind="primary", window_s=1)
    await gh.create_comment(REPO, 1, "after the reset")
    assert len(ftime.sleeps) == 1
    assert fake.limited_requests(INSTALLATION) == 1
    assert len(fake.comments(REPO, 1)) == 1


async def test_a_primary_limit_beyond_the_cap_fails_transiently_and_sends_nothing_more(
    fake: FakeGitHub, gateway: GitHubGateway, ftime: SharedTime
) -> None:
    gh = await gateway.installation(INSTALLATION)
    other = await gateway.installation(OTHER_INSTALLATION)
    fake.limit_installation(INSTALLATION, kind="primary", window_s=3600)
    with pytest.raises(TransientGitHubError) as err:
        await gh.create_comment(REPO, 1, "later")
    assert err.value.github_status == 403 and "API rate limit exceeded" in str(err.value)
    sent = _sent(fake, INSTALLATION)
    with pytest.raises(TransientGitHubError):  # held at the gateway, not sent
        await gh.get_issue(REPO, 1)
    assert _sent(fake, INSTALLATION) == sent == 1
    await other.get_issue(OTHER_REPO, 1)
    assert ftime.sleeps == []
    ftime.now += 3601  # the reset has passed: calls go out again
    assert (await gh.get_issue(REPO, 1))["title"] == "t"


# -- 4. the thread gone --------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "status", "message", "edit_status"),
    [
        (FakeGitHub.delete_issue, 410, "This issue was deleted", 404),
        (FakeGitHub.transfer_issue, 404, "Not Found", 404),
        (FakeGitHub.lock_issue, 403, "Unable to create comment because issue is locked.", 403),
    ],
    ids=["deleted", "transferred", "locked"],
)
async def test_the_issue_gone_is_target_gone_at_once(
    fake: FakeGitHub,
    gateway: GitHubGateway,
    ftime: SharedTime,
    fault: Callable[[FakeGitHub, str, int], None],
    status: int,
    message: str,
    edit_status: int,
) -> None:
    gh = await gateway.installation(INSTALLATION)
    cid = await gh.create_comment(REPO, 1, "before")
    fault(fake, REPO, 1)
    fake.reset_requests()
    with pytest.raises(TargetGone) as err:
        await gh.create_comment(REPO, 1, "after")
    assert err.value.github_status == status and message in str(err.value)
    with pytest.raises(TargetGone) as edit:
        await gh.update_comment(REPO, cid, "edited")
    assert edit.value.github_status == edit_status
    assert len(fake.requests) == 2  # one each: no retries, no waits
    assert ftime.sleeps == []
    assert [c["body"] for c in fake.comments(REPO, 1)] == ["before"]


async def test_a_locked_issue_still_takes_labels_and_reads(
    fake: FakeGitHub, gateway: GitHubGateway
) -> None:
    gh = await gateway.installation(INSTALLATION)
    fake.lock_issue(REPO, 1)
    await gh.add_labels(REPO, 1, ["still-labelled"])  # the lock is about comments
    assert (await gh.get_issue(REPO, 1))["locked"] is True
    assert await gh.list_comments(REPO, 1) == []


async def test_other_403s_and_404s_stay_plain_final_errors(
    fake: FakeGitHub, gateway: GitHubGateway
) -> None:
    gh = await gateway.installation(INSTALLATION)
    fake.set_app_permissions(INSTALLATION, contents="read")
    fake.reset_requests()
    with pytest.raises(GitHubError) as forbidden:
        await gh.create_branch(REPO, "topic", "0" * 40)
    assert forbidden.value.github_status == 403
    assert "Resource not accessible by integration" in str(forbidden.value)
    with pytest.raises(GitHubError) as missing_repo:  # not a thread route
        await gh.create_issue("acme/nowhere", "t", "b")
    assert missing_repo.value.github_status == 404
    for exc in (forbidden.value, missing_repo.value):
        assert type(exc) is GitHubError
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    ("status", "detail", "route", "rate_limited", "expected"),
    [
        (403, "You have exceeded a secondary rate limit", COMMENTS, True, TransientGitHubError),
        (429, "", COMMENTS, False, TransientGitHubError),
        (None, "", COMMENTS, False, TransientGitHubError),
        (502, "Bad Gateway", COMMENTS, False, TransientGitHubError),
        (403, "Unable to create comment because issue is locked.", COMMENTS, False, TargetGone),
        (403, "Resource not accessible by integration", COMMENTS, False, GitHubError),
        (404, "Not Found", "/repos/{owner}/{repo}/issues/comments/{comment_id}", False, TargetGone),
        (
            410,
            "This issue was deleted",
            "/repos/{owner}/{repo}/issues/{issue_number}",
            False,
            TargetGone,
        ),
        (404, "Not Found", "/repos/{owner}/{repo}/pulls/{pull_number}/files", False, TargetGone),
        (404, "Not Found", "/repos/{owner}/{repo}/issues", False, GitHubError),
        (404, "Not Found", "/repos/{owner}/{repo}/contents/{path}", False, GitHubError),
        (422, "Validation Failed", COMMENTS, False, GitHubError),
    ],
)
def test_github_error_classification(
    status: int | None, detail: str, route: str, rate_limited: bool, expected: type[GitHubError]
) -> None:
    exc = github_error(
        "m", github_status=status, detail=detail, route=route, rate_limited=rate_limited
    )
    assert type(exc) is expected
