"""The spend ledger (an aggregate of ``RunStore``) and admission's sums.

Every stored turn's model call is one ledger row, written in ``save_turn``'s
transaction and keyed like the turn, so a resumed run never counts a call
twice. The ledger is the one source for the audit's cost line, budgets,
``/debate status``, ``debate-bot spend`` and the spend metrics.

Admission is a pure policy passed in (an ``Admission``, ``bot/store/admission.py``;
the run layer's ``Limits``); this module holds what it needs from the database:
the lock that makes two commands at once take turns (a per-installation and a
per-repository advisory lock on PostgreSQL; SQLite's ``BEGIN IMMEDIATE``
serialises writers already) and the sums its ``Tally`` asks for, counted under
it. An active run holds its estimate (``runs.reserved_usd``) against the
budgets beyond what it has spent; once it ends only its ledger rows count: the
reservation is settled to the real spend.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.selectable import NamedFromClause

from bot.core.errors import AdmissionRefused
from bot.engine.types import DebateSpec, Turn
from bot.store.admission import Admission, Admitted, Used, month_start
from bot.store.base import StoreBase
from bot.store.codec import from_json, spec_from_json, spec_to_json
from bot.store.rows import (
    MonthSpend,
    RunSpend,
    SpendBy,
    SpendLine,
    StoredStep,
    TurnUse,
    UsageHistory,
)
from bot.store.schema import ACTIVE_RUN_STATES, runs, spend, turn_steps, turns
from bot.store.turns import turn_from_row

# Held to the end of create_run's transaction: one admission at a time per
# repository (and per installation when its budget applies). The two-key form
# has its own key spaces, apart from the migrate lock's.
_ADMIT_LOCK = sa.text("SELECT pg_advisory_xact_lock(:space, hashtext(:key))")
_REPO_LOCK_SPACE = 0x71756F74  # "quot"
_INSTALLATION_LOCK_SPACE = 0x62756467  # "budg"


# A run's spend, read when it ends: built once.
_RUN_SPEND = sa.select(sa.func.coalesce(sa.func.sum(spend.c.cost_usd), 0.0), sa.func.count()).where(
    spend.c.run_id == sa.bindparam("s_run")
)
_RUN_PRICED_BY = (
    sa.select(spend.c.price_basis, spend.c.model)
    .where(spend.c.run_id == sa.bindparam("s_run"), spend.c.price_basis != "list")
    .distinct()
)


class LedgerQueries(StoreBase):
    # -- reading ---------------------------------------------------------------

    def run_spend(self, run_id: str) -> RunSpend:
        with self._read("run_spend") as conn:
            usd, calls = conn.execute(_RUN_SPEND, {"s_run": run_id}).one()
            rows = conn.execute(_RUN_PRICED_BY, {"s_run": run_id}).all()
        assumed = tuple(sorted(m for b, m in rows if b == "assumed"))
        unknown = tuple(sorted(m for b, m in rows if b == "unknown"))
        return RunSpend(float(usd), int(calls), assumed, unknown)

    def month_spend(self, repo: str, installation_id: int | None) -> MonthSpend:
        """The repository's and its installation's spend this UTC month (by the
        store's clock), and what their active runs still hold."""
        since = month_start(self._now())
        with self._read("month_spend") as conn:
            repo_usd, repo_held = _month_sums(conn, runs.c.repo, repo, since)
            inst_usd, inst_held = (
                _month_sums(conn, runs.c.installation_id, installation_id, since)
                if installation_id is not None
                else (0.0, 0.0)
            )
        return MonthSpend(repo_usd, repo_held, inst_usd, inst_held)

    def spend_report(self, since: datetime, until: datetime, by: SpendBy) -> list[SpendLine]:
        """Spend in ``[since, until)`` grouped ``by`` repository, installation or
        model, the largest first."""
        s = spend.c
        key: sa.ColumnElement[Any] = {
            "repo": s.repo,
            "installation": sa.cast(s.installation_id, sa.String),
            "model": s.model,
        }[by]
        stmt = (
            sa.select(
                key,
                sa.func.count(sa.distinct(s.run_id)),
                sa.func.count(),
                sa.func.sum(s.input_tokens),
                sa.func.sum(s.cached_tokens),
                sa.func.sum(s.output_tokens),
                sa.func.sum(s.cost_usd),
            )
            .where(s.created_at >= since, s.created_at < until)
            .group_by(key)
        )
        with self._read("spend_report") as conn:
            rows = conn.execute(stmt).all()
        lines = [
            SpendLine(
                str(k) if k is not None else "(none)",
                int(n_runs),
                int(calls),
                int(inp or 0),
                int(cached or 0),
                int(out or 0),
                float(usd or 0.0),
            )
            for k, n_runs, calls, inp, cached, out, usd in rows
        ]
        return sorted(lines, key=lambda line: (-line.usd, line.key))

    def usage_history(
        self,
        *,
        installation_id: int | None,
        repo: str,
        mode: str,
        models: Sequence[str],
        per_model: int = 120,
        replays: int = 8,
    ) -> UsageHistory:
        """What the latest ``per_model`` answered turns of each of ``models``
        really used in this installation's runs of ``mode`` (its repository's
        where it has no installation): the estimate learns from them
        (bot/run/habits.py). The ledger's calls joined with their turns' answers
        and, for a turn with tools, its first step (the prompt alone) and its
        last (the answer, and the loop's evidence); and the turns of the latest
        ``replays`` runs, which the estimate replays for their prompts."""
        s, r, t = spend.c, runs.c, turns.c
        base = _usage_query(installation_id, repo, mode, per_model)
        used: list[TurnUse] = []
        with self._read("usage_history") as conn:
            for model in dict.fromkeys(models):
                used += [_turn_use(row) for row in conn.execute(base.where(s.model == model))]
            ids = sorted({u.run_id for u in used})
            specs = {
                run_id: spec_from_json(text)
                for run_id, text in conn.execute(sa.select(r.id, r.spec).where(r.id.in_(ids)))
            }
            latest = list(dict.fromkeys(u.run_id for u in used))[:replays]
            played: dict[str, list[Turn]] = {run_id: [] for run_id in latest}
            stored = conn.execute(
                sa.select(turns).where(t.run_id.in_(latest)).order_by(t.run_id, t.seq)
            ).mappings()
            for row in stored:
                played[row["run_id"]].append(turn_from_row(row))
        return UsageHistory(tuple(used), specs, {k: tuple(v) for k, v in played.items()})

    def spend_totals(self) -> Iterator[tuple[int | None, str, str, float]]:
        """All-time spend per (installation, repository, model): the metrics' counter."""
        s = spend.c
        stmt = sa.select(s.installation_id, s.repo, s.model, sa.func.sum(s.cost_usd)).group_by(
            s.installation_id, s.repo, s.model
        )
        with self._read("spend_totals") as conn:
            rows = conn.execute(stmt).all()
        for installation, repo, model, usd in rows:
            yield installation, repo, model, float(usd or 0.0)

    def installation_month_spend(self) -> dict[int, float]:
        """Each installation's spend this month and its active runs' holds: the
        metrics' budget remaining."""
        since = month_start(self._now())
        s, r = spend.c, runs.c
        with self._read("installation_month_spend") as conn:
            spent = conn.execute(
                sa.select(s.installation_id, sa.func.sum(s.cost_usd))
                .where(s.created_at >= since, s.installation_id.is_not(None))
                .group_by(s.installation_id)
            ).all()
            held = conn.execute(
                sa.select(r.installation_id, sa.func.sum(_held()))
                .where(r.state.in_(ACTIVE_RUN_STATES), r.installation_id.is_not(None))
                .group_by(r.installation_id)
            ).all()
        totals: dict[int, float] = {}
        for installation, usd in [*spent, *held]:
            totals[int(installation)] = totals.get(int(installation), 0.0) + float(usd or 0.0)
        return totals


def _usage_query(
    installation_id: int | None, repo: str, mode: str, per_model: int
) -> sa.Select[Any]:
    """The ledger's calls of the scope's runs of ``mode`` (its own columns,
    indexed with its time), each with its turn's answer and, for a turn with
    tools, its first and last stored steps; newest first."""
    s, r, t = spend.c, runs.c, turns.c
    last, first = turn_steps.alias("last_step"), turn_steps.alias("first_step")
    scope = s.installation_id == installation_id if installation_id is not None else s.repo == repo

    def step(alias: NamedFromClause, which: sa.ColumnElement[bool]) -> sa.ColumnElement[bool]:
        return sa.and_(alias.c.run_id == s.run_id, alias.c.turn_id == s.turn_id, which)

    return (
        sa.select(
            s.run_id,
            s.turn_id,
            s.model,
            t.phase,
            s.input_tokens,
            s.cached_tokens,
            s.output_tokens,
            t.text,
            last.c.body.label("last_step"),
            first.c.body.label("first_step"),
        )
        .select_from(
            spend.join(runs, r.id == s.run_id)
            .join(turns, (t.run_id == s.run_id) & (t.turn_id == s.turn_id))
            .outerjoin(last, step(last, last.c.final.is_(True)))
            .outerjoin(first, step(first, first.c.n == 0))
        )
        .where(scope, r.mode == mode, t.status == "ok")
        .order_by(s.created_at.desc(), s.turn_id)
        .limit(per_model)
    )


def _turn_use(row: sa.Row[Any]) -> TurnUse:
    """A turn's use: a turn with tools by its steps (the last wrote the answer and
    holds the loop's evidence; the first was sent the prompt alone), another by
    its one call."""
    run_id, turn_id, model, phase = row.run_id, row.turn_id, row.model, row.phase
    input_tokens, cached_tokens, output_tokens = (
        row.input_tokens, row.cached_tokens, row.output_tokens
    )  # fmt: skip
    text, last_step, first_step = row.text, row.last_step, row.first_step
    words, chars = len(text.split()), len(text)
    use = TurnUse(
        run_id, model, phase, words, chars, output_tokens, None, 0, input_tokens, 0, turn_id
    )
    use = replace(use, cached_tokens=cached_tokens)
    if last_step is None:
        return use
    last = from_json(StoredStep, last_step)
    first = from_json(StoredStep, first_step) if first_step is not None else last
    evidence = last.evidence
    return replace(
        use,
        answer_tokens=last.usage.output_tokens,
        tool_steps=max(0, evidence.steps - 1) if evidence is not None else last.n,
        tool_bytes=evidence.bytes_read if evidence is not None else 0,
        first_input_tokens=first.usage.input_tokens,
    )


def _held() -> sa.ColumnElement[float]:
    """What an active run holds beyond its spend so far."""
    r = runs.c
    return sa.case((r.reserved_usd > r.cost_usd, r.reserved_usd - r.cost_usd), else_=0.0)


def _month_sums(
    conn: Connection, run_column: sa.Column[Any], value: object, since: datetime
) -> tuple[float, float]:
    """(ledger spend since ``since``, active runs' holds) where ``run_column``
    (repo or installation_id, named alike in both tables) is ``value``."""
    spend_column = spend.c[run_column.name]
    spent = conn.execute(
        sa.select(sa.func.coalesce(sa.func.sum(spend.c.cost_usd), 0.0)).where(
            spend_column == value, spend.c.created_at >= since
        )
    ).scalar_one()
    held = conn.execute(
        sa.select(sa.func.coalesce(sa.func.sum(_held()), 0.0)).where(
            run_column == value, runs.c.state.in_(ACTIVE_RUN_STATES)
        )
    ).scalar_one()
    return float(spent), float(held)


def admit(
    conn: Connection,
    *,
    now: datetime,
    repo: str,
    installation_id: int | None,
    requested_by: str,
    admission: Admission,
) -> Admitted:
    """Lock, count what ``admission`` asks for and let it decide; raise its refusal."""
    tally = admission.tally
    by_installation = tally.installation_month and installation_id is not None
    if conn.dialect.name == "postgresql":
        # Always installation before repository, so two admissions never deadlock.
        if by_installation:
            conn.execute(
                _ADMIT_LOCK, {"space": _INSTALLATION_LOCK_SPACE, "key": str(installation_id)}
            )
        conn.execute(_ADMIT_LOCK, {"space": _REPO_LOCK_SPACE, "key": repo})
    used = Used()
    if tally.runs_since is not None:
        total, own = count_runs(conn, repo, tally.runs_since, requested_by)
        used = Used(repo_runs=total, user_runs=own)
    since = month_start(now)
    if tally.repo_month:
        used = replace(used, repo_month_usd=sum(_month_sums(conn, runs.c.repo, repo, since)))
    if by_installation:
        inst_usd = sum(_month_sums(conn, runs.c.installation_id, installation_id, since))
        used = replace(used, installation_month_usd=inst_usd)
    decision = admission.decide(used, now)
    if isinstance(decision, AdmissionRefused):
        raise decision
    return decision


def admitted_values(spec: DebateSpec, admitted: Admitted) -> dict[str, Any]:
    """The run's columns as admitted: its cap set on the spec (never raised
    above one it already has) and its reservation."""
    cap = admitted.cap_usd
    if spec.max_cost_usd is not None:
        cap = spec.max_cost_usd if cap is None else min(cap, spec.max_cost_usd)
    return {
        "spec": spec_to_json(replace(spec, max_cost_usd=cap)),
        "reserved_usd": admitted.reserved_usd,
    }


# Counted for every command admitted: built once.
_COUNT_RUNS = sa.select(
    sa.func.count(), sa.func.count().filter(runs.c.requested_by == sa.bindparam("c_user"))
).where(runs.c.created_at >= sa.bindparam("c_since"), runs.c.repo == sa.bindparam("c_repo"))


def count_runs(conn: Connection, repo: str, since: datetime, requested_by: str) -> tuple[int, int]:
    """Runs created at or after ``since`` in ``repo``: all of them, and those
    ``requested_by`` asked for. One query for both quotas."""
    total, own = conn.execute(
        _COUNT_RUNS, {"c_since": since, "c_repo": repo, "c_user": requested_by}
    ).one()
    return int(total), int(own)
