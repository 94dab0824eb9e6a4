"""The spend ledger and the runs' budget reservations.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02

Every stored model call's usage and price, per run, repository, installation
and model (one source for audits, budgets, status and metrics), and the
estimate each active run holds against the budgets.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("reserved_usd", sa.Float(), server_default="0", nullable=False))
    op.create_table(
        "spend",
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("turn_id", sa.String(200), nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("installation_id", sa.BigInteger(), nullable=True),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("price_basis", sa.String(16), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "turn_id"),
    )
    op.create_index("ix_spend_repo_created_at", "spend", ["repo", "created_at"])
    op.create_index("ix_spend_installation_created_at", "spend", ["installation_id", "created_at"])
    op.create_index("ix_spend_created_at", "spend", ["created_at"])


def downgrade() -> None:
    op.drop_table("spend")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("reserved_usd")
