"""The shared base of the store's aggregates: engine, clock, transactions, errors."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from bot.core.errors import StoreError
from bot.store.engine import READ_ONLY, store_failure

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


# Calls at once on a pool without a bound (max_overflow=-1): about what the
# service's runs and deliveries ask of it at a time.
UNBOUNDED_POOL_CALLS = 64


class StoreBase:
    """What every aggregate's queries share: one engine, one clock, and
    transactions whose database failures surface as :class:`StoreError`."""

    def __init__(self, engine: Engine, *, clock: Clock | None = None) -> None:
        self.engine = engine
        self._clock = clock or _utcnow
        self._dialect = engine.dialect.name
        # SQLite takes one writer at a time. Its busy handler waits by sleeping
        # in growing steps (up to 100 ms), so threads of one process racing for
        # the lock wait far longer than the writes take: queue them here instead.
        # busy_timeout still covers other processes on the same file.
        self._write_turn: AbstractContextManager[Any] = (
            threading.RLock() if self._dialect == "sqlite" else nullcontext()
        )

    @property
    def local(self) -> bool:
        """A file on this machine (SQLite): async callers run its calls on the
        event loop (``bot.core.aio.store_call``)."""
        return self._dialect == "sqlite"

    @property
    def parallel_calls(self) -> int:
        """How many calls the store serves at once: SQLite writes one at a time
        (and its reads are short), PostgreSQL as many as its pool holds."""
        pool = self.engine.pool
        size = getattr(pool, "size", None)
        if self._dialect == "sqlite" or not callable(size):
            return 1
        overflow = int(getattr(pool, "_max_overflow", 0))  # QueuePool's; -1: unbounded
        return UNBOUNDED_POOL_CALLS if overflow < 0 else max(1, int(size()) + overflow)

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise StoreError("the store clock must return aware datetimes")
        return now.astimezone(UTC)

    @contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except SQLAlchemyError as exc:
            raise store_failure(op, exc) from exc

    @contextmanager
    def _write(self, op: str) -> Iterator[Connection]:
        with self._errors(op), self._write_turn, self.engine.begin() as conn:
            yield conn

    @contextmanager
    def _read(self, op: str) -> Iterator[Connection]:
        with self._errors(op), self.engine.connect() as conn:
            conn.execution_options(**{READ_ONLY: True})
            with conn.begin():
                yield conn

    def _insert(self, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
        if self._dialect == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    def _upsert(self, op: str, table: sa.Table, values: Mapping[str, Any]) -> None:
        """Insert ``values``, or update every other column of the row with the same
        primary key."""
        (key,) = table.primary_key.columns
        stmt = (
            self._insert(table)
            .values(**values)
            .on_conflict_do_update(
                index_elements=[key], set_={k: v for k, v in values.items() if k != key.name}
            )
        )
        with self._write(op) as conn:
            conn.execute(stmt)

    def _claim_oldest(
        self,
        op: str,
        table: sa.Table,
        key: sa.Column[Any],
        eligible: sa.ColumnElement[bool],
        order: tuple[sa.Column[Any], ...],
        *,
        limit: int = 1,
        **values: Any,
    ) -> list[dict[str, Any]]:
        """Lease the ``limit`` oldest eligible rows in ONE atomic statement, oldest
        first: ``WITH picked AS MATERIALIZED (SELECT … FOR UPDATE SKIP LOCKED)
        UPDATE … FROM picked RETURNING``. Concurrent workers on PostgreSQL skip
        each other's rows; on SQLite the statement runs under the database write
        lock (FOR UPDATE is not rendered there). Materialized, because PostgreSQL
        may run a plain ``IN (subquery)`` more than once, and with SKIP LOCKED
        each run can pick other rows: more than ``limit`` would be claimed.
        A busy worker claims many at once: one transaction, not one per row."""
        picked = sa.select(key).where(eligible).order_by(*order)
        stmt = lease_statement(table, key, picked, eligible, max(1, limit), values)
        return self._run_lease(op, stmt, {}, order)

    def _run_lease(
        self,
        op: str,
        stmt: sa.Executable,
        params: dict[str, Any],
        order: tuple[sa.Column[Any], ...],
    ) -> list[dict[str, Any]]:
        """Run a ``lease_statement``; the leased rows, sorted by ``order``."""
        with self._write(op) as conn:
            rows = [dict(row) for row in conn.execute(stmt, params).mappings()]
        # RETURNING keeps no order.
        return sorted(rows, key=lambda row: tuple(row[c.name] for c in order))


def lease_statement(
    table: sa.Table,
    key: sa.Column[Any],
    picked: sa.Select[Any],
    eligible: sa.ColumnElement[bool],
    limit: int | sa.BindParameter[int],
    values: dict[str, Any],
) -> sa.Executable:
    """``_claim_oldest``'s statement: lease (set ``values`` on) the first ``limit``
    rows ``picked`` (a SELECT of ``key`` in claim order) lists, still eligible."""
    cte = (
        picked.limit(limit)
        .with_for_update(skip_locked=True, of=table)
        .cte("picked")
        .prefix_with("MATERIALIZED")
    )
    return (
        sa.update(table)
        .where(key == cte.c[key.name], eligible)
        .values(**values)
        .returning(*table.c)
    )


def fair_order(
    table: sa.Table,
    key: sa.Column[Any],
    group: sa.Column[Any],
    order: tuple[sa.Column[Any], ...],
    eligible: sa.ColumnElement[bool],
    going: sa.ColumnElement[bool],
) -> sa.Select[Any]:
    """``key`` of the ``eligible`` rows in fair claim order across ``group``s (the
    installations): by each row's turn, its place among its group's eligible rows
    (``order``: oldest first) plus the rows its group has ``going`` (leased and
    live, by any worker), then by ``order``. One group's burst is taken one row
    per turn beside every other group's, and within a group oldest first.

    PostgreSQL refuses FOR UPDATE beside a window function, so the turns are
    ranked in a subquery and joined back to ``table``, which alone is locked
    (``lease_statement``: ``FOR UPDATE OF`` it, ``SKIP LOCKED``): rows a concurrent
    claimer holds are skipped before the LIMIT, as in a plain oldest-first claim."""
    held = (
        sa.select(group.label("grp"), sa.func.count().label("n"))
        .where(going)
        .group_by(group)
        .subquery("held")
    )
    place = sa.func.row_number().over(partition_by=group, order_by=order)
    ranked = (
        sa.select(key.label("key"), (place + sa.func.coalesce(held.c.n, 0)).label("turn"))
        .select_from(table.outerjoin(held, group.is_not_distinct_from(held.c.grp)))
        .where(eligible)
        .subquery("ranked")
    )
    return (
        sa.select(key)
        .join(ranked, ranked.c.key == key)
        .where(eligible)
        .order_by(ranked.c.turn, *order)
    )
