"""RunStore: the one facade over the store's aggregates, one module each
(deliveries, runs, turns, comments, installations, redeliveries, schedules,
pacing) on the shared base in ``bot/store/base.py``.

Synchronous SQLAlchemy Core over SQLite (embedded default) or PostgreSQL
(scale-out). Every method is one short transaction and is safe to call from
several threads (async code awaits it through ``bot.core.aio.store_call``: in a
worker thread, or on the event loop for SQLite).
Times come from the injected ``clock`` so tests can expire leases without
sleeping. Database failures surface as :class:`bot.core.errors.StoreError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from bot.core.errors import StoreError
from bot.store.base import Clock
from bot.store.comments import CommentQueries
from bot.store.deliveries import DeliveryQueries
from bot.store.engine import create_engine
from bot.store.installations import InstallationQueries
from bot.store.ledger import LedgerQueries
from bot.store.model_limits import ModelLimitQueries
from bot.store.pacing import PacingQueries
from bot.store.redeliveries import RedeliveryQueries
from bot.store.reports import ReportQueries
from bot.store.runs import RunQueries
from bot.store.schedules import ScheduleQueries
from bot.store.steps import StepQueries
from bot.store.turns import TurnQueries

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Serialises concurrent `migrate` calls from several processes on PostgreSQL.
_MIGRATE_LOCK_KEY = 0x64656261  # "deba"


class RunStore(
    DeliveryQueries,
    RunQueries,
    TurnQueries,
    CommentQueries,
    InstallationQueries,
    RedeliveryQueries,
    ScheduleQueries,
    PacingQueries,
    StepQueries,
    ReportQueries,
    ModelLimitQueries,
    LedgerQueries,
):
    @classmethod
    def from_url(cls, url: str, *, clock: Clock | None = None, **engine_kwargs: Any) -> RunStore:
        """``sqlite:///path`` or ``postgresql://…`` (mapped to psycopg 3)."""
        return cls(create_engine(url, **engine_kwargs), clock=clock)

    def dispose(self) -> None:
        self.engine.dispose()

    def alembic_config(self) -> Config:
        """An Alembic config for the packaged migrations (no alembic.ini needed)."""
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
        return cfg

    def migrate(self) -> None:
        """Upgrade the database to the latest schema; a no-op when current."""
        cfg = self.alembic_config()
        with self._write("migrate") as conn:
            if self._dialect == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATE_LOCK_KEY)))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

    def ping(self) -> bool:
        try:
            with self._read("ping") as conn:
                return conn.execute(sa.text("SELECT 1")).scalar() == 1
        except StoreError:
            return False
