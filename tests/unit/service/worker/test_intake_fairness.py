"""Intake shares the workers fairly: one installation's burst of deliveries (each
waiting its installation's paced write) does not hold back another's; a
delivery's and a run's writes wait their turn by their age."""

from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
from pydantic import SecretStr

from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.engine.types import DebateSpec
from bot.github.events import IssueCommentEvent
from bot.github.gateway import GitHubGateway, InstallationClient
from bot.models.router import ModelRouter
from bot.service.features.table import build_triggers
from bot.service.web.filter import trigger
from bot.service.worker.context import Services
from bot.service.worker.pool import Worker
from bot.service.worker.respond import Responder
from bot.service.worker.routes import TriggerTable
from bot.store import NewRun, RunStore
from bot.store.rows import DeliveryRow, RunRow
from testkit.fakes.github_server import FakeGitHub
from testkit.harness.service import APP_ID, INSTALLATION, REPO, delivery
from testkit.harness.stores import FakeClock, race
from testkit.harness.stores import clock as clock
from testkit.harness.stores import db_url as db_url
from testkit.harness.stores import pg_url as pg_url
from testkit.harness.stores import store as store

LEASE = 120.0
A, B, C = 101, 202, 303
GUIDS = itertools.count(1)


def arrive(store: RunStore, clock: FakeClock, installation: int, n: int) -> list[str]:
    """``n`` deliveries for ``installation``, a second apart."""
    ids = []
    for _ in range(n):
        clock.advance(1)
        guid = f"g{next(GUIDS)}"
        assert store.record_delivery(guid, "issue_comment", "created", installation, "{}")
        ids.append(guid)
    return ids


def claimed(store: RunStore, worker: str, n: int) -> list[str]:
    return [row.delivery_id for row in store.claim_deliveries(worker, LEASE, n)]


def test_a_burst_of_webhooks_does_not_hold_back_a_delivery_after_it(
    store: RunStore, clock: FakeClock
) -> None:
    burst = arrive(store, clock, A, 5)
    (single,) = arrive(store, clock, B, 1)
    assert claimed(store, "w1", 2) == [burst[0], single]  # returned oldest first
    assert claimed(store, "w1", 2) == burst[1:3]  # within an installation, by arrival


def test_deliveries_in_intake_count_against_their_installations_turn(
    store: RunStore, clock: FakeClock
) -> None:
    burst = arrive(store, clock, A, 6)
    assert claimed(store, "w1", 3) == burst[:3]  # A holds three intake slots
    late = arrive(store, clock, B, 2)
    # B holds none: both its deliveries (turns 1, 2) before A's next (turn 4).
    assert claimed(store, "w2", 2) == late
    store.finish_delivery(burst[0], "done")  # A holds two now, B two
    assert claimed(store, "w2", 1) == [burst[3]]  # its turn: first in line, two held
    clock.advance(LEASE + 1)  # every intake died: the lapsed ones are claimed again
    again = claimed(store, "w3", 10)
    assert set(again) == set(burst[1:] + late)


def test_concurrent_intakes_never_share_a_delivery(
    db_url: str, clock: FakeClock, store: RunStore
) -> None:
    ids: set[str] = set()
    for installation, n in ((A, 30), (B, 12), (C, 6)):
        ids.update(arrive(store, clock, installation, n))
    stores = [RunStore.from_url(db_url, clock=clock) for _ in range(3)]
    claims: list[tuple[str, str]] = []
    lock = threading.Lock()

    def intake(n: int) -> None:
        me = f"w{n}"
        while batch := stores[n % 3].claim_deliveries(me, LEASE, 1 + n % 3):
            with lock:
                claims.extend((row.delivery_id, me) for row in batch)

    race(6, intake)
    for s in stores:
        s.dispose()
    counted = Counter(guid for guid, _ in claims)
    assert set(counted) == ids and max(counted.values()) == 1
    for guid, owner in claims:
        row = store.get_delivery(guid)
        assert row is not None and row.lease_owner == owner and row.attempts == 1


@contextmanager
def github_services(store: RunStore, app_keys: tuple[str, str]) -> Iterator[Services]:
    """Services whose gateway fetches tokens from a fake GitHub."""
    private, public = app_keys
    with FakeGitHub(app_id=APP_ID, public_key_pem=public) as github:
        github.add_installation(INSTALLATION)
        settings = Settings(
            app_id=APP_ID, private_key=SecretStr(private), github_api_url=github.api_url
        )
        yield Services(settings, store, GitHubGateway(settings), ModelRouter(settings), Metrics())


