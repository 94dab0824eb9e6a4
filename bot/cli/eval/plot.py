"""``accuracy-cost.png``: one point per configuration (cost per case, accuracy)
with its 95 % interval. Drawn with matplotlib's Agg backend (no display),
from the optional ``eval`` extra; without it the report says so."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.cli.eval.stats import ConfigFigures


def accuracy_cost_png(figs: Sequence[ConfigFigures], path: Path) -> Path | None:
    """Write the picture; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        return None
    shown = [f for f in figs if f.accuracy is not None]
    # Without prices (test models, unpriced local models) tokens stand in for cost.
    priced = any(f.cost_usd > 0 for f in shown)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    try:
        for f in shown:
            acc = f.accuracy or 0.0
            x = f.cost_usd if priced else f.tokens
            ax.errorbar(
                [x],
                [100 * acc],
                # Clamped: at 0 or 1 the interval's end can miss the point by a rounding.
                yerr=[[max(0.0, 100 * (acc - f.ci_low))], [max(0.0, 100 * (f.ci_high - acc))]],
                fmt="o",
                capsize=4,
                label=f.name,
            )
            ax.annotate(f.name, (x, 100 * acc), textcoords="offset points", xytext=(6, 6))
        ax.set_xlabel("cost per case (USD)" if priced else "tokens per case (no prices known)")
        ax.set_ylabel("accuracy of answered cases (%), 95 % interval")
        ax.set_ylim(0, 105)
        ax.set_xlim(
            left=0, right=max([1e-9, *((f.cost_usd if priced else f.tokens) for f in shown)]) * 1.2
        )
        ax.grid(True, alpha=0.3)
        ax.set_title("Accuracy against cost, per configuration")
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
