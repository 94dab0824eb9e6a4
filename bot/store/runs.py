"""Runs: created under the quotas, claimed under a lease, released, cancelled."""

from __future__ import annotations

import dataclasses
import functools
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, Unpack
from uuid import uuid4

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from bot.core.errors import ActiveRunExists, StoreError
from bot.engine.types import DebateSpec
from bot.store.admission import Admission
from bot.store.base import StoreBase, fair_order, lease_statement
from bot.store.codec import spec_from_json, spec_to_json, to_json
from bot.store.ledger import admit, admitted_values, count_runs
from bot.store.notify import notify_work
from bot.store.rows import (
    NewRun,
    RunControl,
    RunRow,
    RunState,
)
from bot.store.schema import (
    ACTIVE_RUN_STATES,
    RUN_STATES,
    runs,
)
from bot.store.trigger import Trigger

_INSERT_RETRIES = 5
# Statements of every run, built once: building and cache-keying one cost about
# as much as running it on SQLite. Parameters by column name (the insert) or
# prefixed ``r_``.
_INSERT_RUN = sa.insert(runs).returning(*runs.c)
_RUN_CONTROL = sa.select(runs.c.lease_owner, runs.c.cancel_requested).where(
    runs.c.id == sa.bindparam("r_id")
)


def fair_pick(
    eligible: sa.ColumnElement[bool], now: datetime | sa.BindParameter[Any]
) -> sa.Select[Any]:
    """The eligible runs' ids in fair claim order (:func:`fair_order`): a run's
    turn is its place among its installation's eligible runs (oldest first) plus
    the runs the installation has held under a live lease (by any worker), so an
    installation with eight runs going waits behind one with none, even when its
    queued runs are older. Runs without an installation (the CLI's) share one
    turn order."""
    r = runs.c
    going = sa.and_(r.state == "running", r.lease_owner.is_not(None), r.lease_expires_at >= now)
    return fair_order(runs, r.id, r.installation_id, (r.created_at, r.id), eligible, going)


class Released(TypedDict, total=False):
    """The run's columns a release may set (None or absent: left as they are)."""

    outcome_kind: str | None
    error_class: str | None
    tokens_total: int | None
    cost_usd: float | None
    spec: DebateSpec | str | None
    trigger: Trigger | None


