"""Model endpoints' learned limits, shared by every process (PostgreSQL).

An aggregate of ``RunStore`` on the shared base (bot/store/base.py). Each
process's endpoint gate (bot/models/gate.py) syncs its view here every few seconds
while it makes calls, and at once after a 429 or an overload, in one
transaction that locks the endpoint's row:

- ``hold_until``: the latest time any process was told to wait until (a 429's
  ``retry-after``); every process holds its calls until then, so ten workers do
  not each meet the same 429.
- ``concurrency`` (the window) and ``decreased_at``: the concurrency window of the process that
  backed off last. A back-off newer than the row's replaces it and the others
  take it up at their next sync; without a newer back-off the row keeps the
  widest window reached, where a new process starts.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from bot.store.base import StoreBase
from bot.store.rows import ModelLimit
from bot.store.schema import model_limits


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a or b
    return max(a, b)


class ModelLimitQueries(StoreBase):
    def sync_model_limit(
        self,
        endpoint: str,
        window: float,
        decreased_at: datetime | None,
        hold_until: datetime | None,
    ) -> ModelLimit:
        """Merge one process's view of ``endpoint`` into the shared one and answer it."""
        m = model_limits.c
        now = self._now()
        with self._write("sync_model_limit") as conn:
            conn.execute(
                self._insert(model_limits)
                .values(
                    endpoint=endpoint,
                    concurrency=window,
                    decreased_at=decreased_at,
                    hold_until=hold_until,
                    updated_at=now,
                )
                .on_conflict_do_nothing(index_elements=[m.endpoint])
            )
            row = conn.execute(
                sa.select(model_limits).where(m.endpoint == endpoint).with_for_update()
            ).one()
            shared_at: datetime | None = row.decreased_at
            if decreased_at is not None and (shared_at is None or decreased_at > shared_at):
                merged = ModelLimit(window, decreased_at, None)  # a newer back-off
            elif shared_at is not None and (decreased_at is None or shared_at > decreased_at):
                merged = ModelLimit(float(row.concurrency), shared_at, None)
            else:  # the same back-off, or none yet: the widest window since
                merged = ModelLimit(max(float(row.concurrency), window), shared_at, None)
            merged = ModelLimit(
                merged.window, merged.decreased_at, _later(row.hold_until, hold_until)
            )
            conn.execute(
                sa.update(model_limits)
                .where(m.endpoint == endpoint)
                .values(
                    concurrency=merged.window,
                    decreased_at=merged.decreased_at,
                    hold_until=merged.hold_until,
                    updated_at=now,
                )
            )
        return merged
