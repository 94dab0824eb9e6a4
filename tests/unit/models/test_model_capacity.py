"""Model capacity learned from the providers: the adaptive window, the rate-limit
headers of both APIs (over HTTP against the fake), 429s waited out rather than
dropped, fair turns, and the learned limit shared through the store."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from bot.core.errors import ConfigError
from bot.core.fair import FairQueue, Share
from bot.core.settings import Settings
from bot.engine.types import ModelRequest, Prompt, TurnKey
from bot.github.pacing import WritePacer
from bot.models.fair import CallInfo
from bot.models.gate import EndpointGate
from bot.models.limits import Aimd, Bucket, parse_duration, read_rate_headers
from bot.models.router import ModelRouter
from bot.store import RunStore
from testkit.fakes.model_server import FakeModelServer, Fault, RateLimit

PROMPT = Prompt(system="SYS|", prefix="PREFIX|", suffix="SUFFIX")
MODELS = ("openai/gpt-4.1-mini", "anthropic/claude-sonnet-4-5")


def settings(server: FakeModelServer, **values: object) -> Settings:
    base: dict[str, object] = {
        "openai_api_key": "k",
        "openai_base_url": server.openai_base_url,
        "anthropic_api_key": "a",
        "anthropic_base_url": server.anthropic_base_url,
        "model_max_retries": 0,
    }
    return Settings(_env_file=None, **{**base, **values})  # type: ignore[arg-type]


def request(model: str, slot: str = "P") -> ModelRequest:
    return ModelRequest(
        key=TurnKey(phase="opening", round=1, slot=slot),
        models=(model,),
        prompt=PROMPT,
        max_output_tokens=50,
    )


# -- the window ------------------------------------------------------------------


def test_the_window_doubles_per_round_trip_while_used_and_not_while_idle() -> None:
    window = Aimd(initial=4, ceiling=100)
    for _ in range(4):  # a full window answered: slow start adds one per answer
        window.on_success(in_flight=4)
    assert window.limit == 8
    window.on_success(in_flight=1)  # one call of eight in flight: nothing learned
    assert window.limit == 8


def test_an_overload_cuts_the_window_once_per_round_trip_then_it_probes_gently() -> None:
    window = Aimd(initial=40, ceiling=100)
    assert window.on_overload(sent_at=1.0, now=2.0)
    assert window.limit == pytest.approx(28)
    # Calls sent before the cut were refused for the same overload.
    assert not window.on_overload(sent_at=1.5, now=2.1)
    assert window.limit == pytest.approx(28)
    window.on_success(in_flight=28)  # congestion avoidance: +1 per window
    assert window.limit == pytest.approx(28 + 1 / 28)
    assert window.on_overload(sent_at=3.0, now=3.5)  # a new round trip: cut again
    assert window.limit == pytest.approx((28 + 1 / 28) * 0.7)


def test_the_window_stays_within_floor_and_ceiling() -> None:
    window = Aimd(initial=500, ceiling=10)
    assert window.limit == 10
    for _ in range(20):
        window.on_success(in_flight=10)
    assert window.limit == 10
    for t in range(20):
        window.on_overload(sent_at=float(t), now=float(t) + 0.5)
    assert window.limit == 1 and window.slots == 1


def test_a_later_back_off_elsewhere_is_taken_up_an_older_one_is_not() -> None:
    window = Aimd(initial=40, ceiling=100)
    window.on_overload(sent_at=0.0, now=5.0)
    window.adopt(10, decreased_at=4.0)
    assert window.limit == pytest.approx(28)
    window.adopt(10, decreased_at=6.0)
    assert window.limit == 10 and window.decreased_at == 6.0


# -- budgets and headers ---------------------------------------------------------


def test_a_bucket_paces_from_the_providers_figure_less_what_was_sent_since() -> None:
    bucket = Bucket(now=0.0)
    assert bucket.wait_for(1, 0.0) == 0  # nothing known: no pacing
    bucket.observe(limit=60, remaining=3, since=2, now=10.0)
    assert bucket.level_at(10.0) == 1
    bucket.debit(1, 10.0)
    assert bucket.wait_for(1, 10.0) == pytest.approx(1.0)  # 60 a minute: one a second
    assert bucket.wait_for(1, 11.0) == pytest.approx(0.0)
    # Never more than the provider ever said was left (its burst may be short).
    assert bucket.level_at(1000.0) == 4


def test_an_operators_ceiling_keeps_any_minute_within_it() -> None:
    bucket = Bucket.ceiling(60, now=0.0)
    sent = []
    t = 0.0
    while t < 120:
        wait = bucket.wait_for(1, t)
        t += wait
        bucket.debit(1, t)
        sent.append(t)
    windows = [sum(1 for s in sent if start <= s < start + 60) for start in sent]
    assert max(windows) <= 60


def test_durations_and_headers_of_both_providers_parse() -> None:
    assert parse_duration("6m0s") == 360
    assert parse_duration("1s") == 1
    assert parse_duration("20ms") == pytest.approx(0.02)
    assert parse_duration("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_duration("soon") is None
    openai = read_rate_headers(
        {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-reset-requests": "120ms",
            "x-ratelimit-limit-tokens": "200000",
            "x-ratelimit-remaining-tokens": "199000",
            "x-ratelimit-reset-tokens": "300ms",
        }
    )
    assert openai.requests is not None and openai.tokens is not None
    assert (openai.requests.limit, openai.requests.remaining) == (500, 499)
    assert openai.tokens.reset_s == pytest.approx(0.3)
    now = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    anthropic = read_rate_headers(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2026-12-02T05:00:07Z",
            "anthropic-ratelimit-input-tokens-limit": "40000",
            "anthropic-ratelimit-input-tokens-remaining": "39000",
        },
        now=now,
    )
    assert anthropic.requests is not None and anthropic.requests.reset_s == 7
    assert anthropic.tokens is not None and anthropic.tokens.limit == 40000
    assert read_rate_headers({"x-ratelimit-limit-requests": "many"}).empty


@pytest.mark.parametrize("model", MODELS)
async def test_the_rate_limit_headers_are_read_over_http(model: str) -> None:
    limit = RateLimit(requests_per_minute=600, tokens_per_minute=100_000)
    with FakeModelServer(openai_api_key="k", anthropic_api_key="a", rate_limit=limit) as server:
        async with ModelRouter(settings(server)) as router:
            turn = await router.complete(request(model))
            gate = router.gate(model.split("/")[0])
            assert turn.status == "ok" and gate is not None
            assert gate.requests.capacity == 600
            assert gate.tokens.capacity == 100_000
            # What the server said was left after this call: one request fewer.
            assert 598 <= gate.requests.level_at(gate.requests.at) <= 600
            assert gate.tokens.level_at(gate.tokens.at) < 100_000
        names = server.requests[0].headers  # the request; the answer carried the figures
        assert names  # the call went out with its usual headers


# -- 429s waited out -------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
async def test_a_429_that_states_a_wait_is_waited_out_not_dropped(model: str) -> None:
    with FakeModelServer(openai_api_key="k", anthropic_api_key="a") as server:
        server.add_faults(Fault.rate_limited("1"), Fault.rate_limited("1"))
        # No retries at all: waiting out a 429 is not a failed attempt.
        async with ModelRouter(settings(server, model_max_retries=0)) as router:
            turn = await router.complete(request(model))
    assert turn.status == "ok"
    assert [r.status for r in server.requests] == [429, 429, 200]


async def test_a_wait_beyond_the_cap_drops_the_call_as_rate_limited() -> None:
    with FakeModelServer(openai_api_key="k") as server:
        server.add_faults(Fault.rate_limited("5"))
        s = settings(server, model_rate_limit_wait_s=1.0)
        async with ModelRouter(s) as router:
            turn = await router.complete(request(MODELS[0]))
    assert turn.status == "dropped" and turn.drop_class == "rate_limited"
    assert len(server.requests) == 1


async def test_calls_beyond_the_providers_limit_wait_for_it_and_all_answer() -> None:
    # Two requests of burst, two a second after: six calls at once on a fresh
    # process meet 429s (nothing is known yet), wait them out and all answer.
    limit = RateLimit(requests_per_minute=120, burst_s=1.0)
    with FakeModelServer(openai_api_key="k", rate_limit=limit) as server:
        async with ModelRouter(settings(server)) as router:
            turns = await asyncio.gather(
                *(router.complete(request(MODELS[0], f"P{i}")) for i in range(6))
            )
    assert all(t.status == "ok" for t in turns)
    assert server.limiters["openai"].admitted == 6


async def test_once_the_headers_are_known_calls_are_paced_before_a_429() -> None:
    limit = RateLimit(requests_per_minute=240, burst_s=1.0)  # 4 of burst, 4 a second
    with FakeModelServer(openai_api_key="k", latency_s=0.02, rate_limit=limit) as server:
        async with ModelRouter(settings(server)) as router:
            assert (await router.complete(request(MODELS[0]))).status == "ok"
            turns = await asyncio.gather(
                *(router.complete(request(MODELS[0], f"P{i}")) for i in range(10))
            )
    assert all(t.status == "ok" for t in turns)
    assert server.limiters["openai"].refused == 0


def test_rate_ceilings_must_name_a_provider() -> None:
    with (
        FakeModelServer(openai_api_key="k") as server,
        pytest.raises(ConfigError, match="unknown provider"),
    ):
        ModelRouter(settings(server, model_rate_limits={"opnai": {"requests_per_minute": 5}}))


# -- fair turns ------------------------------------------------------------------


def drain(queue: FairQueue[str]) -> list[str]:
    out = []
    while (item := queue.pop()) is not None:
        out.append(item[0])
    return out


def test_a_burst_of_one_installation_does_not_starve_another() -> None:
    queue: FairQueue[str] = FairQueue()
    for i in range(50):
        queue.push(Share(1, f"a{i}", since=float(i)), f"a{i}")
    queue.push(Share(2, "b", since=100.0), "b")  # later, and a newer run
    order = drain(queue)
    assert order.index("b") == 1  # the second call served, not the 51st
    assert len(order) == 51


def test_within_an_installation_older_runs_go_first() -> None:
    queue: FairQueue[str] = FairQueue()
    queue.push(Share(1, "new", since=20.0), "new opening")
    queue.push(Share(1, "old", since=10.0), "old rebuttal")
    assert drain(queue) == ["old rebuttal", "new opening"]


def test_a_run_in_progress_goes_before_newer_runs_openings_across_installations() -> None:
    queue: FairQueue[str] = FairQueue()
    for i in range(5):  # five new debates' openings, one installation each
        queue.push(Share(10 + i, f"n{i}", since=50.0 + i), f"opening {i}")
    queue.push(Share(1, "old", since=1.0), "rebuttal of a debate in progress")
    assert drain(queue)[0] == "rebuttal of a debate in progress"


def test_an_installation_that_was_idle_gets_no_saved_credit() -> None:
    queue: FairQueue[str] = FairQueue()
    for i in range(10):
        queue.push(Share(1, "a", since=0.0), f"a{i}")
    for _ in range(5):
        queue.pop()
    for i in range(4):
        queue.push(Share(2, "b", since=0.0), f"b{i}")
    order = drain(queue)
    # From here the two alternate: B does not get its missed five in a row.
    assert sorted(x[0] for x in order[:6]) == ["a", "a", "a", "b", "b", "b"]
    assert order[6:] == ["b3", "a8", "a9"] or order[6:] == ["a8", "b3", "a9"]


def test_a_dropped_waiter_is_skipped() -> None:
    queue: FairQueue[str] = FairQueue()
    entry = queue.push(Share(1, "a"), "gone")
    queue.push(Share(1, "a"), "kept")
    queue.drop(entry)
    assert len(queue) == 1 and drain(queue) == ["kept"]


async def test_the_gate_lets_waiting_calls_through_in_fair_order() -> None:
    gate = EndpointGate("x", ceiling=1, initial=1)
    served: list[str] = []

    async def call(share: Share, name: str) -> None:
        ticket = await gate.enter(CallInfo(share, 10, 10))
        served.append(name)
        await asyncio.sleep(0)
        gate.leave(ticket, 200)

    first = await gate.enter()  # holds the one slot while the others queue
    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(call, Share(1, f"a{i}", since=float(i)), f"a{i}")
        tg.start_soon(call, Share(2, "b", since=9.0), "b")
        await asyncio.sleep(0.01)
        assert gate.waiting == 5
        gate.leave(first, 200)
    assert served == ["a0", "b", "a1", "a2", "a3"]


async def test_a_429_holds_every_call_to_the_endpoint() -> None:
    now = [100.0]
    gate = EndpointGate("x", ceiling=10, clock=lambda: now[0])
    refused, other = await gate.enter(), await gate.enter()
    assert gate.leave(refused, 429, {}, retry_after=3.0) == 3.0
    assert gate.hold_until == 103.0
    assert gate.window.limit < 10  # backed off
    later = asyncio.ensure_future(gate.enter())
    await asyncio.sleep(0.01)
    assert not later.done() and gate.waiting == 1  # held, though slots are free
    now[0] = 103.0
    gate.leave(other, 200)  # any answer looks at the queue again
    ticket = await asyncio.wait_for(later, 1.0)
    assert ticket.sent_at == 103.0


# -- shared across processes -----------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=["sqlite", "postgresql"])
def two_stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[RunStore, RunStore]]:
    """Two processes' stores on one database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    else:
        url = request.getfixturevalue("pg_database")
    a = RunStore.from_url(url, clock=Clock())
    a.migrate()
    b = RunStore.from_url(url, clock=Clock())
    yield a, b
    a.dispose()
    b.dispose()


