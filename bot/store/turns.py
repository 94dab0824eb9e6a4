"""Turns: each finished model call, stored the moment it completes."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from bot.core.errors import RunNotFound
from bot.engine.types import DropClass, Phase, Turn, TurnKey, TurnStatus, Usage
from bot.store.base import StoreBase
from bot.store.rows import (
    RunControl,
    SavedTurn,
)
from bot.store.schema import runs, spend, turns

# Read when a run is driven and when it ends: built once.
_LOAD_TURNS = (
    sa.select(turns).where(turns.c.run_id == sa.bindparam("t_run_id")).order_by(turns.c.seq)
)


class TurnQueries(StoreBase):
    def save_turn(self, run_id: str, turn: Turn) -> SavedTurn:
        """Persist a finished turn; first write wins (``new`` is False if a turn
        with the same key was already saved). A new turn's tokens and cost are
        added to the run's totals in the same transaction, which also reads the
        run's lease owner and cancel flag: the driver's check between batches,
        for free."""
        lock_run, insert, add_usage = self._turn_stmts
        usage = turn.usage
        now = self._now()
        row = {
            "run_id": run_id,
            "turn_id": turn.key.id(),
            "phase": turn.key.phase,
            "round": turn.key.round,
            "slot": turn.key.slot,
            "tier": turn.key.tier,
            "status": turn.status,
            "drop_class": turn.drop_class,
            "model": turn.model,
            "text": turn.text,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens,
            "latency_ms": usage.latency_ms,
            "cost_usd": usage.cost_usd,
            "truncated": turn.truncated,
            "created_at": now,
        }
        with self._write("save_turn") as conn:
            # Lock the run row first: concurrent saves for one run then take
            # turns computing the next seq (SQLite's BEGIN IMMEDIATE already
            # serialises writers; FOR UPDATE is not rendered there).
            locked = conn.execute(lock_run, {"r_id": run_id}).first()
            if locked is None:
                raise RunNotFound(f"save_turn: no run {run_id}")
            control = RunControl(locked[0], bool(locked[1]))
            if conn.execute(insert, row).first() is None:
                return SavedTurn(False, control)
            record_spend(conn, run_id, turn, now)
            conn.execute(
                add_usage,
                {
                    "r_id": run_id,
                    "r_tokens": usage.input_tokens + usage.output_tokens,
                    "r_cost": usage.cost_usd,
                },
            )
        return SavedTurn(True, control)

    @functools.cached_property
    def _turn_stmts(self) -> tuple[sa.Executable, sa.Executable, sa.Executable]:
        """save_turn's statements, built once: a turn is saved for every model
        call, and building (and cache-keying) them each time cost more than
        running them."""
        t = turns.c
        run_id: sa.BindParameter[str] = sa.bindparam("run_id")
        next_seq = (
            sa.select(sa.func.coalesce(sa.func.max(t.seq), 0) + 1)
            .where(t.run_id == run_id)
            .scalar_subquery()
        )
        values: dict[str, sa.BindParameter[Any]] = {
            c.name: sa.bindparam(c.name) for c in turns.c if c.name != "seq"
        }
        insert = (
            self._insert(turns)
            .values(**values, seq=next_seq)
            .on_conflict_do_nothing(index_elements=[t.run_id, t.turn_id])
            .returning(t.turn_id)
        )
        r_id: sa.BindParameter[str] = sa.bindparam("r_id")
        lock_run = (
            sa.select(runs.c.lease_owner, runs.c.cancel_requested)
            .where(runs.c.id == r_id)
            .with_for_update()
        )
        add_usage = (
            sa.update(runs)
            .where(runs.c.id == r_id)
            .values(
                tokens_total=runs.c.tokens_total + sa.bindparam("r_tokens"),
                cost_usd=runs.c.cost_usd + sa.bindparam("r_cost"),
            )
        )
        return lock_run, insert, add_usage

    def load_turns(self, run_id: str) -> list[Turn]:
        """Every saved turn of a run, in the order they were saved."""
        with self._read("load_turns") as conn:
            rows = conn.execute(_LOAD_TURNS, {"t_run_id": run_id}).mappings()
            return [turn_from_row(row) for row in rows]


def turn_from_row(row: Mapping[Any, Any]) -> Turn:
    return Turn(
        key=TurnKey(
            phase=cast(Phase, row["phase"]),
            round=row["round"],
            slot=row["slot"],
            tier=row["tier"],
        ),
        text=row["text"],
        model=row["model"],
        usage=Usage(
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cached_tokens=row["cached_tokens"],
            latency_ms=row["latency_ms"],
            cost_usd=float(row["cost_usd"]),
        ),
        status=cast(TurnStatus, row["status"]),
        drop_class=cast(DropClass | None, row["drop_class"]),
        truncated=bool(row["truncated"]),
    )


def record_spend(conn: Connection, run_id: str, turn: Turn, at: datetime) -> None:
    """The ledger row of a newly stored turn, in ``save_turn``'s transaction
    (repository and installation read from the run in the same statement)."""
    usage = turn.usage
    if turn.status != "ok" and not (usage.input_tokens or usage.output_tokens):
        return  # a dropped call: nothing was billed
    conn.execute(
        _spend_insert(conn.dialect.name),
        {
            "s_run_id": run_id,
            "s_turn_id": turn.key.id(),
            "s_model": turn.model,
            "s_input_tokens": usage.input_tokens,
            "s_cached_tokens": usage.cached_tokens,
            "s_cache_write_tokens": usage.cache_write_tokens,
            "s_output_tokens": usage.output_tokens,
            "s_cost_usd": usage.cost_usd,
            "s_price_basis": usage.price_basis,
            "s_created_at": at,
        },
    )


@functools.cache
def _spend_insert(dialect: str) -> sa.Executable:
    """record_spend's statement, built once per dialect: a ledger row is written
    for every model call, and building (and cache-keying) it each time cost more
    than running it. Its parameters are the ``spend`` columns' names with ``s_``."""

    def given(name: str) -> sa.BindParameter[Any]:
        return sa.bindparam(f"s_{name}", type_=spend.c[name].type)

    run_id = given("run_id")
    values: dict[str, sa.ColumnElement[Any]] = {"run_id": run_id, "turn_id": given("turn_id")}
    values |= {"repo": runs.c.repo, "installation_id": runs.c.installation_id}
    values |= {
        name: given(name)
        for name in (
            "model",
            "input_tokens",
            "cached_tokens",
            "cache_write_tokens",
            "output_tokens",
            "cost_usd",
            "price_basis",
            "created_at",
        )
    }
    source = sa.select(*values.values()).where(runs.c.id == run_id)
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return (
        insert(spend)
        .from_select(list(values), source)
        .on_conflict_do_nothing(index_elements=[spend.c.run_id, spend.c.turn_id])
    )
