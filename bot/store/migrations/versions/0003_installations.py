"""Installations the app was removed from or suspended on.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

No row means active: only `installation` deliveries write here.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "installations",
        sa.Column("installation_id", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "state IN ('active', 'suspended', 'removed')", name="ck_installations_state"
        ),
        sa.PrimaryKeyConstraint("installation_id", name="pk_installations"),
    )


def downgrade() -> None:
    op.drop_table("installations")
