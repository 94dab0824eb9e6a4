"""Intake shares the workers fairly: one installation's burst of deliveries (each
waiting its installation's paced write) does not hold back another's."""

from __future__ import annotations

import json

import anyio
from pydantic import SecretStr

from bot.config import Settings
from bot.github.gateway import GitHubGateway
from bot.github.pacing import writer_since
from bot.llm.router import ModelRouter
from bot.metrics import Metrics
from bot.store import RunStore
from bot.store.rows import DeliveryRow
from bot.worker.context import Services
from bot.worker.pool import Worker
from bot.worker.triggers import build_router
from tests.harness.service import APP_ID, INSTALLATION, delivery


def _services(store: RunStore, app_keys: tuple[str, str]) -> Services:
    settings = Settings(app_id=APP_ID, private_key=SecretStr(app_keys[0]))
    return Services(settings, store, GitHubGateway(settings), ModelRouter(settings), Metrics())


class SinceRecorder(Worker):
    """Notes the write turn a delivery's GitHub writes would wait by."""

    seen: list[float | None]

    async def _process_delivery(self, row: DeliveryRow) -> None:
        self.seen.append(writer_since.get())


def test_a_deliverys_writes_wait_their_turn_by_its_arrival(
    store: RunStore, app_keys: tuple[str, str]
) -> None:
    """Counted from "now", an acknowledgment would queue behind every write of the
    installation's runs started since, holding its intake slot meanwhile."""
    payload = json.dumps(delivery("issue_comment.created.with-installation"))
    store.record_delivery("d1", "issue_comment", "created", INSTALLATION, payload)
    row = store.get_delivery("d1")
    assert row is not None
    worker = SinceRecorder(_services(store, app_keys), build_router())
    worker.seen = []
    anyio.run(worker.process_delivery, row)
    assert worker.seen == [row.received_at.timestamp()]
    assert writer_since.get() is None  # set in the delivery's own task context only
