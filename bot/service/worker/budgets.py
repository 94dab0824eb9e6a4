"""Money at the worker: the budgets that apply, a run's admission limits, and
what `/debate estimate` and `/debate status` say about cost (docs/configuration.md,
"Money").

The policy itself is ``bot/run/admission.py``; the estimate ``bot/run/estimate.py``
(with the habits it learns from the ledger, ``bot/run/habits.py``); the ledger
and the sums are ``bot/store/ledger.py``. Here the operator's settings and the
repository's ``budget:`` meet (a repository can only lower the operator's
caps), and the estimate gets what it needs: the installation's history and the
size of the pinned snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import anyio

from bot.core.errors import AdmissionRefused, GitHubError
from bot.core.logs import get_logger
from bot.core.settings import Settings
from bot.engine.types import DebateSpec
from bot.github.gateway import InstallationClient
from bot.inputs.repo_config import RepoConfig
from bot.models.pricing import PriceBook
from bot.run.admission import Budget, Limits, Quota, decide
from bot.run.estimate import Forecast, forecast, plan_models, supply_of
from bot.run.habits import basis, learn
from bot.service.worker.context import Services
from bot.store.admission import Used, next_month
from bot.store.rows import MonthSpend, RunSpend

log = get_logger(__name__)


@dataclass(frozen=True)
class Caps:
    """The dollar budgets that apply to a repository (None: no cap)."""

    per_run: float | None
    repo_month: float | None
    installation_month: float | None

    @property
    def any(self) -> bool:
        return any(c is not None for c in (self.per_run, self.repo_month, self.installation_month))


def _lower(operator: float | None, repo: float | None) -> float | None:
    caps = [c for c in (operator, repo) if c is not None]
    return min(caps) if caps else None


def caps_for(settings: Settings, config: RepoConfig) -> Caps:
    return Caps(
        _lower(settings.budget_run_usd, config.budget.per_run_usd),
        _lower(settings.budget_repo_month_usd, config.budget.per_month_usd),
        settings.budget_installation_month_usd,
    )


async def forecast_for(
    svc: Services,
    gh: InstallationClient | None,
    spec: DebateSpec,
    *,
    repo: str,
    installation_id: int | None,
) -> Forecast:
    """The run's estimate (bot/run/estimate.py), as `/debate estimate` and
    admission both quote it: learned from this installation's runs of the
    plan's models in its mode, with tools bounded by the pinned snapshot."""
    supply: int | None = None
    if spec.tools and spec.repo_ref is not None and gh is not None:
        try:  # the run reads the same snapshot: fetched once, from the process's cache
            supply = supply_of(await svc.repos.snapshot(gh, spec.repo_ref))
        except GitHubError as exc:
            log.warning("estimate.no_snapshot", repo=repo, error=exc.code)
    models, store, prices = plan_models(spec), svc.store, svc.models.prices

    def estimate() -> Forecast:
        # Off the event loop: the history's query (tens of ms on a busy ledger),
        # its replays and the plan walked twice are CPU and I/O.
        history = store.usage_history(
            installation_id=installation_id, repo=repo, mode=spec.mode, models=models
        )
        return forecast(spec, prices, learn(history, models), supply_bytes=supply)

    return await anyio.to_thread.run_sync(estimate)


def budget_for(
    spec: DebateSpec, estimate: Forecast | None, caps: Caps, prices: PriceBook
) -> Budget | None:
    """What admission checks besides the quotas: None when no budget applies and
    unknown prices are not refused (``estimate`` is then not needed: None)."""
    refuse = prices.refuses(caps.any)
    if not caps.any and not refuse:
        return None
    unpriced = tuple(prices.unpriced(plan_models(spec)))
    return Budget(
        estimate_usd=estimate.usd if estimate is not None and caps.any else 0.0,
        per_run_usd=caps.per_run,
        repo_month_usd=caps.repo_month,
        installation_month_usd=caps.installation_month,
        unpriced=unpriced,
        refuse_unpriced=refuse,
        first_round_usd=estimate.first_round_usd if estimate is not None else None,
    )


def quota_for(config: RepoConfig, now: datetime | None = None) -> Quota:
    """The daily quotas: runs started here in the last day."""
    since = (now or datetime.now(UTC)) - timedelta(days=1)
    return Quota(since, config.quotas.per_repo_per_day, config.quotas.per_user_per_day)


# -- what users read ----------------------------------------------------------------


def _usd(value: float | None) -> str:
    return "no cap" if value is None else f"${value:.4f}"


