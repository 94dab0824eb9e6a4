"""Scheduled design reviews: which repositories asked for one, and when it is due.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("installation_id", sa.BigInteger(), nullable=False),
        sa.Column("cadence", sa.String(16), nullable=False),
        sa.Column("scope", sa.Text(), server_default="[]", nullable=False),
        sa.Column("next_due", TS, nullable=False),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("lease_expires_at", TS, nullable=True),
        sa.Column("last_issue", sa.Integer(), nullable=True),
        sa.Column("last_run", sa.String(36), nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.CheckConstraint("cadence IN ('weekly', 'monthly')", name="ck_schedules_cadence"),
        sa.PrimaryKeyConstraint("repo", name="pk_schedules"),
    )
    op.create_index("ix_schedules_next_due", "schedules", ["next_due"])


def downgrade() -> None:
    op.drop_index("ix_schedules_next_due", table_name="schedules")
    op.drop_table("schedules")
