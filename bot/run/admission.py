"""Admission: whether a run may start, and with what cost cap (pure policy).

``decide(limits, used)`` is the whole policy: the daily run quotas, the unknown
price rule and the three budgets (per run, per repository per month, per
installation per month; docs/configuration.md, "Money"). ``Limits`` is the
store's ``Admission`` (``bot/store/admission.py``): passed to ``create_run``,
which counts what its ``tally`` asks for (``Used``) under its locks and calls
``Limits.decide`` inside the insert's transaction, so races stay exact; the
admitted cap becomes the run's ``DebateSpec.max_cost_usd``.

A budget admits what fits: the run starts when its first round (the frame and
the first persona turns, ``Budget.first_round_usd``) fits the per-run budget
and what is left of each monthly one; its cap is the tightest of those, so a
run whose whole expected cost does not fit stops at the cap and synthesizes
from what it has. It holds its expected cost (``Budget.estimate_usd``), or its
cap when that is less, against the monthly budgets until it ends.
Imports only the standard library, ``bot.core.errors`` and the store's value
types (``bot/store/admission.py``, itself pure).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from bot.core.errors import AdmissionRefused, BudgetSpent, PriceUnknown, QuotaSpent
from bot.store.admission import Admitted, Tally, Used, next_month

QuotaScope = Literal["repo", "user"]


@dataclass(frozen=True)
class Quota:
    """Daily quotas checked as a run is queued: at most ``per_repo`` runs created
    in the repository at or after ``since``, and ``per_user`` of them by its requester."""

    since: datetime
    per_repo: int
    per_user: int


@dataclass(frozen=True)
class Budget:
    """The dollar caps that apply to one run (None: no cap) and what it is
    estimated to cost (bot/run/estimate.py). Monthly caps count the UTC
    calendar month."""

    estimate_usd: float  # the expected cost of the whole run
    per_run_usd: float | None = None
    repo_month_usd: float | None = None
    installation_month_usd: float | None = None
    # Models of the plan with no price (listed or assumed), and whether that refuses it.
    unpriced: tuple[str, ...] = ()
    refuse_unpriced: bool = False
    # The least the run spends once started: its frame and first round (None:
    # the whole estimate, a run that must fit entirely).
    first_round_usd: float | None = None

    @property
    def least_usd(self) -> float:
        if self.first_round_usd is None:
            return self.estimate_usd
        return min(self.first_round_usd, self.estimate_usd)

    @property
    def capped(self) -> bool:
        """Whether any dollar budget applies (the month's sums are counted only then)."""
        return any(
            cap is not None
            for cap in (self.per_run_usd, self.repo_month_usd, self.installation_month_usd)
        )


@dataclass(frozen=True)
class Limits:
    """A run's quotas and budget: the ``Admission`` ``create_run`` runs."""

    quota: Quota | None = None
    budget: Budget | None = None

    @property
    def tally(self) -> Tally:
        """The sums ``decide`` reads: the quota's runs, the month's where a dollar
        budget applies (the installation's where its budget does)."""
        budget = self.budget
        return Tally(
            runs_since=None if self.quota is None else self.quota.since,
            repo_month=budget is not None and budget.capped,
            installation_month=budget is not None and budget.installation_month_usd is not None,
        )

    def decide(self, used: Used, now: datetime) -> Admitted | AdmissionRefused:
        return decide(self, used, now)


def quota_scope(quota: Quota, total: int, own: int) -> QuotaScope | None:
    """Which quota is spent when ``total`` runs were started here since, ``own``
    of them by the requester (the repository's is named first)."""
    if total >= quota.per_repo:
        return "repo"
    if own >= quota.per_user:
        return "user"
    return None


def decide(limits: Limits, used: Used, now: datetime) -> Admitted | AdmissionRefused:
    """Admit the run with a cost cap, or the refusal to reply with (``now``:
    the store's clock, for when a monthly budget resets)."""
    if limits.quota is not None:
        scope = quota_scope(limits.quota, used.repo_runs, used.user_runs)
        if scope is not None:
            return QuotaSpent(scope)
    budget = limits.budget
    if budget is None:
        return Admitted(None, 0.0)
    if budget.unpriced and budget.refuse_unpriced:
        return PriceUnknown(budget.unpriced)
    estimate, least = budget.estimate_usd, budget.least_usd
    resets = next_month(now)
    caps: list[float] = []
    if budget.per_run_usd is not None:
        if least > budget.per_run_usd:
            return BudgetSpent(
                "run", limit=budget.per_run_usd, spent=0.0, estimate=estimate, least=least
            )
        caps.append(budget.per_run_usd)
    monthly: tuple[tuple[Literal["repo", "installation"], float | None, float], ...] = (
        ("repo", budget.repo_month_usd, used.repo_month_usd),
        ("installation", budget.installation_month_usd, used.installation_month_usd),
    )
    for which, limit, spent in monthly:
        if limit is None:
            continue
        if spent + least > limit:
            return BudgetSpent(
                which, limit=limit, spent=spent, estimate=estimate, least=least, resets=resets
            )
        caps.append(limit - spent)
    cap = min(caps) if caps else None
    return Admitted(cap, estimate if cap is None else min(estimate, cap))
