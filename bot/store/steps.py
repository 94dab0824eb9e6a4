"""The steps of a turn's tool loop, each stored the moment it completes.

An aggregate of ``RunStore`` on the shared base (bot/store/base.py). A turn
with tools is several model calls (bot/run/tool_loop.py); a run killed in
the middle of one resumes from its stored steps, so no finished step is paid
twice. A step holds the model's calls and the tool answers it got (the answers
come from the run's pinned commit, so replaying them is exact); the turn's last
step also holds the turn's ``Evidence``, which the store's ``turns`` rows do
not carry."""

from __future__ import annotations

import sqlalchemy as sa

from bot.engine.types import Evidence
from bot.store.base import StoreBase
from bot.store.codec import from_json, to_json
from bot.store.rows import StoredStep
from bot.store.schema import turn_steps


class StepQueries(StoreBase):
    def save_step(self, run_id: str, turn_id: str, step: StoredStep) -> None:
        """Store ``step``; storing the same step again (a retried write) is a no-op."""
        values = {
            "run_id": run_id,
            "turn_id": turn_id,
            "n": step.n,
            "model": step.model,
            "final": step.final,
            "body": to_json(step),
            "created_at": self._now(),
        }
        with self._write("save_step") as conn:
            conn.execute(self._insert(turn_steps).values(values).on_conflict_do_nothing())

    def load_steps(self, run_id: str, turn_id: str) -> list[StoredStep]:
        """The turn's stored steps in call order."""
        query = (
            sa.select(turn_steps.c.body)
            .where(turn_steps.c.run_id == run_id, turn_steps.c.turn_id == turn_id)
            .order_by(turn_steps.c.n)
        )
        with self._read("load_steps") as conn:
            return [from_json(StoredStep, row.body) for row in conn.execute(query)]

    def load_evidence(self, run_id: str) -> dict[str, Evidence]:
        """Each finished turn's Evidence, by turn id (``TurnKey.id()``)."""
        query = sa.select(turn_steps.c.turn_id, turn_steps.c.body).where(
            turn_steps.c.run_id == run_id, turn_steps.c.final.is_(True)
        )
        with self._read("load_evidence") as conn:
            rows = conn.execute(query).all()
        out: dict[str, Evidence] = {}
        for row in rows:
            step = from_json(StoredStep, row.body)
            if step.evidence is not None:
                out[row.turn_id] = step.evidence
        return out
