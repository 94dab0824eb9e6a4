"""RunStore: durable deliveries, runs, turns and posted comments.

Synchronous SQLAlchemy Core over SQLite (embedded default) or PostgreSQL
(scale-out). Every method is one short transaction and is safe to call from
several threads (the async worker calls it through ``asyncio.to_thread``).
Times come from the injected ``clock`` so tests can expire leases without
sleeping. Database failures surface as :class:`bot.errors.StoreError`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from uuid import uuid4

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from bot.debate.types import DebateSpec, DropClass, Phase, Turn, TurnKey, TurnStatus, Usage
from bot.errors import ActiveRunExists, QuotaSpent, RunNotFound, StoreError
from bot.store.codec import spec_from_json, spec_to_json, to_json
from bot.store.engine import READ_ONLY, create_engine
from bot.store.notify import notify_work
from bot.store.pacing import PacingQueries
from bot.store.reports import ReportQueries
from bot.store.rows import (
    CommentKind,
    CommentRecord,
    DeliveryRow,
    DeliveryState,
    InstallationState,
    NewDelivery,
    Quota,
    RedeliveryOutcome,
    RunControl,
    RunRow,
    RunState,
    SavedTurn,
)
from bot.store.schedules import ScheduleQueries
from bot.store.schema import (
    ACTIVE_RUN_STATES,
    COMMENT_KINDS,
    DELIVERY_STATES,
    REDELIVERY_OUTCOMES,
    RUN_STATES,
    comments,
    deliveries,
    installations,
    redeliveries,
    redelivery_scans,
    runs,
    turns,
)
from bot.store.trigger import Trigger

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Serialises concurrent `migrate` calls from several processes on PostgreSQL.
_MIGRATE_LOCK_KEY = 0x64656261  # "deba"
# Columns a worker may set when it releases a run.
_RELEASE_FIELDS = frozenset(
    {"outcome_kind", "error_class", "tokens_total", "cost_usd", "spec", "trigger"}
)
_INSERT_RETRIES = 5
# Held to the end of create_run's transaction: one quota count at a time per
# repository. The two-key form has its own key space, apart from the migrate lock's.
_QUOTA_LOCK = sa.text("SELECT pg_advisory_xact_lock(:space, hashtext(:repo))")
_QUOTA_LOCK_SPACE = 0x71756F74  # "quot"

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class RunStore(ScheduleQueries, PacingQueries, ReportQueries):
    def __init__(self, engine: Engine, *, clock: Clock | None = None) -> None:
        self._delivery_stmts: tuple[sa.Executable, sa.Executable] | None = None
        self._turn_stmts: tuple[sa.Executable, sa.Executable, sa.Executable] | None = None
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

    @classmethod
    def from_url(cls, url: str, *, clock: Clock | None = None, **engine_kwargs: Any) -> RunStore:
        """``sqlite:///path`` or ``postgresql://…`` (mapped to psycopg 3)."""
        return cls(create_engine(url, **engine_kwargs), clock=clock)

    def dispose(self) -> None:
        self.engine.dispose()

    # -- plumbing ---------------------------------------------------------------

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
            # Class name only: driver messages can quote SQL parameters.
            raise StoreError(f"{op} failed: {type(exc).__name__}") from exc

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

    # -- schema and health --------------------------------------------------------

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

    # -- deliveries -------------------------------------------------------------

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
        if self._delivery_stmts is None:
            self._delivery_stmts = self._build_delivery_stmts()
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

    def _build_delivery_stmts(self) -> tuple[sa.Executable, sa.Executable]:
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
        """``claim_delivery`` for up to ``limit`` deliveries in one transaction, oldest first."""
        now = self._now()
        d = deliveries.c
        eligible = sa.and_(
            d.state == "pending",
            sa.or_(d.lease_expires_at.is_(None), d.lease_expires_at < now),
        )
        rows = self._claim_oldest(
            "claim_delivery",
            deliveries,
            d.delivery_id,
            eligible,
            (d.received_at, d.delivery_id),
            limit=limit,
            lease_owner=worker_id,
            lease_expires_at=now + timedelta(seconds=lease_s),
            attempts=d.attempts + 1,
        )
        return [DeliveryRow.from_mapping(row) for row in rows]

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
        picked = (
            sa.select(key)
            .where(eligible)
            .order_by(*order)
            .limit(max(1, limit))
            .with_for_update(skip_locked=True)
            .cte("picked")
            .prefix_with("MATERIALIZED")
        )
        stmt = (
            sa.update(table)
            .where(key == picked.c[key.name], eligible)
            .values(**values)
            .returning(*table.c)
        )
        with self._write(op) as conn:
            rows = [dict(row) for row in conn.execute(stmt).mappings()]
        # RETURNING keeps no order.
        return sorted(rows, key=lambda row: tuple(row[c.name] for c in order))

    def finish_delivery(
        self, delivery_id: str, state: DeliveryState, error_class: str | None = None
    ) -> bool:
        """Set a delivery's state and drop its lease. ``pending`` hands it back
        (a draining worker): that claim is not counted as an attempt."""
        if state not in DELIVERY_STATES:
            raise StoreError(f"unknown delivery state {state!r}")
        with self._write("finish_delivery") as conn:
            result = conn.execute(
                sa.update(deliveries)
                .where(deliveries.c.delivery_id == delivery_id)
                .values(
                    state=state,
                    error_class=error_class,
                    lease_owner=None,
                    lease_expires_at=None,
                    finished_at=None if state == "pending" else self._now(),
                    attempts=deliveries.c.attempts - int(state == "pending"),
                )
            )
            if state == "pending":  # handed back: another worker takes it at once
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

    # -- runs -------------------------------------------------------------------

    def create_run(
        self,
        *,
        repo: str,
        issue_number: int,
        spec: DebateSpec | str,
        mode: str | None = None,
        installation_id: int | None = None,
        is_pr: bool = False,
        trigger: Trigger | None = None,
        requested_by: str = "",
        run_id: str | None = None,
        quota: Quota | None = None,
    ) -> RunRow:
        """Queue a new run. Raises :class:`ActiveRunExists` if the issue has one,
        :class:`QuotaSpent` if ``quota`` is given and spent.

        ``mode`` defaults to the spec's mode; ``run_id`` to a fresh uuid4. A
        spec with an empty ``seed`` gets the run id as its seed. The quota is
        counted in the insert's transaction, under a per-repository lock on
        PostgreSQL, so two commands at once cannot both take the last run.
        """
        spec_obj = spec if isinstance(spec, DebateSpec) else spec_from_json(spec)
        run_id = run_id or str(uuid4())
        if not spec_obj.seed:
            spec_obj = dataclasses.replace(spec_obj, seed=run_id)
        values = {
            "id": run_id,
            "installation_id": installation_id,
            "repo": repo,
            "issue_number": issue_number,
            "is_pr": is_pr,
            "mode": mode or spec_obj.mode,
            "state": "queued",
            "spec": spec_to_json(spec_obj),
            "trigger": to_json(trigger or Trigger()),
            "requested_by": requested_by,
            "attempts": 0,
            "cancel_requested": False,
            "tokens_total": 0,
            "cost_usd": 0.0,
        }
        for _ in range(_INSERT_RETRIES):
            now = self._now()
            try:
                with self._errors("create_run"), self._write_turn, self.engine.begin() as conn:
                    if quota is not None:
                        self._check_quota(conn, repo, requested_by, quota)
                    row = (
                        conn.execute(
                            sa.insert(runs)
                            .values(**values, created_at=now, updated_at=now)
                            .returning(*runs.c)
                        )
                        .mappings()
                        .one()
                    )
                    notify_work(conn)
                return RunRow.from_mapping(row)
            except StoreError as exc:
                if not isinstance(exc.__cause__, IntegrityError):
                    raise
            active = self.active_run(repo, issue_number)
            if active is not None:
                raise ActiveRunExists(active)
            if self.get_run(str(values["id"])) is not None:
                raise StoreError(f"run id {values['id']} already exists")
            # The active run finished between our insert and the lookup: retry.
        raise StoreError("create_run: gave up after repeated conflicts")

    def get_run(self, run_id: str) -> RunRow | None:
        with self._read("get_run") as conn:
            row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
        return RunRow.from_mapping(row) if row is not None else None

    def run_control(self, run_id: str) -> RunControl | None:
        """A running run's lease owner and cancel flag, checked between batches:
        two columns, not the row with its spec and trigger to decode."""
        r = runs.c
        with self._read("run_control") as conn:
            row = conn.execute(
                sa.select(r.lease_owner, r.cancel_requested).where(r.id == run_id)
            ).first()
        return RunControl(row[0], bool(row[1])) if row is not None else None

    def active_run(self, repo: str, issue_number: int) -> RunRow | None:
        """The queued, running or waiting run on an issue, if any."""
        with self._read("active_run") as conn:
            row = (
                conn.execute(
                    sa.select(runs).where(
                        runs.c.repo == repo,
                        runs.c.issue_number == issue_number,
                        runs.c.state.in_(ACTIVE_RUN_STATES),
                    )
                )
                .mappings()
                .first()
            )
        return RunRow.from_mapping(row) if row is not None else None

    def latest_run(self, repo: str, issue_number: int) -> RunRow | None:
        """The most recently created run on an issue, active or not (for `status`)."""
        with self._read("latest_run") as conn:
            row = (
                conn.execute(
                    sa.select(runs)
                    .where(runs.c.repo == repo, runs.c.issue_number == issue_number)
                    .order_by(runs.c.created_at.desc(), runs.c.id.desc())
                    .limit(1)
                )
                .mappings()
                .first()
            )
        return RunRow.from_mapping(row) if row is not None else None

    def claim_run(self, worker_id: str, lease_s: float) -> RunRow | None:
        """Lease the oldest queued run, or a running one whose lease expired (resume)."""
        return next(iter(self.claim_runs(worker_id, lease_s, 1)), None)

    def claim_runs(self, worker_id: str, lease_s: float, limit: int) -> list[RunRow]:
        """``claim_run`` for up to ``limit`` runs in one transaction, oldest first."""
        now = self._now()
        r = runs.c
        eligible = sa.or_(
            r.state == "queued",
            sa.and_(r.state == "running", r.lease_expires_at < now),
        )
        rows = self._claim_oldest(
            "claim_run",
            runs,
            r.id,
            eligible,
            (r.created_at, r.id),
            limit=limit,
            state="running",
            lease_owner=worker_id,
            lease_expires_at=now + timedelta(seconds=lease_s),
            attempts=r.attempts + 1,
            updated_at=now,
        )
        return [RunRow.from_mapping(row) for row in rows]

    def renew_lease(self, run_id: str, worker_id: str, lease_s: float) -> bool:
        """Extend the lease; False if this worker no longer holds the run."""
        now = self._now()
        values = {"lease_expires_at": now + timedelta(seconds=lease_s), "updated_at": now}
        return self._update_held("renew_lease", run_id, worker_id, values)

    def _update_held(
        self, op: str, run_id: str, worker_id: str, values: dict[str, Any], notify: bool = False
    ) -> bool:
        """Update a run this worker holds (running, under its lease); False if it
        no longer does. ``notify``: the update queued work for other workers."""
        r = runs.c
        with self._write(op) as conn:
            result = conn.execute(
                sa.update(runs)
                .where(r.id == run_id, r.lease_owner == worker_id, r.state == "running")
                .values(**values)
            )
            if notify:
                notify_work(conn)
        return result.rowcount == 1

    def release_run(
        self,
        run_id: str,
        worker_id: str,
        state: RunState,
        *,
        handed_back: bool = False,
        **fields: Any,
    ) -> bool:
        """Leave a run in ``state`` (final, ``waiting``, or ``queued`` to hand it
        back) and drop the lease. ``fields`` may set outcome_kind, error_class,
        tokens_total, cost_usd, spec, trigger. ``handed_back``: a draining worker
        gives the run up cleanly, so this claim does not count as a crash.
        False if the lease was lost."""
        if state not in RUN_STATES or state == "running":
            raise StoreError(f"cannot release a run into state {state!r}")
        if handed_back and state != "queued":
            raise StoreError("only a queued release is a hand-back")
        unknown = set(fields) - _RELEASE_FIELDS
        if unknown:
            raise StoreError(f"release_run: unknown fields {sorted(unknown)}")
        if "spec" in fields:
            fields["spec"] = self._spec_text(fields["spec"])
        if "trigger" in fields:
            fields["trigger"] = to_json(fields["trigger"])
        values = {
            "state": state,
            "lease_owner": None,
            "lease_expires_at": None,
            "updated_at": self._now(),
            "handbacks": runs.c.handbacks + int(handed_back),
            **fields,
        }
        # Queued again (handed back): another worker resumes it at once.
        return self._update_held("release_run", run_id, worker_id, values, state == "queued")

    def defer_run(self, run_id: str, worker_id: str, until: datetime) -> bool:
        """Hand a running run back until ``until`` (GitHub rate-limited its
        installation past then): unheld, its lease expiring then, when any worker
        claims it as it would a lapsed one. A hand-back, so not counted as a crash.
        False if the lease was lost."""
        values = {
            "lease_owner": None,
            "lease_expires_at": until,
            "updated_at": self._now(),
            "handbacks": runs.c.handbacks + 1,
        }
        return self._update_held("defer_run", run_id, worker_id, values)

    def request_cancel(self, run_id: str) -> RunRow | None:
        """Flag an active run for cancellation; None if it is not active.

        A ``waiting`` run has no worker to notice the flag, so it is queued
        again: the worker that claims it sees ``cancel_requested`` and ends it.
        """
        with self._write("request_cancel") as conn:
            row = (
                conn.execute(
                    sa.update(runs)
                    .where(runs.c.id == run_id, runs.c.state.in_(ACTIVE_RUN_STATES))
                    .values(
                        cancel_requested=True,
                        state=sa.case((runs.c.state == "waiting", "queued"), else_=runs.c.state),
                        attempts=sa.case((runs.c.state == "waiting", 0), else_=runs.c.attempts),
                        handbacks=sa.case((runs.c.state == "waiting", 0), else_=runs.c.handbacks),
                        updated_at=self._now(),
                    )
                    .returning(*runs.c)
                )
                .mappings()
                .first()
            )
            notify_work(conn)  # a waiting run was queued again: a worker ends it
        return RunRow.from_mapping(row) if row is not None else None

    # -- installations -----------------------------------------------------------

    def set_installation_state(self, installation_id: int, state: InstallationState) -> None:
        self._upsert(
            "set_installation_state",
            installations,
            {"installation_id": installation_id, "state": state, "updated_at": self._now()},
        )

    def installation_state(self, installation_id: int) -> InstallationState:
        i = installations.c
        with self._read("installation_state") as conn:
            state = conn.execute(
                sa.select(i.state).where(i.installation_id == installation_id)
            ).scalar()
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

    def update_spec(self, run_id: str, spec: DebateSpec | str) -> bool:
        """Replace an active run's spec (e.g. `/debate decide` adds a decision)."""
        with self._write("update_spec") as conn:
            result = conn.execute(
                sa.update(runs)
                .where(runs.c.id == run_id, runs.c.state.in_(ACTIVE_RUN_STATES))
                .values(spec=self._spec_text(spec), updated_at=self._now())
            )
        return result.rowcount == 1

    def requeue(self, run_id: str, spec: DebateSpec | str | None = None) -> bool:
        """Move a waiting run back to queued, optionally replacing its spec in
        the same transaction. False if the run was not waiting.

        ``attempts`` restarts: it counts crashes of one stretch of work, and a
        proposal may wait for many decisions."""
        values: dict[str, Any] = {
            "state": "queued",
            "attempts": 0,
            "handbacks": 0,
            "updated_at": self._now(),
        }
        if spec is not None:
            values["spec"] = self._spec_text(spec)
        with self._write("requeue") as conn:
            result = conn.execute(
                sa.update(runs)
                .where(runs.c.id == run_id, runs.c.state == "waiting")
                .values(**values)
            )
            notify_work(conn)
        return result.rowcount == 1

    @staticmethod
    def _spec_text(spec: DebateSpec | str) -> str:
        # Decoding a given JSON string validates it before it is stored.
        return spec_to_json(spec if isinstance(spec, DebateSpec) else spec_from_json(spec))

    def quota_counts(self, repo: str, since: datetime, requested_by: str) -> tuple[int, int]:
        """Runs created at or after ``since`` in ``repo``: all of them, and those
        ``requested_by`` asked for. One query for both quotas."""
        with self._read("quota_counts") as conn:
            return self._quota_counts(conn, repo, since, requested_by)

    @staticmethod
    def _quota_counts(
        conn: Connection, repo: str, since: datetime, requested_by: str
    ) -> tuple[int, int]:
        r = runs.c
        mine = sa.func.count().filter(r.requested_by == requested_by)
        stmt = sa.select(sa.func.count(), mine).where(r.created_at >= since, r.repo == repo)
        total, own = conn.execute(stmt).one()
        return int(total), int(own)

    def _check_quota(self, conn: Connection, repo: str, requested_by: str, quota: Quota) -> None:
        if self._dialect == "postgresql":  # SQLite: BEGIN IMMEDIATE already serialises
            conn.execute(_QUOTA_LOCK, {"space": _QUOTA_LOCK_SPACE, "repo": repo})
        scope = quota.spent(*self._quota_counts(conn, repo, quota.since, requested_by))
        if scope is not None:
            raise QuotaSpent(scope)

    def counts_by_state(self) -> dict[str, int]:
        """Runs per state, every state present (for metrics gauges)."""
        counts = dict.fromkeys(RUN_STATES, 0)
        with self._read("counts_by_state") as conn:
            rows = conn.execute(sa.select(runs.c.state, sa.func.count()).group_by(runs.c.state))
            counts.update({state: n for state, n in rows})
        return counts

    def run_health(self) -> dict[str, float]:
        """What an operator alerts on, read at scrape time: how long the longest
        queued run has waited since it was (last) queued (a run handed back or
        decided on waits from then), running runs whose lease lapsed (their worker
        died; another resumes them), and active runs already on a second or later
        attempt."""
        r = runs.c
        now = self._now()
        with self._read("run_health") as conn:
            oldest = conn.execute(
                sa.select(sa.func.min(r.updated_at)).where(r.state == "queued")
            ).scalar()
            expired = conn.execute(
                sa.select(sa.func.count()).where(r.state == "running", r.lease_expires_at < now)
            ).scalar()
            resumed = conn.execute(
                sa.select(sa.func.count()).where(r.state.in_(ACTIVE_RUN_STATES), r.attempts > 1)
            ).scalar()
        if isinstance(oldest, str):  # SQLite hands the aggregate back as text
            oldest = datetime.fromisoformat(oldest).replace(tzinfo=UTC)
        age = (now - oldest).total_seconds() if isinstance(oldest, datetime) else 0.0
        return {
            "oldest_queued_age_seconds": max(0.0, age),
            "expired_leases": float(expired or 0),
            "resumed_active": float(resumed or 0),
        }

    # -- turns ------------------------------------------------------------------

    def save_turn(self, run_id: str, turn: Turn) -> SavedTurn:
        """Persist a finished turn; first write wins (``new`` is False if a turn
        with the same key was already saved). A new turn's tokens and cost are
        added to the run's totals in the same transaction, which also reads the
        run's lease owner and cancel flag: the driver's check between batches,
        for free."""
        if self._turn_stmts is None:
            self._turn_stmts = self._build_turn_stmts()
        lock_run, insert, add_usage = self._turn_stmts
        usage = turn.usage
        row = {
            "run_id": run_id,
            "turn_id": turn.key.id(),
            "phase": turn.key.phase,
            "round": turn.key.round,
            "slot": turn.key.slot,
            "tier": turn.key.tier,
            "status": turn.status,
            "drop_class": turn.drop_class,
            "model": turn.model,
            "text": turn.text,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens,
            "latency_ms": usage.latency_ms,
            "cost_usd": usage.cost_usd,
            "truncated": turn.truncated,
            "created_at": self._now(),
        }
        with self._write("save_turn") as conn:
            # Lock the run row first: concurrent saves for one run then take
            # turns computing the next seq (SQLite's BEGIN IMMEDIATE already
            # serialises writers; FOR UPDATE is not rendered there).
            locked = conn.execute(lock_run, {"r_id": run_id}).first()
            if locked is None:
                raise RunNotFound(f"save_turn: no run {run_id}")
            control = RunControl(locked[0], bool(locked[1]))
            if conn.execute(insert, row).first() is None:
                return SavedTurn(False, control)
            conn.execute(
                add_usage,
                {
                    "r_id": run_id,
                    "r_tokens": usage.input_tokens + usage.output_tokens,
                    "r_cost": usage.cost_usd,
                },
            )
        return SavedTurn(True, control)

    def _build_turn_stmts(self) -> tuple[sa.Executable, sa.Executable, sa.Executable]:
        """save_turn's statements, built once: a turn is saved for every model
        call, and building (and cache-keying) them each time cost more than
        running them."""
        t = turns.c
        run_id: sa.BindParameter[str] = sa.bindparam("run_id")
        next_seq = (
            sa.select(sa.func.coalesce(sa.func.max(t.seq), 0) + 1)
            .where(t.run_id == run_id)
            .scalar_subquery()
        )
        values: dict[str, sa.BindParameter[Any]] = {
            c.name: sa.bindparam(c.name) for c in turns.c if c.name != "seq"
        }
        insert = (
            self._insert(turns)
            .values(**values, seq=next_seq)
            .on_conflict_do_nothing(index_elements=[t.run_id, t.turn_id])
            .returning(t.turn_id)
        )
        r_id: sa.BindParameter[str] = sa.bindparam("r_id")
        lock_run = (
            sa.select(runs.c.lease_owner, runs.c.cancel_requested)
            .where(runs.c.id == r_id)
            .with_for_update()
        )
        add_usage = (
            sa.update(runs)
            .where(runs.c.id == r_id)
            .values(
                tokens_total=runs.c.tokens_total + sa.bindparam("r_tokens"),
                cost_usd=runs.c.cost_usd + sa.bindparam("r_cost"),
            )
        )
        return lock_run, insert, add_usage

    def load_turns(self, run_id: str) -> list[Turn]:
        """Every saved turn of a run, in the order they were saved."""
        with self._read("load_turns") as conn:
            rows = conn.execute(
                sa.select(turns).where(turns.c.run_id == run_id).order_by(turns.c.seq)
            ).mappings()
            return [_turn_from_row(row) for row in rows]

    # -- comments ---------------------------------------------------------------

    def comment_id(self, run_id: str, marker: str) -> CommentRecord | None:
        with self._read("comment_id") as conn:
            row = conn.execute(
                sa.select(comments.c.comment_id, comments.c.kind, comments.c.body_sha256).where(
                    comments.c.run_id == run_id, comments.c.marker == marker
                )
            ).first()
        if row is None:
            return None
        return CommentRecord(int(row[0]), cast(CommentKind, row[1]), row[2])

    def record_comment(
        self, run_id: str, marker: str, comment_id: int, kind: CommentKind, body_sha256: str
    ) -> None:
        """Remember (or update) the comment posted for ``marker`` in a run."""
        if kind not in COMMENT_KINDS:
            raise StoreError(f"unknown comment kind {kind!r}")
        now = self._now()
        stmt = self._insert(comments).values(
            run_id=run_id,
            marker=marker,
            comment_id=comment_id,
            kind=kind,
            body_sha256=body_sha256,
            updated_at=now,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[comments.c.run_id, comments.c.marker],
            set_={
                "comment_id": stmt.excluded.comment_id,
                "kind": stmt.excluded.kind,
                "body_sha256": stmt.excluded.body_sha256,
                "updated_at": stmt.excluded.updated_at,
            },
        )
        with self._write("record_comment") as conn:
            conn.execute(stmt)

    # -- redeliveries -------------------------------------------------------------

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


def _turn_from_row(row: Mapping[Any, Any]) -> Turn:
    return Turn(
        key=TurnKey(
            phase=cast(Phase, row["phase"]),
            round=row["round"],
            slot=row["slot"],
            tier=row["tier"],
        ),
        text=row["text"],
        model=row["model"],
        usage=Usage(
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cached_tokens=row["cached_tokens"],
            latency_ms=row["latency_ms"],
            cost_usd=float(row["cost_usd"]),
        ),
        status=cast(TurnStatus, row["status"]),
        drop_class=cast(DropClass | None, row["drop_class"]),
        truncated=bool(row["truncated"]),
    )
