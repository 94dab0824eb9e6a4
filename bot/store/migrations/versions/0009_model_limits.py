"""Model endpoints' learned limits, shared by every process.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "model_limits",
        sa.Column("endpoint", sa.String(length=512), nullable=False),
        sa.Column("concurrency", sa.Float(), nullable=False),
        sa.Column("decreased_at", TS, nullable=True),
        sa.Column("hold_until", TS, nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("endpoint", name="pk_model_limits"),
    )


def downgrade() -> None:
    op.drop_table("model_limits")