def test_the_store_merges_back_offs_holds_and_growth(two_stores: tuple[RunStore, RunStore]) -> None:
    a, b = two_stores
    t0 = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
    key = "openai https://api.openai.com/v1"
    first = a.sync_model_limit(key, 64.0, None, None)
    assert (first.window, first.decreased_at, first.hold_until) == (64.0, None, None)
    # No back-off anywhere yet: the widest window is kept, for new processes.
    assert b.sync_model_limit(key, 100.0, None, None).window == 100.0
    # A back-off with a hold: its window replaces the row's, the hold is kept.
    hold = t0 + timedelta(seconds=30)
    backed = a.sync_model_limit(key, 20.0, t0, hold)
    assert (backed.window, backed.decreased_at, backed.hold_until) == (20.0, t0, hold)
    # The other process, which knew of no back-off, is answered with it.
    seen = b.sync_model_limit(key, 140.0, None, None)
    assert (seen.window, seen.decreased_at, seen.hold_until) == (20.0, t0, hold)
    # An older back-off does not undo a newer one; an earlier hold does not shorten it.
    older = b.sync_model_limit(key, 5.0, t0 - timedelta(seconds=1), t0)
    assert (older.window, older.hold_until) == (20.0, hold)
    assert a.sync_model_limit("another endpoint", 8.0, None, None).window == 8.0


