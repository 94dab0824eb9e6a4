"""The steps of a turn's tool loop (bot/store/steps.py).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

Each model call of a turn that reads the repository is stored when it
completes, so a run killed mid-turn resumes without paying a finished step
twice; the last step carries the turn's evidence (tool counts, citations).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "turn_steps",
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("turn_id", sa.String(200), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("final", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_turn_steps_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "turn_id", "n", name="pk_turn_steps"),
    )


def downgrade() -> None:
    op.drop_table("turn_steps")
