"""Scheduled design reviews: which repositories asked for one, and when the next is due.

An aggregate of ``RunStore`` on the shared base (bot/store/base.py): the
queries share its engine, clock and error handling. A due review is claimed like a run (a lease, one
atomic UPDATE), so several workers never start the same one; the next due time
is counted from when a review starts, so a service that was down catches up
once, not once per missed period.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any, cast

import sqlalchemy as sa

from bot.store.base import StoreBase
from bot.store.rows import PERIOD, Cadence, ScheduleRow
from bot.store.schema import schedules


class ScheduleQueries(StoreBase):
    def set_schedule(
        self, repo: str, installation_id: int, cadence: Cadence, scope: Sequence[str]
    ) -> None:
        """Record that ``repo`` asks for scheduled reviews; a new one is due at once,
        a known one keeps its due time."""
        now = self._now()
        values = {
            "installation_id": installation_id,
            "cadence": cadence,
            "scope": json.dumps(list(scope)),
            "updated_at": now,
        }
        stmt = (
            self._insert(schedules)
            .values(repo=repo, next_due=now, **values)
            .on_conflict_do_update(index_elements=[schedules.c.repo], set_=values)
        )
        with self._write("set_schedule") as conn:
            conn.execute(stmt)

    def drop_schedules(self, installation_id: int, keep: Sequence[str]) -> int:
        """Forget the installation's schedules except those of ``keep`` (the repositories
        whose config still asks for one)."""
        s = schedules.c
        stmt = sa.delete(schedules).where(s.installation_id == installation_id)
        if keep:
            stmt = stmt.where(s.repo.not_in(list(keep)))
        with self._write("drop_schedules") as conn:
            return conn.execute(stmt).rowcount

    def claim_due_schedule(self, worker_id: str, lease_s: float) -> ScheduleRow | None:
        now = self._now()
        s = schedules.c
        eligible = sa.and_(
            s.next_due <= now,
            sa.or_(s.lease_expires_at.is_(None), s.lease_expires_at < now),
        )
        rows = self._claim_oldest(
            "claim_due_schedule",
            schedules,
            s.repo,
            eligible,
            (s.next_due, s.repo),
            lease_owner=worker_id,
            lease_expires_at=now + timedelta(seconds=lease_s),
        )
        return ScheduleRow.from_mapping(rows[0]) if rows else None

    def schedule_started(
        self, repo: str, worker_id: str, *, issue: int | None, run_id: str | None
    ) -> None:
        """The review is filed (or skipped): the next one is due a period from now."""
        s = schedules.c
        now = self._now()
        with self._write("schedule_started") as conn:
            row = conn.execute(sa.select(s.cadence).where(s.repo == repo)).first()
            if row is None:
                return
            period = PERIOD.get(cast(Cadence, row.cadence), PERIOD["weekly"])
            values: dict[str, Any] = {
                "next_due": now + period,
                "lease_owner": None,
                "lease_expires_at": None,
                "updated_at": now,
            }
            if issue is not None:
                values.update(last_issue=issue, last_run=run_id)
            conn.execute(
                sa.update(schedules)
                .where(s.repo == repo, s.lease_owner == worker_id)
                .values(**values)
            )

    def list_schedules(self) -> Iterator[ScheduleRow]:
        with self._read("schedules") as conn:
            rows = conn.execute(sa.select(schedules).order_by(schedules.c.repo)).mappings().all()
        return iter([ScheduleRow.from_mapping(r) for r in rows])
