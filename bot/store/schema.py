"""The database schema, defined once (SQLAlchemy Core).

The Alembic migrations in ``migrations/versions`` create exactly this; a test
compares a migrated database against this metadata.

Timestamps are stored in UTC: ``timestamptz`` on PostgreSQL, ISO text on SQLite
(see :class:`UTCDateTime`). Every timestamp written comes from the store's
clock, never from the database server, so tests can move time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

RUN_STATES = ("queued", "running", "waiting", "done", "failed", "cancelled", "aborted")
# A run in one of these states holds its issue: no second run may start there.
ACTIVE_RUN_STATES = ("queued", "running", "waiting")
DELIVERY_STATES = ("pending", "done", "ignored", "failed")
COMMENT_KINDS = ("issue", "review")
TURN_STATUSES = ("ok", "dropped")
INSTALLATION_STATES = ("active", "suspended", "removed")
CADENCES = ("weekly", "monthly")
REDELIVERY_OUTCOMES = ("requested", "refused")


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Aware UTC datetimes in and out, on every backend.

    SQLite keeps no zone, so values are normalised to UTC before binding and
    tagged as UTC when read; on PostgreSQL this is a plain ``timestamptz``.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; pass an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

deliveries = sa.Table(
    "deliveries",
    metadata,
    # X-GitHub-Delivery; redeliveries reuse it, so it is the dedupe key.
    sa.Column("delivery_id", sa.String(100), primary_key=True),
    sa.Column("event", sa.String(64), nullable=False),
    sa.Column("action", sa.String(64), nullable=True),
    sa.Column("installation_id", sa.BigInteger, nullable=True),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("received_at", UTCDateTime, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, server_default="pending"),
    sa.Column("lease_owner", sa.String(200), nullable=True),
    sa.Column("lease_expires_at", UTCDateTime, nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("error_class", sa.String(100), nullable=True),
    sa.Column("finished_at", UTCDateTime, nullable=True),
    sa.CheckConstraint(_in("state", DELIVERY_STATES), name="state"),
    # Claiming scans pending deliveries oldest first; pruning scans by age.
    sa.Index("ix_deliveries_state_received_at", "state", "received_at"),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("installation_id", sa.BigInteger, nullable=True),
    sa.Column("repo", sa.String(200), nullable=False),  # owner/name
    sa.Column("issue_number", sa.Integer, nullable=False),
    sa.Column("is_pr", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("mode", sa.String(32), nullable=False),
    sa.Column("state", sa.String(16), nullable=False, server_default="queued"),
    sa.Column("spec", sa.Text, nullable=False),  # DebateSpec as JSON (codec.py)
    # What triggered the run: comment id and kind, sender, where to reply, ...
    sa.Column("trigger", sa.Text, nullable=False, server_default="{}"),
    sa.Column("requested_by", sa.String(100), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Column("lease_owner", sa.String(200), nullable=True),
    sa.Column("lease_expires_at", UTCDateTime, nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),  # claims
    # Claims that ended in a clean hand-back (a drained worker): not crashes.
    sa.Column("handbacks", sa.Integer, nullable=False, server_default="0"),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("outcome_kind", sa.String(32), nullable=True),
    sa.Column("error_class", sa.String(100), nullable=True),
    sa.Column("tokens_total", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cost_usd", sa.Float, nullable=False, server_default="0"),
    # The estimate admitted against the budgets, held while the run is active
    # (migration 0008; docs/architecture.md, "Money").
    sa.Column("reserved_usd", sa.Float, nullable=False, server_default="0"),
    sa.CheckConstraint(_in("state", RUN_STATES), name="state"),
    # One active run per issue, enforced by the database (a partial unique
    # index; both SQLite and PostgreSQL support the WHERE clause).
    sa.Index(
        "uq_runs_active_issue",
        "repo",
        "issue_number",
        unique=True,
        sqlite_where=sa.text(_in("state", ACTIVE_RUN_STATES)),
        postgresql_where=sa.text(_in("state", ACTIVE_RUN_STATES)),
    ),
    # Claiming: queued runs and expired running leases, oldest first.
    sa.Index("ix_runs_state_created_at", "state", "created_at"),
    # Quotas: runs per repo / per user since a time; `status` lookups by issue.
    sa.Index("ix_runs_repo_created_at", "repo", "created_at"),
    sa.Index("ix_runs_requested_by_created_at", "requested_by", "created_at"),
    sa.Index("ix_runs_repo_issue_number_created_at", "repo", "issue_number", "created_at"),
)

turns = sa.Table(
    "turns",
    metadata,
    sa.Column(
        "run_id",
        sa.String(36),
        sa.ForeignKey("runs.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("turn_id", sa.String(200), primary_key=True),  # TurnKey.id()
    # Insertion order within the run; load_turns returns turns in this order.
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("phase", sa.String(16), nullable=False),
    sa.Column("round", sa.Integer, nullable=False),
    sa.Column("slot", sa.String(100), nullable=False),
    sa.Column("tier", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("drop_class", sa.String(32), nullable=True),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("cached_tokens", sa.Integer, nullable=False),
    sa.Column("latency_ms", sa.Integer, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("truncated", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.CheckConstraint(_in("status", TURN_STATUSES), name="status"),
    sa.UniqueConstraint("run_id", "seq"),
)

# The steps of a turn's tool loop, stored as they complete (bot/store/steps.py).
turn_steps = sa.Table(
    "turn_steps",
    metadata,
    sa.Column(
        "run_id",
        sa.String(36),
        sa.ForeignKey("runs.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("turn_id", sa.String(200), primary_key=True),  # TurnKey.id()
    sa.Column("n", sa.Integer, primary_key=True),  # the step, 0-based
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("final", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("body", sa.Text, nullable=False),  # StoredStep as JSON (codec.py)
    sa.Column("created_at", UTCDateTime, nullable=False),
)

comments = sa.Table(
    "comments",
    metadata,
    sa.Column(
        "run_id",
        sa.String(36),
        sa.ForeignKey("runs.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("marker", sa.String(200), primary_key=True),
    sa.Column("comment_id", sa.BigInteger, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("body_sha256", sa.String(64), nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.CheckConstraint(_in("kind", COMMENT_KINDS), name="kind"),
)

# Installations the app was removed from or suspended on (no row: active). Their
# deliveries are not processed and their runs not claimed.
installations = sa.Table(
    "installations",
    metadata,
    sa.Column("installation_id", sa.BigInteger, primary_key=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.CheckConstraint(_in("state", INSTALLATION_STATES), name="state"),
)

# Repositories whose config asks for scheduled design reviews
# (bot/service/features/schedules/handlers.py).
schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("repo", sa.String(200), primary_key=True),
    sa.Column("installation_id", sa.BigInteger, nullable=False),
    sa.Column("cadence", sa.String(16), nullable=False),
    sa.Column("scope", sa.Text, nullable=False, server_default="[]"),  # JSON list of folders
    sa.Column("next_due", UTCDateTime, nullable=False),
    sa.Column("lease_owner", sa.String(200), nullable=True),
    sa.Column("lease_expires_at", UTCDateTime, nullable=True),
    sa.Column("last_issue", sa.Integer, nullable=True),
    sa.Column("last_run", sa.String(36), nullable=True),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.CheckConstraint(_in("cadence", CADENCES), name="cadence"),
    sa.Index("ix_schedules_next_due", "next_due"),
)

# Failed deliveries this app asked GitHub to redeliver (bot/service/web/redeliver.py). The
# insert is the claim: whichever web process inserts a guid first asks, once.
# ``outcome`` is NULL while the request is in flight; ``refused``: GitHub would
# not (too old, gone), never asked again.
redeliveries = sa.Table(
    "redeliveries",
    metadata,
    sa.Column("guid", sa.String(100), primary_key=True),  # X-GitHub-Delivery
    sa.Column("requested_at", UTCDateTime, nullable=False),
    sa.Column("requested_by", sa.String(200), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=True),
    sa.CheckConstraint(_in("outcome", REDELIVERY_OUTCOMES), name="outcome"),
)

# How far back the redelivery scan has looked (one row per scan; today "app"),
# so that a restart resumes there instead of rescanning its whole window.
redelivery_scans = sa.Table(
    "redelivery_scans",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("seen_until", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# GitHub write pacing shared by all processes, per installation (bot/store/pacing.py).
github_pacing = sa.Table(
    "github_pacing",
    metadata,
    sa.Column("installation_id", sa.BigInteger, primary_key=True),
    sa.Column("next_at", UTCDateTime, nullable=False),  # the earliest next write
    sa.Column("minute_tokens", sa.Float, nullable=False),
    sa.Column("hour_tokens", sa.Float, nullable=False),
    sa.Column("tokens_at", UTCDateTime, nullable=False),  # when the buckets were counted
)


# The spend ledger (bot/store/ledger.py): one row per stored turn's model call,
# written in save_turn's transaction, keyed like the turn so a resumed run never
# counts a call twice. Not tied to runs by a foreign key: spend outlives pruning.
spend = sa.Table(
    "spend",
    metadata,
    sa.Column("run_id", sa.String(36), primary_key=True),
    sa.Column("turn_id", sa.String(200), primary_key=True),
    sa.Column("repo", sa.String(200), nullable=False),
    sa.Column("installation_id", sa.BigInteger, nullable=True),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),  # total, cached included
    sa.Column("cached_tokens", sa.Integer, nullable=False),
    sa.Column("cache_write_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("price_basis", sa.String(16), nullable=False),  # list | assumed | unknown
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Index("ix_spend_repo_created_at", "repo", "created_at"),
    sa.Index("ix_spend_installation_created_at", "installation_id", "created_at"),
    sa.Index("ix_spend_created_at", "created_at"),
)


# Model endpoints' learned limits, shared by every process (bot/store/model_limits.py).
model_limits = sa.Table(
    "model_limits",
    metadata,
    sa.Column("endpoint", sa.String(512), primary_key=True),  # "<provider> <base URL>"
    sa.Column("concurrency", sa.Float, nullable=False),  # the window: calls in flight per process
    sa.Column("decreased_at", UTCDateTime, nullable=True),  # the last back-off
    sa.Column("hold_until", UTCDateTime, nullable=True),  # no call before (a 429)
    sa.Column("updated_at", UTCDateTime, nullable=False),
)
