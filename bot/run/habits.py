"""What a model's turns really use, learned from this installation's runs
(the estimate's ``Habits``, bot/run/estimate.py).

From the stored turns of the same model and mode (``RunStore.usage_history``:
the ledger's calls, their answers and, for a turn with tools, its last step's
evidence):

- **fill**: an answer's words ÷ its word limit, from persona turns (their limit
  is the run's ``word_budget``; the synthesis is assumed to fill its own alike);
- **word length**: an answer's characters per word, so the estimate's
  placeholder answers are as long in characters as the real ones;
- **scale**: the provider's output tokens ÷ the estimator's count of the same
  answer (four characters a token): how the provider's tokenizer counts text;
- **prompt scale**: the provider's input tokens ÷ the estimator's count of the
  prompts of the latest runs (known exactly: the engine replays a run from its
  spec and stored turns), which also says whether the provider counts the
  tools' definitions;
- **the cache**: the share of a turn's input the provider served from its
  prompt cache (turns without tools, and with them), which also sees what
  runs close together share;
- **tool steps and bytes**: a turn with tools' reading steps (model calls
  before its answer) and the bytes its tools brought back, and the tool
  scale: the provider's tokens for what those steps added to the
  conversation ÷ the estimator's count of the same bytes.

Each figure needs ``MIN_TURNS`` turns of history (turns with tools, for the
tool figures); until then the prior stands (``PRIOR``, ``PRIOR_HIGH``). The
expected figure is the mean, the high end the 90th percentile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from bot.core.errors import ProtocolError
from bot.engine.prompts import word_budget
from bot.engine.protocol import next_step
from bot.engine.tools import MAX_BYTES, MAX_STEPS
from bot.engine.types import PERSONA_PHASES, Batch, DebateSpec, Turn
from bot.models.base import approx_tokens
from bot.run.estimate import (
    CALL_TOKENS,
    CHARS_PER_TOKEN,
    NO_HISTORY,
    Forecast,
    Profile,
    prompt_text,
    tool_reads,
)
from bot.store.rows import TurnUse, UsageHistory

MIN_TURNS = 20
# Prompts replayed behind the prompt scale (besides MIN_TURNS of history).
MIN_PROMPTS = 5
HIGH_QUANTILE = 0.9
# An answer shorter than this says little about the tokenizer.
_MIN_SCALE_CHARS = 200
# Answers past their limit are cut at the output cap; a fill past this is noise.
_MAX_FILL = 1.5
# An answer shorter than this (in words) says little about its words' length.
_MIN_WORDS = 20


def learn(history: UsageHistory, models: Iterable[str] = ()) -> dict[str, Profile]:
    """The profile of each model of ``history`` and ``models``. A figure a model has too little
    history for comes from the turns of all the plan's models together (the
    same installation and mode), and from the prior while those are too few."""
    by_model: dict[str, list[TurnUse]] = {}
    for use in history.turns:
        by_model.setdefault(use.model, []).append(use)
    pooled = _profile(history.turns, history, NO_HISTORY)
    named = sorted({*models, *by_model})
    return {model: _profile(by_model.get(model, ()), history, pooled) for model in named}


def _profile(uses: Sequence[TurnUse], history: UsageHistory, fallback: Profile) -> Profile:
    specs = history.specs or {}
    fills = [
        min(_MAX_FILL, u.words / word_budget(specs[u.run_id]))
        for u in uses
        if u.phase in PERSONA_PHASES and u.run_id in specs
    ]
    scales = [
        u.answer_tokens / (u.chars / CHARS_PER_TOKEN)
        for u in uses
        if u.chars >= _MIN_SCALE_CHARS and u.answer_tokens > 0
    ]
    word_chars = [
        u.chars / u.words for u in uses if u.phase in PERSONA_PHASES and u.words >= _MIN_WORDS
    ]
    tooled = [u for u in uses if u.tool_steps is not None]
    tool_scales = [x for x in map(_tool_scale, tooled) if x is not None]
    prompt_scales = _prompt_scales(uses, history)
    expected, high = fallback.expected, fallback.high
    turns, tool_turns = fallback.turns, fallback.tool_turns
    if len(fills) >= MIN_TURNS:
        expected = replace(expected, fill=_mean(fills))
        high = replace(high, fill=_quantile(fills))
        turns = len(fills)
    if len(word_chars) >= MIN_TURNS:
        expected = replace(expected, word_chars=_mean(word_chars))
        high = replace(high, word_chars=_mean(word_chars))
    if len(scales) >= MIN_TURNS:
        expected = replace(expected, scale=_mean(scales))
        high = replace(high, scale=_quantile(scales))
    if len(uses) >= MIN_TURNS and len(prompt_scales) >= MIN_PROMPTS:
        expected = replace(expected, prompt_scale=_mean(prompt_scales))
        high = replace(high, prompt_scale=_quantile(prompt_scales))
    for field, group in (
        ("cache_share", [u for u in uses if u.tool_steps is None]),
        ("tool_cache_share", tooled),
    ):
        shares = [u.cached_tokens / u.input_tokens for u in group if u.input_tokens > 0]
        if len(shares) >= MIN_TURNS:  # the high end: the runs the cache served least
            expected = replace(expected, **{field: _mean(shares)})
            high = replace(high, **{field: _quantile(shares, 1 - HIGH_QUANTILE)})
    if len(tool_scales) >= MIN_TURNS:
        expected = replace(expected, tool_scale=_mean(tool_scales))
        high = replace(high, tool_scale=_quantile(tool_scales))
    if len(tooled) >= MIN_TURNS:
        steps = [float(u.tool_steps or 0) for u in tooled]
        read = [float(u.tool_bytes) for u in tooled]
        expected = replace(expected, tool_steps=_mean(steps), tool_bytes=_mean(read))
        high = replace(high, tool_steps=_quantile(steps), tool_bytes=_quantile(read))
        tool_turns = len(tooled)
    return Profile(expected, high, turns, tool_turns)


def _prompt_scales(uses: Sequence[TurnUse], history: UsageHistory) -> list[float]:
    """The provider's tokens ÷ the estimator's count of each prompt of the runs
    replayed (a turn with tools: its first call's, the tools' definitions
    included). The engine is deterministic, so the stored turns give every
    request's prompt exactly."""
    by_key = {(u.run_id, u.turn_id): u for u in uses}
    specs = history.specs or {}
    scales = []
    for run_id, turns in (history.replays or {}).items():
        if run_id not in specs:
            continue
        for turn_id, counted in _counted(run_id, specs[run_id], turns):
            use = by_key.get((run_id, turn_id))
            if use is None or counted <= 0:
                continue
            real = use.input_tokens if use.tool_steps is None else use.first_input_tokens
            if real > 0:
                scales.append(real / counted)
    return scales


