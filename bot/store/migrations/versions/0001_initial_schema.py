"""Initial schema: deliveries, runs, turns, comments.

Revision ID: 0001
Revises:
Create Date: 2026-01-01

Frozen copy of bot/store/schema.py at this revision (migrations never import
the live schema); tests/unit/store/test_store.py checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)
ACTIVE = sa.text("state IN ('queued', 'running', 'waiting')")


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("delivery_id", sa.String(100), nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=True),
        sa.Column("installation_id", sa.BigInteger(), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("received_at", TS, nullable=False),
        sa.Column("state", sa.String(16), server_default="pending", nullable=False),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("lease_expires_at", TS, nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error_class", sa.String(100), nullable=True),
        sa.Column("finished_at", TS, nullable=True),
        sa.CheckConstraint(
            "state IN ('pending', 'done', 'ignored', 'failed')", name="ck_deliveries_state"
        ),
        sa.PrimaryKeyConstraint("delivery_id", name="pk_deliveries"),
    )
    op.create_index("ix_deliveries_state_received_at", "deliveries", ["state", "received_at"])

    op.create_table(
        "runs",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("installation_id", sa.BigInteger(), nullable=True),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("issue_number", sa.Integer(), nullable=False),
        sa.Column("is_pr", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("mode", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), server_default="queued", nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("trigger", sa.Text(), server_default="{}", nullable=False),
        sa.Column("requested_by", sa.String(100), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("lease_expires_at", TS, nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("outcome_kind", sa.String(32), nullable=True),
        sa.Column("error_class", sa.String(100), nullable=True),
        sa.Column("tokens_total", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("cost_usd", sa.Float(), server_default="0", nullable=False),
        sa.CheckConstraint(
            "state IN ('queued', 'running', 'waiting', 'done', 'failed', 'cancelled', 'aborted')",
            name="ck_runs_state",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
    )
    op.create_index(
        "uq_runs_active_issue",
        "runs",
        ["repo", "issue_number"],
        unique=True,
        sqlite_where=ACTIVE,
        postgresql_where=ACTIVE,
    )
    op.create_index("ix_runs_state_created_at", "runs", ["state", "created_at"])
    op.create_index("ix_runs_repo_created_at", "runs", ["repo", "created_at"])
    op.create_index("ix_runs_requested_by_created_at", "runs", ["requested_by", "created_at"])
    op.create_index(
        "ix_runs_repo_issue_number_created_at", "runs", ["repo", "issue_number", "created_at"]
    )

    op.create_table(
        "turns",
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("turn_id", sa.String(200), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("slot", sa.String(100), nullable=False),
        sa.Column("tier", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("drop_class", sa.String(32), nullable=True),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.CheckConstraint("status IN ('ok', 'dropped')", name="ck_turns_status"),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_turns_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "turn_id", name="pk_turns"),
        sa.UniqueConstraint("run_id", "seq", name="uq_turns_run_id_seq"),
    )

    op.create_table(
        "comments",
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("marker", sa.String(200), nullable=False),
        sa.Column("comment_id", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("body_sha256", sa.String(64), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.CheckConstraint("kind IN ('issue', 'review')", name="ck_comments_kind"),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_comments_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "marker", name="pk_comments"),
    )


def downgrade() -> None:
    op.drop_table("comments")
    op.drop_table("turns")
    op.drop_table("runs")  # drops its indexes with it
    op.drop_index("ix_deliveries_state_received_at", table_name="deliveries")
    op.drop_table("deliveries")
