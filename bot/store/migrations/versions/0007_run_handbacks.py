"""Runs count the claims that ended in a clean hand-back (a drained worker).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

A rolling deploy hands every running run back; without this count, five deploys
during one long debate would fail it as a run that keeps crashing its workers.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("handbacks", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("handbacks")