def test_a_deliverys_writes_wait_their_turn_by_its_arrival(
    tmp_path: Path, app_keys: tuple[str, str]
) -> None:
    """Counted from "now", an acknowledgment would queue behind every write of the
    installation's runs started since, holding its intake slot meanwhile."""
    store = RunStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    payload = json.dumps(delivery("issue_comment.created.with-installation"))
    store.record_delivery("d1", "issue_comment", "created", INSTALLATION, payload)
    row = store.get_delivery("d1")
    assert row is not None
    seen: list[float | None] = []

    async def record(r: Responder, gh: InstallationClient, event: object, _: DeliveryRow) -> str:
        seen.append(gh.since)
        return "done"

    table = TriggerTable()
    table.on_event(trigger(IssueCommentEvent, "created"), record)
    with github_services(store, app_keys) as svc:

        async def scenario() -> float | None:
            try:
                await Worker(svc, table).process_delivery(row)
                return (await svc.gateway.installation(INSTALLATION)).since
            finally:
                await svc.gateway.aclose()

        shared = anyio.run(scenario)
    assert seen == [row.received_at.timestamp()]
    assert shared is None  # the delivery's own client: the shared one keeps no age


class SinceRecorder(Worker):
    """Notes the age the client a run is driven with carries, and drives nothing."""

    seen: list[float | None]

    async def _drive_with(self, gh: InstallationClient, run: RunRow, spec: DebateSpec) -> None:
        self.seen.append(gh.since)


def test_a_runs_writes_wait_their_turn_by_its_start(
    store: RunStore, app_keys: tuple[str, str]
) -> None:
    """Its digests and final comment go before newer runs' writes (the same
    oldest-first order its model calls get at a busy endpoint)."""
    spec = DebateSpec(mode="debate", title="t", subject="s")
    store.create_run(NewRun(repo=REPO, issue_number=1, spec=spec, installation_id=INSTALLATION))
    (run,) = store.claim_runs("w", LEASE, 1)
    with github_services(store, app_keys) as svc:
        worker = SinceRecorder(svc, build_triggers())
        worker.seen = []

        async def scenario() -> None:
            try:
                await worker.drive(run)
            finally:
                await svc.gateway.aclose()

        anyio.run(scenario)
    assert worker.seen == [run.created_at.timestamp()]


class Holder(Worker):
    """Holds every delivery it takes in until told to let go."""

    def __init__(self, svc: Services) -> None:
        super().__init__(svc, build_triggers())
        self.taken: list[str] = []
        self.let_go = anyio.Event()

    async def process_delivery(self, row: DeliveryRow) -> None:
        self.taken.append(row.delivery_id)
        await self.let_go.wait()


def test_intake_stops_claiming_past_its_payload_budget(
    tmp_path: Path, app_keys: tuple[str, str]
) -> None:
    store = RunStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    for i in range(20):  # ~0.3 MB each, each about its own issue (no arrival-order wait)
        big = {"repository": {"full_name": "o/r"}, "issue": {"number": i}, "pad": "x" * 300_000}
        store.record_delivery(f"d{i}", "issue_comment", "created", INSTALLATION, json.dumps(big))
    settings = Settings(app_id=APP_ID, private_key=SecretStr(app_keys[0]), intake_max_mb=1)
    worker = Holder(
        Services(settings, store, GitHubGateway(settings), ModelRouter(settings), Metrics())
    )

    async def scenario() -> tuple[int, int, int]:
        async with anyio.create_task_group() as tg:
            await worker.poll_once(tg)  # one batch of 8 (2.4 MB) passes the 1 MB budget
            await anyio.sleep(0.05)
            held = len(worker.taken)
            await worker.poll_once(tg)  # nothing more while they are held
            await anyio.sleep(0.05)
            still = len(worker.taken)
            worker.let_go.set()
        async with anyio.create_task_group() as tg:
            await worker.poll_once(tg)  # the budget is free again: the rest are taken
        return held, still, len(worker.taken)

    held, still, after = anyio.run(scenario)
    assert (held, still) == (8, 8)
    assert after == 20  # let go: each finishing delivery frees the budget for the next
