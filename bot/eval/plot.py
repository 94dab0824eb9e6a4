"""``accuracy-cost.png``: one point per configuration (cost per case, accuracy)
with its 95 % interval. Drawn with matplotlib's Agg backend (no display),
from the optional ``eval`` extra; without it the report says so."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.eval.report import ConfigFigures


def accuracy_cost_png(figs: Sequence[ConfigFigures], path: Path) -> Path | None:
    """Write the picture; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        return None
    shown = [f for f in figs if f.accuracy is not None]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    try:
        for f in shown:
            acc = f.accuracy or 0.0
            ax.errorbar(
                [f.cost_usd],
                [100 * acc],
                yerr=[[100 * (acc - f.ci_low)], [100 * (f.ci_high - acc)]],
                fmt="o",
                capsize=4,
                label=f.name,
            )
            ax.annotate(f.name, (f.cost_usd, 100 * acc), textcoords="offset points", xytext=(6, 6))
        ax.set_xlabel("cost per case (USD)")
        ax.set_ylabel("accuracy of answered cases (%), 95 % interval")
        ax.set_ylim(0, 100)
        ax.set_xlim(left=0)
        if shown and max(f.cost_usd for f in shown) == 0:
            ax.set_xlim(-0.001, 0.01)
        ax.grid(True, alpha=0.3)
        ax.set_title("Accuracy against cost, per configuration")
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
