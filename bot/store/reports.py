"""What operators read from the store: recent runs (`debate-bot runs`) and the
delivery backlog (the ``debate_bot_deliveries_*`` gauges, docs/operations.md).

An aggregate of ``RunStore`` on the shared base (bot/store/base.py)
(bot/store/runs.py): the queries share its engine, clock and error handling."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from bot.store.base import StoreBase
from bot.store.rows import RunSummary
from bot.store.schema import deliveries, runs


def _aware(value: object) -> datetime | None:
    if isinstance(value, str):  # SQLite hands an aggregate back as text
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return None


class ReportQueries(StoreBase):
    """Read-only reports: what operators read (`debate-bot runs`, backlog gauges)."""

    def recent_runs(
        self, *, repo: str | None = None, state: str | None = None, limit: int = 20
    ) -> list[RunSummary]:
        """The newest runs first, optionally of one repository and one state."""
        r = runs.c
        query = sa.select(*(r[name] for name in RunSummary.__dataclass_fields__))
        if repo is not None:
            query = query.where(r.repo == repo)
        if state is not None:
            query = query.where(r.state == state)
        query = query.order_by(r.created_at.desc(), r.id).limit(limit)
        with self._read("recent_runs") as conn:
            return [RunSummary.from_mapping(row) for row in conn.execute(query).mappings()]

    def delivery_backlog(self) -> dict[str, float]:
        """Deliveries waiting for a worker (``pending``) and how long the oldest
        has waited: with no worker running, deliveries pile up here while every
        run gauge stays at 0."""
        d = deliveries.c
        now = self._now()
        with self._read("delivery_backlog") as conn:
            count, oldest = conn.execute(
                sa.select(sa.func.count(), sa.func.min(d.received_at)).where(d.state == "pending")
            ).one()
        since = _aware(oldest)
        age = (now - since).total_seconds() if since is not None else 0.0
        return {"pending": float(count or 0), "oldest_pending_age_seconds": max(0.0, age)}
