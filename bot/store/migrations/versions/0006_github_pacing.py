"""GitHub write pacing shared by every process, per installation.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "github_pacing",
        sa.Column("installation_id", sa.BigInteger(), nullable=False),
        sa.Column("next_at", TS, nullable=False),
        sa.Column("minute_tokens", sa.Float(), nullable=False),
        sa.Column("hour_tokens", sa.Float(), nullable=False),
        sa.Column("tokens_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("installation_id", name="pk_github_pacing"),
    )


def downgrade() -> None:
    op.drop_table("github_pacing")
