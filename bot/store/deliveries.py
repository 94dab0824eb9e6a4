"""Webhook deliveries: recorded by the route, claimed and finished by workers."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime, timedelta

import sqlalchemy as sa

from bot.core.errors import StoreError
from bot.store.base import StoreBase, fair_order, lease_statement
from bot.store.notify import notify_work
from bot.store.rows import (
    DeliveryRow,
    DeliveryState,
    NewDelivery,
)
from bot.store.schema import (
    DELIVERY_STATES,
    deliveries,
)

# Run for every delivery taken in: built once. ``d_back`` is 1 when the delivery
# is handed back (that claim is not counted as an attempt).
_FINISH_DELIVERY = (
    sa.update(deliveries)
    .where(deliveries.c.delivery_id == sa.bindparam("d_id"))
    .values(
        state=sa.bindparam("d_state", type_=deliveries.c.state.type),
        error_class=sa.bindparam("d_error", type_=deliveries.c.error_class.type),
        lease_owner=None,
        lease_expires_at=None,
        finished_at=sa.bindparam("d_finished", type_=deliveries.c.finished_at.type),
        attempts=deliveries.c.attempts - sa.bindparam("d_back", type_=sa.Integer),
    )
)


class DeliveryQueries(StoreBase):
    def record_delivery(
        self,
        delivery_id: str,
        event: str,
        action: str | None,
        installation_id: int | None,
        payload: bytes | str,
    ) -> bool:
        """Persist a webhook delivery; False if this delivery id is already known.

        Exception: a redelivery of a delivery that *failed* puts it back to
        pending and returns True, so "Redeliver" in GitHub's UI retries it.
        """
        return self.record_deliveries(
            [NewDelivery(delivery_id, event, action, installation_id, payload)]
        )[0]

    def record_deliveries(self, items: Sequence[NewDelivery]) -> list[bool]:
        """``record_delivery`` for many deliveries in ONE transaction (group commit:
        the webhook route batches concurrent deliveries so each pays a fraction of
        a commit). Statements are built once per store; only parameters change."""
        insert, retry = self._delivery_stmts
        now = self._now()
        rows = []
        for item in items:
            payload = item.payload
            try:
                text = payload.decode("utf-8") if isinstance(payload, bytes) else payload
            except UnicodeDecodeError:
                raise StoreError("record_delivery: payload is not UTF-8") from None
            rows.append({**item._asdict(), "payload": text, "received_at": now})
        with self._write("record_delivery") as conn:
            # One multi-row INSERT … ON CONFLICT DO NOTHING RETURNING: the ids it
            # returns are the new ones; only the rest need the (rare) retry check.
            inserted = {r[0] for r in conn.execute(insert, rows)}
            notify_work(conn)
            results: list[bool] = []
            seen: set[str] = set()
            for row in rows:
                delivery_id = row["delivery_id"]
                if delivery_id in seen:  # the same id twice in one batch
                    results.append(False)
                elif delivery_id in inserted:
                    results.append(True)
                else:
                    params = {"d_id": delivery_id, "d_payload": row["payload"]}
                    results.append(conn.execute(retry, params).rowcount == 1)
                seen.add(delivery_id)
        return results

    @functools.cached_property
    def _delivery_stmts(self) -> tuple[sa.Executable, sa.Executable]:
        d = deliveries.c
        insert = (
            self._insert(deliveries)
            .values(
                delivery_id=sa.bindparam("delivery_id"),
                event=sa.bindparam("event"),
                action=sa.bindparam("action"),
                installation_id=sa.bindparam("installation_id"),
                payload=sa.bindparam("payload"),
                received_at=sa.bindparam("received_at"),
                state="pending",
                attempts=0,
            )
            .on_conflict_do_nothing(index_elements=[d.delivery_id])
            .returning(d.delivery_id)
        )
        retry = (
            sa.update(deliveries)
            .where(d.delivery_id == sa.bindparam("d_id"), d.state == "failed")
            .values(
                state="pending",
                payload=sa.bindparam("d_payload"),
                lease_owner=None,
                lease_expires_at=None,
                error_class=None,
                finished_at=None,
            )
        )
        return insert, retry

    def claim_delivery(self, worker_id: str, lease_s: float) -> DeliveryRow | None:
        """Lease the oldest pending delivery that nobody holds (or whose lease expired)."""
        return next(iter(self.claim_deliveries(worker_id, lease_s, 1)), None)

    def claim_deliveries(self, worker_id: str, lease_s: float, limit: int) -> list[DeliveryRow]:
        """``claim_delivery`` for up to ``limit`` deliveries in one transaction,
        fairly across installations (``fair_order``: each installation's oldest
        first, by turn), so one installation's burst of webhooks, each waiting its
        installation's paced write, does not hold the intake slots another
        installation's delivery needs. Returned oldest first."""
        now = self._now()
        params = {
            "c_now": now,
            "c_until": now + timedelta(seconds=lease_s),
            "c_owner": worker_id,
            "c_limit": max(1, limit),
        }
        d = deliveries.c
        rows = self._run_lease(
            "claim_delivery", self._claim_deliveries_stmt, params, (d.received_at, d.delivery_id)
        )
        return [DeliveryRow.from_mapping(row) for row in rows]

    @functools.cached_property
    def _claim_deliveries_stmt(self) -> sa.Executable:
        """claim_deliveries' statement, built once (every poll and wake-up runs it)."""
        d = deliveries.c
        now = sa.bindparam("c_now", type_=d.lease_expires_at.type)
        eligible = sa.and_(
            d.state == "pending",
            sa.or_(d.lease_expires_at.is_(None), d.lease_expires_at < now),
        )
        going = sa.and_(d.state == "pending", d.lease_owner.is_not(None), d.lease_expires_at >= now)
        order = (d.received_at, d.delivery_id)
        picked = fair_order(deliveries, d.delivery_id, d.installation_id, order, eligible, going)
        values = {
            "lease_owner": sa.bindparam("c_owner", type_=d.lease_owner.type),
            "lease_expires_at": sa.bindparam("c_until", type_=d.lease_expires_at.type),
            "attempts": d.attempts + 1,
        }
        limit = sa.bindparam("c_limit", type_=sa.Integer)
        return lease_statement(deliveries, d.delivery_id, picked, eligible, limit, values)

    def finish_delivery(
        self, delivery_id: str, state: DeliveryState, error_class: str | None = None
    ) -> bool:
        """Set a delivery's state and drop its lease. ``pending`` hands it back
        (a draining worker): that claim is not counted as an attempt."""
        if state not in DELIVERY_STATES:
            raise StoreError(f"unknown delivery state {state!r}")
        handed_back = state == "pending"
        with self._write("finish_delivery") as conn:
            result = conn.execute(
                _FINISH_DELIVERY,
                {
                    "d_id": delivery_id,
                    "d_state": state,
                    "d_error": error_class,
                    "d_finished": None if handed_back else self._now(),
                    "d_back": int(handed_back),
                },
            )
            if handed_back:  # another worker takes it at once
                notify_work(conn)
        return result.rowcount == 1

    def get_delivery(self, delivery_id: str) -> DeliveryRow | None:
        with self._read("get_delivery") as conn:
            row = (
                conn.execute(sa.select(deliveries).where(deliveries.c.delivery_id == delivery_id))
                .mappings()
                .first()
            )
        return DeliveryRow.from_mapping(row) if row is not None else None

    def prune_deliveries(self, before: datetime) -> int:
        """Delete finished deliveries received before ``before``; returns how many."""
        with self._write("prune_deliveries") as conn:
            result = conn.execute(
                sa.delete(deliveries).where(
                    deliveries.c.state != "pending", deliveries.c.received_at < before
                )
            )
        return result.rowcount

    def delivery_counts_by_state(self) -> dict[str, int]:
        counts = dict.fromkeys(DELIVERY_STATES, 0)
        with self._read("delivery_counts_by_state") as conn:
            rows = conn.execute(
                sa.select(deliveries.c.state, sa.func.count()).group_by(deliveries.c.state)
            )
            counts.update({state: n for state, n in rows})
        return counts
