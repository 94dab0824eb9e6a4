"""The worker's claim loop: a burst of deliveries does not hold back queued runs."""

from __future__ import annotations

import json

import anyio
from pydantic import SecretStr

from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.engine.types import DebateSpec
from bot.github.gateway import GitHubGateway
from bot.models.router import ModelRouter
from bot.service.features.table import build_triggers
from bot.service.worker.context import Services
from bot.service.worker.pool import CLAIM_BATCH, Worker
from bot.store import NewRun, RunStore
from bot.store.rows import DeliveryRow, RunRow
from testkit.harness.service import APP_ID, INSTALLATION, REPO, delivery

BURST = 3 * CLAIM_BATCH + 2


class ClaimRecorder(Worker):
    """A worker that notes what it claimed, in order, and does nothing with it."""

    def __init__(self, svc: Services) -> None:
        super().__init__(svc, build_triggers())
        self.claimed: list[str] = []

    async def _intake_slot(
        self, row: DeliveryRow, key: str, before: anyio.Event | None, done: anyio.Event
    ) -> None:
        self.claimed.append("delivery")
        done.set()
        self._intake_slots.release()
        self._leave()

    async def _drive_slot(self, run: RunRow) -> None:
        self.claimed.append("run")
        self._slots.release()
        self._leave()


def test_runs_queued_during_a_burst_are_claimed_before_the_burst_is_through(
    store: RunStore, app_keys: tuple[str, str]
) -> None:
    payload = json.dumps(delivery("issue_comment.created.with-installation"))
    for i in range(BURST):
        store.record_delivery(f"d{i}", "issue_comment", "created", INSTALLATION, payload)
    spec = DebateSpec(mode="debate", title="t", subject="s")
    for number in (1, 2):
        store.create_run(
            NewRun(repo=REPO, issue_number=number, spec=spec, installation_id=INSTALLATION)
        )
    settings = Settings(
        app_id=APP_ID,
        private_key=SecretStr(app_keys[0]),
        worker_concurrency=8,
        intake_concurrency=64,
    )
    worker = ClaimRecorder(
        Services(settings, store, GitHubGateway(settings), ModelRouter(settings), Metrics())
    )

    async def one_poll() -> None:
        async with anyio.create_task_group() as tg:
            await worker.poll_once(tg)

    anyio.run(one_poll)
    assert sorted(worker.claimed) == ["delivery"] * BURST + ["run", "run"]
    # One batch of deliveries, then the runs: not after the whole burst.
    assert worker.claimed.index("run") == CLAIM_BATCH
