"""Installations: their state, and ending their work when they go."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import sqlalchemy as sa

from bot.store.base import StoreBase
from bot.store.rows import (
    InstallationState,
)
from bot.store.schema import (
    ACTIVE_RUN_STATES,
    deliveries,
    installations,
    runs,
)

# Read for every delivery taken in: built once (building and cache-keying a
# statement cost about as much as running it on SQLite).
_STATE = sa.select(installations.c.state).where(
    installations.c.installation_id == sa.bindparam("i_id")
)


class InstallationQueries(StoreBase):
    def set_installation_state(self, installation_id: int, state: InstallationState) -> None:
        self._upsert(
            "set_installation_state",
            installations,
            {"installation_id": installation_id, "state": state, "updated_at": self._now()},
        )

    def installation_state(self, installation_id: int) -> InstallationState:
        with self._read("installation_state") as conn:
            state = conn.execute(_STATE, {"i_id": installation_id}).scalar()
        return cast(InstallationState, state or "active")

    def end_installation_runs(
        self, installation_id: int, error_class: str, *, repos: Sequence[str] | None = None
    ) -> int:
        """Cancel the installation's active runs (those in ``repos`` only, if given).

        Nothing may be posted for them any more, so they end here with their
        leases dropped; a worker driving one loses its lease at its next check
        and stops without calling GitHub. Returns how many ended."""
        r = runs.c
        where = [r.installation_id == installation_id, r.state.in_(ACTIVE_RUN_STATES)]
        if repos is not None:
            where.append(sa.func.lower(r.repo).in_([name.lower() for name in repos]))
        stmt = (
            sa.update(runs)
            .where(*where)
            .values(
                state="cancelled",
                error_class=error_class,
                lease_owner=None,
                lease_expires_at=None,
                updated_at=self._now(),
            )
        )
        with self._write("end_installation_runs") as conn:
            return conn.execute(stmt).rowcount

    def drop_installation_deliveries(
        self, installation_id: int, error_class: str, *, keep: str = ""
    ) -> int:
        """Mark the installation's pending deliveries (all but ``keep``) ignored."""
        d = deliveries.c
        now = self._now()
        stmt = (
            sa.update(deliveries)
            .where(
                d.installation_id == installation_id,
                d.state == "pending",
                d.delivery_id != keep,
            )
            .values(
                state="ignored",
                error_class=error_class,
                lease_owner=None,
                lease_expires_at=None,
                finished_at=now,
            )
        )
        with self._write("drop_installation_deliveries") as conn:
            return conn.execute(stmt).rowcount
