"""Redeliveries: asking GitHub again for deliveries missed while down."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import cast

import sqlalchemy as sa

from bot.core.errors import StoreError
from bot.store.base import StoreBase
from bot.store.rows import (
    RedeliveryOutcome,
)
from bot.store.schema import (
    REDELIVERY_OUTCOMES,
    deliveries,
    redeliveries,
    redelivery_scans,
)


class RedeliveryQueries(StoreBase):
    def unseen_guids(self, guids: Iterable[str]) -> list[str]:
        """Those of ``guids`` neither stored as deliveries nor claimed for redelivery,
        in the order given (duplicates dropped)."""
        wanted = list(dict.fromkeys(guids))
        if not wanted:
            return []
        d, r = deliveries.c, redeliveries.c
        with self._read("unseen_guids") as conn:
            known = set(
                conn.execute(sa.select(d.delivery_id).where(d.delivery_id.in_(wanted))).scalars()
            )
            known.update(conn.execute(sa.select(r.guid).where(r.guid.in_(wanted))).scalars())
        return [g for g in wanted if g not in known]

    def claim_redelivery(self, guid: str, owner: str) -> bool:
        """Claim asking GitHub to redeliver ``guid``: True for the one caller whose
        insert made the row (insert-if-absent, so concurrent processes never both win)."""
        r = redeliveries.c
        stmt = (
            self._insert(redeliveries)
            .values(guid=guid, requested_at=self._now(), requested_by=owner)
            .on_conflict_do_nothing(index_elements=[r.guid])
            .returning(r.guid)
        )
        with self._write("claim_redelivery") as conn:
            return conn.execute(stmt).first() is not None

    def settle_redelivery(self, guid: str, outcome: RedeliveryOutcome | None) -> None:
        """How the request ended; ``None`` drops the claim so that a later pass asks again."""
        r = redeliveries.c
        if outcome is not None and outcome not in REDELIVERY_OUTCOMES:
            raise StoreError(f"unknown redelivery outcome {outcome!r}")
        with self._write("settle_redelivery") as conn:
            if outcome is None:
                conn.execute(sa.delete(redeliveries).where(r.guid == guid))
            else:
                conn.execute(sa.update(redeliveries).where(r.guid == guid).values(outcome=outcome))

    def redelivery_claims(self) -> dict[str, RedeliveryOutcome | None]:
        """Every claimed guid and its outcome (for operators and tests)."""
        r = redeliveries.c
        with self._read("redelivery_claims") as conn:
            rows = conn.execute(sa.select(r.guid, r.outcome).order_by(r.requested_at, r.guid))
            return {guid: cast(RedeliveryOutcome | None, outcome) for guid, outcome in rows}

    def prune_redeliveries(self, before: datetime) -> int:
        """Forget claims made before ``before`` (older than any scan looks back)."""
        with self._write("prune_redeliveries") as conn:
            stmt = sa.delete(redeliveries).where(redeliveries.c.requested_at < before)
            return conn.execute(stmt).rowcount

    def redelivery_scan(self, name: str = "app") -> datetime | None:
        """How far back the named scan has looked: deliveries before it were handled."""
        s = redelivery_scans.c
        with self._read("redelivery_scan") as conn:
            value = conn.execute(sa.select(s.seen_until).where(s.name == name)).scalar()
        return cast(datetime | None, value)

    def set_redelivery_scan(self, seen_until: datetime, name: str = "app") -> None:
        self._upsert(
            "set_redelivery_scan",
            redelivery_scans,
            {"name": name, "seen_until": seen_until, "updated_at": self._now()},
        )