# Replays are pure: a run's prompts counted once per process (by run and turns).
_REPLAYED: dict[tuple[str, int], tuple[tuple[str, int], ...]] = {}
_REPLAYS_KEPT = 1024


def _counted(run_id: str, spec: DebateSpec, turns: Sequence[Turn]) -> tuple[tuple[str, int], ...]:
    """(turn id, the estimator's count of its prompt) of each request the engine
    asked for, as far as the stored turns answer it."""
    key = (run_id, len(turns))
    if key in _REPLAYED:
        return _REPLAYED[key]
    stored = {t.key.id(): t for t in turns}
    done: list[Turn] = []
    out: list[tuple[str, int]] = []
    try:
        while len(done) < len(turns):
            step = next_step(spec, done)
            if not isinstance(step, Batch):
                break
            answered = [stored.get(r.key.id()) for r in step.requests]
            out += [(r.key.id(), approx_tokens(prompt_text(r))) for r in step.requests]
            if any(t is None for t in answered):
                break
            done += [t for t in answered if t is not None]
    except ProtocolError:  # a spec or turns this engine no longer accepts
        pass
    if len(_REPLAYED) >= _REPLAYS_KEPT:
        _REPLAYED.clear()
    _REPLAYED[key] = tuple(out)
    return _REPLAYED[key]


def _tool_scale(use: TurnUse) -> float | None:
    """The provider's tokens for what a turn's tool steps added to its input ÷
    the estimator's count of the same (bot/run/estimate.py, ``_tool_loop``: the
    calls and the bytes read, added in even shares, each step re-sending the
    steps before): the tool answers' tokenizer and the loop's shape in one."""
    n, total, first = use.tool_steps or 0, use.input_tokens, use.first_input_tokens
    if n < 1 or use.tool_bytes <= 0 or first <= 0:
        return None
    added = total - (n + 1) * first  # what the steps' calls and answers cost, re-sent
    counted = (CALL_TOKENS + use.tool_bytes / n / CHARS_PER_TOKEN) * n * (n + 1) / 2
    return added / counted if added > 0 else None


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
