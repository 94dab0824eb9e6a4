"""The run's token and cost caps."""

from __future__ import annotations

from bot.engine.view import RunView, evolve, noted


def check_budget(run: RunView) -> tuple[bool, RunView]:
    """Whether a cap is reached, and ``run`` marked capped (with one note, the
    first time) if so. Checked before each new persona turn group and vote."""
    spec = run.spec
    if spec.max_tokens is not None and run.tokens_used() >= spec.max_tokens:
        reason = f"the token cap ({spec.max_tokens:,} tokens) was reached"
    elif spec.max_cost_usd is not None and run.cost_used() >= spec.max_cost_usd:
        reason = f"the cost cap (${spec.max_cost_usd:g}) was reached"
    else:
        return False, run
    if not run.capped:
        run = noted(
            evolve(run, capped=True),
            f"Budget: {reason}; no new persona turns were started and the "
            "synthesis uses what exists.",
        )
    return True, run
