"""The run's token and cost caps."""

from __future__ import annotations

from bot.engine.view import RunView, evolve, noted


def check_budget(run: RunView, ahead: int = 0) -> tuple[bool, RunView]:
    """Whether a cap is reached, and ``run`` marked capped (with one note, the
    first time) if so. Checked before each new persona turn group and vote.

    ``ahead``: the persona turns about to start. The cost cap stops them too
    when they would pass it, each costing what a turn of the last round cost:
    a run stops at its cap rather than a round past it."""
    spec = run.spec
    cap = spec.max_cost_usd
    spent = run.cost_used()
    if spec.max_tokens is not None and run.tokens_used() >= spec.max_tokens:
        reason = f"the token cap ({spec.max_tokens:,} tokens) was reached"
    elif cap is not None and spent >= cap:
        reason = f"the cost cap (${cap:g}) was reached"
    elif cap is not None and ahead and spent + ahead * _turn_cost(run) > cap:
        reason = (
            f"the cost cap (${cap:g}) was reached: ${spent:.4f} is spent and the next "
            f"turns would pass it"
        )
    else:
        return False, run
    if not run.capped:
        run = noted(
            evolve(run, capped=True),
            f"Budget: {reason}; no new persona turns were started and the "
            "synthesis uses what exists.",
        )
    return True, run


def _turn_cost(run: RunView) -> float:
    """What a persona turn of the latest round cost, on average (0: no round yet)."""
    if not run.rounds:
        return 0.0
    turns = [t for t in run.rounds[-1].turns.values() if t.status == "ok"]
    return sum(t.usage.cost_usd for t in turns) / len(turns) if turns else 0.0
