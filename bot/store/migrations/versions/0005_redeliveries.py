"""Redelivery claims and the redelivery scan's position.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Failed webhook deliveries are asked of GitHub again (bot/service/web/redeliver.py); the
``redeliveries`` insert is the claim that makes one process ask, once per guid.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "redeliveries",
        sa.Column("guid", sa.String(100), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("requested_by", sa.String(200), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.CheckConstraint("outcome IN ('requested', 'refused')", name="ck_redeliveries_outcome"),
        sa.PrimaryKeyConstraint("guid", name="pk_redeliveries"),
    )
    op.create_table(
        "redelivery_scans",
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("seen_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_redelivery_scans"),
    )


def downgrade() -> None:
    op.drop_table("redelivery_scans")
    op.drop_table("redeliveries")