class RunQueries(StoreBase):
    def create_run(self, new: NewRun, admission: Admission | None = None) -> RunRow:
        """Queue a new run. Raises :class:`ActiveRunExists` if the issue has one,
        an :class:`AdmissionRefused` if ``admission`` is given and refuses it.

        ``admission`` (the run layer's ``Limits``: quotas, budgets) is decided in
        the insert's transaction, under per-repository (and per-installation)
        locks on PostgreSQL, so two commands at once cannot both take the last
        run or the last dollars; the admitted cap becomes the spec's
        ``max_cost_usd``.
        """
        spec_obj = new.spec if isinstance(new.spec, DebateSpec) else spec_from_json(new.spec)
        run_id = new.run_id or str(uuid4())
        if not spec_obj.seed:
            spec_obj = dataclasses.replace(spec_obj, seed=run_id)
        values = {
            "id": run_id,
            "installation_id": new.installation_id,
            "repo": new.repo,
            "issue_number": new.issue_number,
            "is_pr": new.is_pr,
            "mode": new.mode or spec_obj.mode,
            "state": "queued",
            "spec": spec_to_json(spec_obj),
            "trigger": to_json(new.trigger or Trigger()),
            "requested_by": new.requested_by,
            "attempts": 0,
            "cancel_requested": False,
            "tokens_total": 0,
            "cost_usd": 0.0,
        }
        for _ in range(_INSERT_RETRIES):
            try:
                return self._insert_run(values, spec_obj, admission)
            except StoreError as exc:
                if not isinstance(exc.__cause__, IntegrityError):
                    raise
            active = self.active_run(new.repo, new.issue_number)
            if active is not None:
                raise ActiveRunExists(active)
            if self.get_run(str(values["id"])) is not None:
                raise StoreError(f"run id {values['id']} already exists")
            # The active run finished between our insert and the lookup: retry.
        raise StoreError("create_run: gave up after repeated conflicts")

    def _insert_run(
        self, values: dict[str, Any], spec: DebateSpec, admission: Admission | None
    ) -> RunRow:
        """One try: admission decided and the run inserted in one transaction."""
        now = self._now()
        with self._errors("create_run"), self._write_turn, self.engine.begin() as conn:
            admitted: dict[str, Any] = {}
            if admission is not None:
                decision = admit(
                    conn,
                    now=now,
                    repo=str(values["repo"]),
                    installation_id=values["installation_id"],
                    requested_by=str(values["requested_by"]),
                    admission=admission,
                )
                admitted = admitted_values(spec, decision)
            row = (
                conn.execute(
                    _INSERT_RUN, {**values, **admitted, "created_at": now, "updated_at": now}
                )
                .mappings()
                .one()
            )
            notify_work(conn)
        return RunRow.from_mapping(row)

    def get_run(self, run_id: str) -> RunRow | None:
        with self._read("get_run") as conn:
            row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
        return RunRow.from_mapping(row) if row is not None else None

    def run_control(self, run_id: str) -> RunControl | None:
        """A running run's lease owner and cancel flag, checked between batches:
        two columns, not the row with its spec and trigger to decode."""
        with self._read("run_control") as conn:
            row = conn.execute(_RUN_CONTROL, {"r_id": run_id}).first()
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
        """``claim_run`` for up to ``limit`` runs in one transaction, fairly
        across installations (:func:`fair_pick`): a burst from one installation
        does not hold back another's run queued after it."""
        now = self._now()
        params = {
            "c_now": now,
            "c_until": now + timedelta(seconds=lease_s),
            "c_owner": worker_id,
            "c_limit": max(1, limit),
        }
        rows = self._run_lease(
            "claim_run", self._claim_runs_stmt, params, (runs.c.created_at, runs.c.id)
        )
        return [RunRow.from_mapping(row) for row in rows]

    @functools.cached_property
    def _claim_runs_stmt(self) -> sa.Executable:
        """claim_runs' statement, built once: every worker runs it at every poll
        and wake-up, and building (and cache-keying) it cost more than running it."""
        r = runs.c
        now = sa.bindparam("c_now", type_=r.lease_expires_at.type)
        eligible = sa.or_(
            r.state == "queued",
            sa.and_(r.state == "running", r.lease_expires_at < now),
        )
        values = {
            "state": "running",
            "lease_owner": sa.bindparam("c_owner", type_=r.lease_owner.type),
            "lease_expires_at": sa.bindparam("c_until", type_=r.lease_expires_at.type),
            "attempts": r.attempts + 1,
            "updated_at": now,
        }
        limit = sa.bindparam("c_limit", type_=sa.Integer)
        return lease_statement(runs, r.id, fair_pick(eligible, now), eligible, limit, values)

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
        **columns: Unpack[Released],
    ) -> bool:
        """Leave a run in ``state`` (final, ``waiting``, or ``queued`` to hand it
        back) and drop the lease, setting those of the run's columns given (None:
        left as they are). ``handed_back``: a draining worker
        gives the run up cleanly, so this claim does not count as a crash.
        False if the lease was lost."""
        if state not in RUN_STATES or state == "running":
            raise StoreError(f"cannot release a run into state {state!r}")
        if handed_back and state != "queued":
            raise StoreError("only a queued release is a hand-back")
        if unknown := sorted(columns.keys() - Released.__annotations__.keys()):
            raise TypeError(f"release_run() cannot set {', '.join(unknown)}")  # as Python would
        fields: dict[str, object] = {k: v for k, v in columns.items() if v is not None}
        if (spec := columns.get("spec")) is not None:
            fields["spec"] = self._spec_text(spec)
        if (trigger := columns.get("trigger")) is not None:
            fields["trigger"] = to_json(trigger)
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
            return count_runs(conn, repo, since, requested_by)

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
