"""What a model's turns really use, learned from this installation's runs
(the estimate's ``Habits``, bot/run/estimate.py).

From the stored turns of the same model and mode (``RunStore.usage_history``:
the ledger's calls, their answers and, for a turn with tools, its last step's
evidence):

- **fill**: an answer's words ÷ its word limit, from persona turns (their limit
  is the run's ``word_budget``; the synthesis is assumed to fill its own alike);
- **scale**: the provider's output tokens ÷ the estimator's count of the same
  answer (four characters a token): how the provider's tokenizer counts text,
  applied to prompts and answers alike;
- **tool steps and bytes**: a turn with tools' reading steps (model calls
  before its answer) and the bytes its tools brought back.

Each figure needs ``MIN_TURNS`` turns of history (turns with tools, for the
tool figures); until then the prior stands (``PRIOR``, ``PRIOR_HIGH``). The
expected figure is the mean, the high end the 90th percentile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from bot.engine.prompts import word_budget
from bot.engine.tools import MAX_BYTES, MAX_STEPS
from bot.engine.types import DebateSpec
from bot.run.estimate import (
    CHARS_PER_TOKEN,
    NO_HISTORY,
    Forecast,
    Profile,
    tool_reads,
)
from bot.store.rows import TurnUse, UsageHistory

MIN_TURNS = 20
HIGH_QUANTILE = 0.9
_PERSONA_PHASES = frozenset({"opening", "rebuttal", "counter"})
# An answer shorter than this says little about the tokenizer.
_MIN_SCALE_CHARS = 200
# Answers past their limit are cut at the output cap; a fill past this is noise.
_MAX_FILL = 1.5


def learn(history: UsageHistory, models: Iterable[str] = ()) -> dict[str, Profile]:
    """The profile of each model of ``history`` and ``models``. A figure a model has too little
    history for comes from the turns of all the plan's models together (the
    same installation and mode), and from the prior while those are too few."""
    specs = history.specs or {}
    by_model: dict[str, list[TurnUse]] = {}
    for use in history.turns:
        by_model.setdefault(use.model, []).append(use)
    pooled = _profile(history.turns, specs, NO_HISTORY)
    named = sorted({*models, *by_model})
    return {model: _profile(by_model.get(model, ()), specs, pooled) for model in named}


def _profile(
    uses: Sequence[TurnUse], specs: Mapping[str, DebateSpec], fallback: Profile
) -> Profile:
    fills = [
        min(_MAX_FILL, u.words / word_budget(specs[u.run_id]))
        for u in uses
        if u.phase in _PERSONA_PHASES and u.run_id in specs
    ]
    scales = [
        u.answer_tokens / (u.chars / CHARS_PER_TOKEN)
        for u in uses
        if u.chars >= _MIN_SCALE_CHARS and u.answer_tokens > 0
    ]
    tooled = [u for u in uses if u.tool_steps is not None]
    expected, high = fallback.expected, fallback.high
    turns, tool_turns = fallback.turns, fallback.tool_turns
    if len(fills) >= MIN_TURNS:
        expected = replace(expected, fill=_mean(fills))
        high = replace(high, fill=_quantile(fills))
        turns = len(fills)
    if len(scales) >= MIN_TURNS:
        expected = replace(expected, scale=_mean(scales))
        high = replace(high, scale=_quantile(scales))
    if len(tooled) >= MIN_TURNS:
        steps = [float(u.tool_steps or 0) for u in tooled]
        read = [float(u.tool_bytes) for u in tooled]
        expected = replace(expected, tool_steps=_mean(steps), tool_bytes=_mean(read))
        high = replace(high, tool_steps=_quantile(steps), tool_bytes=_quantile(read))
        tool_turns = len(tooled)
    return Profile(expected, high, turns, tool_turns)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _quantile(values: Sequence[float], q: float = HIGH_QUANTILE) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def basis(est: Forecast) -> list[str]:
    """Where the estimate's figures come from, a line per model: its history
    here or the prior, and with tools what a turn is taken to read."""
    lines = []
    for model, p in sorted(est.profiles.items()):
        e = p.expected
        line = f"`{model}`: answers at {e.fill:.0%} of their word limit"
        line += (
            f" ({p.turns} turns of history here)"
            if p.turns
            else f" (the prior: fewer than {MIN_TURNS} turns of history here)"
        )
        if est.tools:
            steps, read = tool_reads(e, MAX_STEPS, MAX_BYTES, est.supply_bytes)
            line += f"; a turn with tools reads {read / 1000:.1f} kB in {steps:.1f} tool steps"
            line += (
                f" ({p.tool_turns} turns with tools)"
                if p.tool_turns
                else " (the prior" + (", bounded by the repository)" if est.bounded else ")")
            )
        lines.append(line)
    if est.tools and est.supply_bytes is not None:
        lines.append(f"the repository holds {est.supply_bytes / 1000:,.1f} kB of files")
    return lines
