"""GitHub write pacing shared by every process, per installation (PostgreSQL).

An aggregate of ``RunStore`` on the shared base (bot/store/base.py). Each
content-creating request first reserves a slot here, in one transaction that
locks the installation's row, so however many workers run, an installation's
writes stay at least ``interval_s`` apart and within GitHub's secondary limits
(80 a minute, 500 an hour). Two token buckets hold the limits: a bucket of
capacity C refilled at rate r lets through at most C + r·T writes in any window
T, so half of each limit as capacity and half as refill keeps every window of a
minute (or an hour) within the limit.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from bot.store.base import StoreBase
from bot.store.rows import WriteSlot
from bot.store.schema import github_pacing

# (capacity, seconds for the bucket to refill completely): see the module docstring.
PER_MINUTE: Final = (40.0, 60.0)
PER_HOUR: Final = (250.0, 3600.0)


def _refilled(tokens: float, since: datetime, at: datetime, bucket: tuple[float, float]) -> float:
    capacity, period = bucket
    return min(capacity, tokens + (at - since).total_seconds() * capacity / period)


def _ready_at(tokens: float, at: datetime, bucket: tuple[float, float]) -> datetime:
    """When the bucket, holding ``tokens`` at ``at``, next holds a whole token."""
    if tokens >= 1.0:
        return at
    capacity, period = bucket
    return at + timedelta(seconds=(1.0 - tokens) * period / capacity)


class PacingQueries(StoreBase):
    def _pacing_row(self, conn: Connection, installation_id: int, now: datetime) -> None:
        """The installation's row, created with full buckets if it has none."""
        conn.execute(
            self._insert(github_pacing)
            .values(
                installation_id=installation_id,
                next_at=now,
                minute_tokens=PER_MINUTE[0],
                hour_tokens=PER_HOUR[0],
                tokens_at=now,
            )
            .on_conflict_do_nothing(index_elements=[github_pacing.c.installation_id])
        )

    def reserve_write(
        self, installation_id: int, interval_s: float, max_wait_s: float | None = None
    ) -> WriteSlot:
        """Reserve the installation's next write slot: the seconds to wait, and the
        next slot after it. A slot more than ``max_wait_s`` away (the installation
        is held, see ``hold_writes``) is not taken: the wait comes back, and
        ``next_at`` as it stands."""
        p = github_pacing.c
        now = self._now()
        with self._write("reserve_write") as conn:
            self._pacing_row(conn, installation_id, now)
            row = conn.execute(
                sa.select(github_pacing)
                .where(p.installation_id == installation_id)
                .with_for_update()
            ).one()
            # Read again now the row is ours: another worker may have held it for
            # a while, and a wait counted from before that would send late.
            now = self._now()
            next_at: datetime = row.next_at
            counted_at: datetime = row.tokens_at
            slot = max(now, next_at)
            minute = _refilled(float(row.minute_tokens), counted_at, slot, PER_MINUTE)
            hour = _refilled(float(row.hour_tokens), counted_at, slot, PER_HOUR)
            later = max(_ready_at(minute, slot, PER_MINUTE), _ready_at(hour, slot, PER_HOUR))
            if later > slot:
                minute = _refilled(minute, slot, later, PER_MINUTE)
                hour = _refilled(hour, slot, later, PER_HOUR)
                slot = later
            if max_wait_s is not None and (slot - now).total_seconds() > max_wait_s:
                return WriteSlot((slot - now).total_seconds(), next_at)
            following = slot + timedelta(seconds=max(0.0, interval_s))
            conn.execute(
                sa.update(github_pacing)
                .where(p.installation_id == installation_id)
                .values(
                    next_at=following,
                    minute_tokens=minute - 1.0,
                    hour_tokens=hour - 1.0,
                    tokens_at=slot,
                )
            )
        return WriteSlot((slot - now).total_seconds(), following)

    def hold_writes(self, installation_id: int, until: datetime) -> None:
        """GitHub rate-limited the installation until ``until``: no process's next
        write slot comes before then."""
        p = github_pacing.c
        with self._write("hold_writes") as conn:
            self._pacing_row(conn, installation_id, self._now())
            conn.execute(
                sa.update(github_pacing)
                .where(p.installation_id == installation_id, p.next_at < until)
                .values(next_at=until)
            )

    def extend_write_slot(self, installation_id: int, next_at: datetime, late_s: float) -> bool:
        """A writer woke ``late_s`` after its slot (a busy event loop): move the
        installation's next slot back as much, unless a write was reserved after
        its own (``next_at`` moved on), which was counted from the slot it missed:
        then False, and it must reserve again rather than send now."""
        p = github_pacing.c
        with self._write("extend_write_slot") as conn:
            moved = conn.execute(
                sa.update(github_pacing)
                .where(p.installation_id == installation_id, p.next_at == next_at)
                .values(next_at=next_at + timedelta(seconds=max(0.0, late_s)))
            )
        return moved.rowcount == 1
