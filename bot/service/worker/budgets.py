"""Money at the worker: the budgets that apply, a run's admission limits, and
what `/debate estimate` and `/debate status` say about cost (docs/configuration.md,
"Money").

The policy itself is ``bot/run/admission.py``; the ledger and the sums are
``bot/store/ledger.py``. Here the operator's settings and the repository's
``budget:`` meet: a repository can only lower the operator's caps.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bot.core.settings import Settings
from bot.engine.types import DebateSpec
from bot.inputs.repo_config import RepoConfig
from bot.models.estimate import RunEstimate, estimate_run, plan_models
from bot.models.pricing import PriceBook
from bot.run.admission import Budget, Quota, next_month
from bot.store.rows import MonthSpend, RunSpend


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


def budget_for(spec: DebateSpec, caps: Caps, prices: PriceBook) -> Budget | None:
    """What admission checks besides the quotas: None when no budget applies and
    unknown prices are not refused (the estimate is then not even made)."""
    refuse = prices.refuses(caps.any)
    if not caps.any and not refuse:
        return None
    unpriced = tuple(prices.unpriced(plan_models(spec)))
    estimate = estimate_run(spec, prices).usd if caps.any else 0.0
    return Budget(
        estimate_usd=estimate,
        per_run_usd=caps.per_run,
        repo_month_usd=caps.repo_month,
        installation_month_usd=caps.installation_month,
        unpriced=unpriced,
        refuse_unpriced=refuse,
    )


def quota_for(config: RepoConfig, now: datetime | None = None) -> Quota:
    """The daily quotas: runs started here in the last day."""
    since = (now or datetime.now(UTC)) - timedelta(days=1)
    return Quota(since, config.quotas.per_repo_per_day, config.quotas.per_user_per_day)


# -- what users read ----------------------------------------------------------------


def _usd(value: float | None) -> str:
    return "no cap" if value is None else f"${value:.4f}"


def estimate_text(spec: DebateSpec, est: RunEstimate, caps: Caps, prices: PriceBook) -> str:
    """The reply to `/debate estimate`: the plan, per model, and its cost."""
    by_model: dict[str, list[int]] = {}
    for call in est.calls:
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
        price, basis = prices.lookup(model)
        shown = (
            "unknown"
            if price is None
            else f"${price.input:g} / ${price.output:g} per M"
            + (" (assumed)" if basis == "assumed" else "")
        )
        lines.append(f"| `{model}` | {calls} | {inp:,} | {out:,} | {shown} |")
    lines += [
        "",
        f"Estimated cost: **${est.usd:.4f}** over {est.model_calls} model calls "
        f"({est.input_tokens:,} input and {est.output_tokens:,} output tokens; answers "
        "assumed to use most of their word limit"
        + ("; turns that read the repository, most of their tool budget" if spec.tools else "")
        + ").",
    ]
    if est.unpriced:
        lines.append(
            "No price is known for "
            + ", ".join(f"`{m}`" for m in est.unpriced)
            + ": counted as $0 here."
        )
    if caps.any:
        lines.append(
            f"Budgets: per run {_usd(caps.per_run)}, this repository per month "
            f"{_usd(caps.repo_month)}, this installation per month {_usd(caps.installation_month)}."
        )
    return "\n".join(lines)


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