def estimate_text(
    spec: DebateSpec,
    est: Forecast,
    caps: Caps,
    prices: PriceBook,
    month: MonthSpend | None = None,
    now: datetime | None = None,
) -> str:
    """The reply to `/debate estimate`: the plan, per model, its cost as
    admission counts it, and what the budgets would do with it now."""
    by_model: dict[str, list[int]] = {}
    for call in est.expected.calls:
        row = by_model.setdefault(call.model or "(none)", [0, 0, 0])
        row[0] += call.steps  # a tool turn is several calls
        row[1] += call.input_tokens
        row[2] += call.output_tokens
    personas = ", ".join(p.name for p in spec.personas) or "auto-picked by the judge"
    lines = [
        f"**Estimate** (nothing was run): {spec.mode}, up to {spec.rounds} rounds, "
        f"personas {personas}.",
        "",
        "| model | calls | input tokens | output tokens | price |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for model, (calls, inp, out) in sorted(by_model.items()):
        lines.append(f"| `{model}` | {calls} | {inp:,} | {out:,} | {_price(prices, model)} |")
    expected = est.expected
    lines += [
        "",
        f"Estimated cost: **${est.usd:.4f}**, up to ${est.high_usd:.4f} (the high end); "
        f"its first round ${est.first_round_usd:.4f}. {expected.model_calls} model calls "
        f"({expected.input_tokens:,} input and {expected.output_tokens:,} output tokens).",
        "",
        "Based on:",
        *(f"- {line}" for line in basis(est)),
    ]
    if expected.unpriced:
        lines.append(
            "No price is known for "
            + ", ".join(f"`{m}`" for m in expected.unpriced)
            + ": counted as $0 here."
        )
    if caps.any:
        lines.append(
            f"Budgets: per run {_usd(caps.per_run)}, this repository per month "
            f"{_usd(caps.repo_month)}, this installation per month {_usd(caps.installation_month)}."
        )
        if month is not None:
            lines.append(_if_started(spec, est, caps, prices, month, now or datetime.now(UTC)))
    return "\n".join(lines)


def _if_started(
    spec: DebateSpec,
    est: Forecast,
    caps: Caps,
    prices: PriceBook,
    month: MonthSpend,
    now: datetime,
) -> str:
    """What admission would say now, from the month's spend and holds."""
    used = Used(
        repo_month_usd=month.repo_usd + month.repo_held_usd,
        installation_month_usd=month.installation_usd + month.installation_held_usd,
    )
    decision = decide(Limits(budget=budget_for(spec, est, caps, prices)), used, now)
    if isinstance(decision, AdmissionRefused):
        return "If started now: " + decision.public
    if decision.cap_usd is not None and decision.cap_usd < est.usd:
        return (
            f"If started now: it would start and stop at its cap of ${decision.cap_usd:.4f}, "
            "then synthesize from what it has."
        )
    return "If started now: it would start."


def _price(prices: PriceBook, model: str) -> str:
    price, basis = prices.lookup(model)
    if price is None:
        return "unknown"
    return f"${price.input:g} / ${price.output:g} per M" + (
        " (assumed)" if basis == "assumed" else ""
    )


def status_spend(month: MonthSpend, caps: Caps, now: datetime) -> str:
    """`/debate status`'s month-to-date line."""
    resets = next_month(now).strftime("%Y-%m-%d")
    repo = f"${month.repo_usd:.4f}"
    if caps.repo_month is not None:
        repo += f" of {_usd(caps.repo_month)}"
    held = month.repo_held_usd
    line = f"Spend this month (UTC): this repository {repo}"
    if held > 0:
        line += f" (+${held:.4f} held by active runs)"
    if caps.installation_month is not None:
        line += (
            f"; this installation ${month.installation_usd:.4f} of {_usd(caps.installation_month)}"
        )
    if caps.per_run is not None:
        line += f"; per-run cap {_usd(caps.per_run)}"
    if caps.repo_month is not None or caps.installation_month is not None:
        line += f". Monthly budgets reset on {resets}."
    return line


# -- the audit's cost line ----------------------------------------------------------

_COST_LINE = "- **Cost estimate:** "


def ledger_cost_line(spent: RunSpend) -> str:
    """The audit's cost line, from the ledger, naming any price not listed."""
    line = f"- **Cost:** ${spent.usd:.4f} (spend ledger, {spent.calls} model calls)"
    if spent.assumed:
        line += "; price assumed (DEBATE_BOT_UNKNOWN_PRICE) for " + ", ".join(
            f"`{m}`" for m in spent.assumed
        )
    if spent.unknown:
        line += "; no price known for " + ", ".join(f"`{m}`" for m in spent.unknown)
        line += " (counted as $0)"
    return line


def with_ledger_cost(body: str, spent: RunSpend) -> str:
    """``body`` with its audit's cost line (the engine's sum of the turns)
    replaced by the ledger's; unchanged if it has none."""
    lines = body.split("\n")
    for i, text in enumerate(lines):
        if text.startswith(_COST_LINE):
            lines[i] = ledger_cost_line(spent)
            return "\n".join(lines)
    return body