async def test_a_429_in_one_process_holds_the_others(two_stores: tuple[RunStore, RunStore]) -> None:
    a, b = two_stores
    one = EndpointGate("openai", ceiling=64, shared=a)
    other = EndpointGate("openai", ceiling=64, shared=b)
    await other.sync_now()
    ticket = await one.enter()
    one.leave(ticket, 429, {}, retry_after=30.0)
    await one.sync_now()
    await other.sync_now()
    assert other.hold_until > 0 and abs(other.hold_until - one.hold_until) < 1.0
    assert other.window.limit == pytest.approx(one.window.limit)
    # A third process starts from what the others learned.
    third = EndpointGate("openai", ceiling=64, shared=a)
    await third.sync_now()
    assert third.window.limit == pytest.approx(one.window.limit)
    assert third.hold_until == pytest.approx(one.hold_until, abs=1.0)


# -- GitHub writes: the same oldest-run-first turn ---------------------------------


async def test_an_installations_writes_wait_oldest_run_first() -> None:
    now = [0.0]

    async def sleep(seconds: float) -> None:
        await asyncio.sleep(0.01)
        now[0] += seconds

    pacer = WritePacer(1.0, clock=lambda: now[0], sleep=sleep)
    order: list[str] = []

    async def write(name: str, since: float | None) -> None:
        await pacer.wait_turn(since)
        order.append(name)

    await write("first", None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(write, "in the pacer", 50.0)  # takes the turn, waits its second
        await asyncio.sleep(0.001)
        tg.start_soon(write, "new debate", 300.0)
        tg.start_soon(write, "acknowledgment", None)  # outside a run: counts as now
        tg.start_soon(write, "debate in progress", 100.0)
    assert order == ["first", "in the pacer", "debate in progress", "new debate", "acknowledgment"]


async def test_a_waiting_write_is_passed_only_by_runs_older_than_it() -> None:
    """No write starves: its place is fixed when it queues (its run's start, or
    the time it queued outside a run), so only older runs' writes go before it;
    writes of one run keep their order."""
    now = [0.0]

    async def sleep(seconds: float) -> None:
        await asyncio.sleep(0.01)
        now[0] += seconds

    pacer = WritePacer(1.0, clock=lambda: now[0], sleep=sleep)
    order: list[str] = []

    async def write(name: str, since: float | None) -> None:
        await pacer.wait_turn(since)
        order.append(name)

    later = time.time() + 3600  # a run started after the acknowledgment queued
    await write("first", None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(write, "in the pacer", 50.0)
        await asyncio.sleep(0.001)
        tg.start_soon(write, "acknowledgment", None)
        await asyncio.sleep(0.001)
        for name in ("newer run 1", "older run 1", "newer run 2", "older run 2"):
            tg.start_soon(write, name, later if name.startswith("newer") else 100.0)
            await asyncio.sleep(0.001)
    assert order == [
        "first",
        "in the pacer",
        "older run 1",
        "older run 2",
        "acknowledgment",
        "newer run 1",
        "newer run 2",
    ]
