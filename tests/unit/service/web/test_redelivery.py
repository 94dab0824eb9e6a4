"""Failed webhook deliveries are asked of GitHub again (bot/service/web/redeliver.py).

The passes run over real loopback HTTP against the fake GitHub, which lists its
delivery attempts and sends one again when asked; the end-to-end test stops a
real `debate-bot serve`, lets deliveries fail, and starts it again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from pydantic import SecretStr

from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.github.gateway import GitHubGateway
from bot.service.features.declared import DELIVERY_FILTER
from bot.service.web.redeliver import Attempt, PassResult, Redeliverer
from bot.store import RunStore
from testkit.fakes.github_server import FakeGitHub, HookDelivery
from testkit.harness.service import APP_ID

ATTEMPTS = "/app/hook/deliveries/{delivery_id}/attempts"
LIST = "/app/hook/deliveries"


@pytest.fixture
def fake(app_keys: tuple[str, str]) -> Iterator[FakeGitHub]:
    with FakeGitHub(app_id=APP_ID, public_key_pem=app_keys[1]) as server:
        yield server


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'bot.db'}"
    url: str = request.getfixturevalue("pg_database")
    return url


@pytest.fixture
def store(db_url: str) -> Iterator[RunStore]:
    s = RunStore.from_url(db_url)
    s.migrate()
    yield s
    s.dispose()


def settings(fake: FakeGitHub, private_key: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "app_id": APP_ID,
        "private_key": SecretStr(private_key),
        "github_api_url": fake.api_url,
        "github_write_interval_s": 0.0,
        "github_max_retry_wait_s": 0.0,
        **overrides,
    }
    return Settings(_env_file=None, **values)


Make = Callable[..., Redeliverer]


@pytest.fixture
async def make(fake: FakeGitHub, app_keys: tuple[str, str]) -> AsyncIterator[Make]:
    """``make(store, **settings)``: a Redeliverer with its own gateway (closed after)."""
    gateways: list[GitHubGateway] = []

    def build(store: RunStore, **overrides: Any) -> Redeliverer:
        s = settings(fake, app_keys[0], **overrides)
        gateway = GitHubGateway(s)
        gateways.append(gateway)
        deliveries = DELIVERY_FILTER
        return Redeliverer(
            gateway, store, s, deliveries=deliveries, owner="test:1", metrics=Metrics()
        )

    yield build
    for gateway in gateways:
        await gateway.aclose()


def failed(fake: FakeGitHub, guid: str, **kwargs: Any) -> HookDelivery:
    return fake.add_hook_delivery("issue_comment", "created", guid=guid, **kwargs)


def asked(fake: FakeGitHub) -> list[int]:
    """The attempt ids GitHub was asked to send again, in order."""
    return [
        int(r.path.rsplit("/", 2)[-2])
        for r in fake.requests
        if r.method == "POST" and r.route == ATTEMPTS
    ]


def guids_asked(fake: FakeGitHub) -> list[str]:
    by_id = {d.id: d.guid for d in fake.hook_deliveries}
    return [by_id[i] for i in asked(fake)]


# -- what a pass asks for ----------------------------------------------------------


def test_the_router_takes_comments_not_pings() -> None:
    """The premise of the filter below: only events a handler takes are worth asking."""
    deliveries = DELIVERY_FILTER
    assert deliveries.accepts("issue_comment", "created")
    assert not deliveries.accepts("ping", None)
    assert not deliveries.accepts("star", "created")


async def test_a_pass_asks_once_for_each_failed_event_it_never_received(
    fake: FakeGitHub, store: RunStore, make: Make
) -> None:
    now = datetime.now(UTC)
    failed(fake, "too-old", delivered_at=now - timedelta(hours=7))  # outside the 6 h window
    failed(fake, "lost-1", status_code=0)
    failed(fake, "then-ok", status_code=502)
    failed(fake, "then-ok", status_code=202, redelivery=True)
    failed(fake, "stored", status_code=503)
    store.record_delivery("stored", "issue_comment", "created", 1, b"{}")
    fake.add_hook_delivery("ping", None, guid="ping", status_code=0)
    fake.add_hook_delivery("star", "created", guid="star", status_code=500)
    failed(fake, "twice", status_code=500)
    latest = failed(fake, "twice", status_code=0, redelivery=True)

    r = make(store)
    result = await r.run_pass()

    assert result.requested == ["lost-1", "twice"]  # oldest first
    assert guids_asked(fake) == ["lost-1", "twice"]
    assert asked(fake)[-1] == latest.id  # an event's latest attempt is the one sent again
    assert store.redelivery_claims() == {"lost-1": "requested", "twice": "requested"}
    assert r.metrics is not None
    assert 'debate_bot_redeliveries_total{outcome="requested"} 2.0' in r.metrics.render().decode()
    # GitHub sent both again (the fake has no webhook: they failed again): never asked twice.
    assert [d.guid for d in fake.hook_deliveries if d.redelivery][-2:] == ["lost-1", "twice"]
    again = await r.run_pass()
    assert again.requested == [] and len(asked(fake)) == 2


async def test_pages_are_followed_by_cursor_and_a_restart_resumes_where_a_pass_stopped(
    fake: FakeGitHub, store: RunStore, make: Make
) -> None:
    earlier = datetime.now(UTC) - timedelta(hours=1)
    failed(fake, "oldest", delivered_at=earlier)
    for i in range(230):
        status = 0 if i == 115 else 202
        at = earlier + timedelta(seconds=i)
        fake.add_hook_delivery(
            "issues", "labeled", guid=f"old-{i}", status_code=status, delivered_at=at
        )
    failed(fake, "newest")

    result = await make(store).run_pass()

    assert sorted(result.requested) == ["newest", "old-115", "oldest"]
    lists = [r for r in fake.requests if r.route == LIST]
    assert len(lists) == 3  # 232 attempts, 100 a page
    assert "cursor" not in lists[0].query and lists[1].query["cursor"].startswith("v1_")
    assert all(r.query["per_page"] == "100" for r in lists)
    seen_until = store.redelivery_scan()
    assert seen_until is not None
    # The newest attempt the listing showed (GitHub's timestamps have whole seconds),
    # not the redelivery attempts the pass itself caused afterwards.
    [newest] = [d for d in fake.hook_deliveries if d.guid == "newest" and not d.redelivery]
    assert abs(seen_until - newest.delivered_at) < timedelta(seconds=1)

    # A new process on the same database reads back only to where that pass
    # stopped (less the overlap), not through the whole window.
    fake.reset_requests()
    failed(fake, "after-restart")
    assert (await make(store).run_pass()).requested == ["after-restart"]
    assert len([r for r in fake.requests if r.route == LIST]) == 1


async def test_the_per_pass_bound_leaves_the_rest_to_the_next_passes(
    fake: FakeGitHub, store: RunStore, make: Make
) -> None:
    for i in range(5):
        failed(fake, f"lost-{i}")
    r = make(store, redeliver_max_per_pass=2)

    passes = [await r.run_pass() for _ in range(4)]

    assert [p.requested for p in passes] == [
        ["lost-0", "lost-1"],
        ["lost-2", "lost-3"],
        ["lost-4"],
        [],
    ]
    assert passes[0].deferred == ["lost-2", "lost-3", "lost-4"]
    assert guids_asked(fake) == [f"lost-{i}" for i in range(5)]


async def test_a_refused_redelivery_is_recorded_and_never_asked_again(
    fake: FakeGitHub, store: RunStore, make: Make
) -> None:
    failed(fake, "expired")
    fake.redelivery_max_age = timedelta(0)  # GitHub answers 422: too old
    r = make(store)

    first = await r.run_pass()
    second = await r.run_pass()

    assert first.refused == ["expired"] and second == PassResult(listed=1)
    assert store.redelivery_claims() == {"expired": "refused"}
    assert len(asked(fake)) == 1
    assert r.metrics is not None
    assert 'debate_bot_redeliveries_total{outcome="refused"} 1.0' in r.metrics.render().decode()


async def test_a_transient_failure_drops_the_claim_for_a_later_pass(
    fake: FakeGitHub, store: RunStore, make: Make
) -> None:
    failed(fake, "lost")
    # One 503: GitHub may have acted, so the gateway does not replay the POST.
    fake.inject_faults(script=[503], applies_to=lambda m, route: route == ATTEMPTS)
    r = make(store)

    first = await r.run_pass()
    assert first.deferred == ["lost"] and store.redelivery_claims() == {}

    second = await r.run_pass()  # GitHub answers again
    assert second.requested == ["lost"]
    assert store.redelivery_claims() == {"lost": "requested"}


async def test_two_web_processes_ask_once_for_each_event(
    fake: FakeGitHub, db_url: str, store: RunStore, make: Make
) -> None:
    """Two processes, each with its own store and gateway on one database, pass
    side by side: every event is asked for by exactly one of them."""
    for i in range(6):
        failed(fake, f"lost-{i}")
    other = RunStore.from_url(db_url)
    results: list[PassResult] = []
    try:
        first, second = make(store), make(other)

        async def one(r: Redeliverer) -> None:
            results.append(await r.run_pass())

        async with anyio.create_task_group() as tg:
            for r in (first, second, first, second):
                tg.start_soon(one, r)
    finally:
        other.dispose()

    requested = [g for res in results for g in res.requested]
    assert sorted(requested) == [f"lost-{i}" for i in range(6)]
    assert Counter(guids_asked(fake)) == Counter({f"lost-{i}": 1 for i in range(6)})


async def test_a_failing_pass_is_logged_and_the_next_one_runs(
    fake: FakeGitHub, store: RunStore, make: Make
) -> None:
    failed(fake, "lost")
    # The first listing fails outright (404 is final: no retry inside the call).
    fake.inject_faults(script=[404], applies_to=lambda m, route: route == LIST)
    r = make(store, redeliver_interval_s=0.01)

    with anyio.fail_after(30):  # a bound on a hang, not a timing assertion
        async with anyio.create_task_group() as tg:
            tg.start_soon(r.run_forever)
            while True:  # until a later pass has asked
                if store.redelivery_claims() == {"lost": "requested"}:
                    tg.cancel_scope.cancel()
                    break
                await anyio.sleep(0.01)

    lists = [req.status for req in fake.requests if req.route == LIST]
    assert lists[0] == 404 and 200 in lists[1:]


def test_an_attempt_is_read_leniently() -> None:
    base = {
        "id": 7,
        "guid": "g",
        "delivered_at": "2026-12-01T00:00:00Z",
        "status_code": 502,
        "event": "issues",
        "action": None,
    }
    attempt = Attempt.parse(base)
    assert attempt is not None and not attempt.ok
    assert attempt.delivered_at == datetime(2026, 12, 1, tzinfo=UTC)
    assert Attempt.parse({**base, "status_code": 202}).ok  # type: ignore[union-attr]
    for broken in ({"id": "7"}, {"guid": ""}, {"delivered_at": "yesterday"}, {"event": None}):
        assert Attempt.parse({**base, **broken}) is None
