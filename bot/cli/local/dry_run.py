"""`debate-bot run --dry-run`: the batches a run would send and what it would
cost, with no model called and no key needed.

The plan and its cost are the estimate's (``bot.run.estimate.forecast``, the
one `/debate estimate` and admission quote): the engine walked with placeholder
replies from the scripted rehearsal (``bot.engine.rehearsal.reply``). The
printout says so — it is a plan, not a debate: a real run may add counter
rounds while a crux stays open, stop earlier on convergence, and auto-pick
different personas.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.engine.prompts import word_budget
from bot.engine.rehearsal import reply
from bot.engine.types import Batch, DebateSpec, ModelRequest, Prompt, Turn, Usage
from bot.models.base import approx_tokens
from bot.run.estimate import Forecast
from bot.run.habits import basis


def _text(prompt: Prompt) -> str:
    return prompt.system + prompt.prefix + prompt.suffix


class Placeholders:
    """A completer that calls no model: the scripted rehearsal writes each turn."""

    async def complete(self, request: ModelRequest) -> Turn:
        text = _text(request.prompt)
        answer = reply(text)
        return Turn(
            key=request.key,
            text=answer,
            model=request.models[0] if request.models else "",
            usage=Usage(input_tokens=approx_tokens(text), output_tokens=approx_tokens(answer)),
        )


def format_plan(
    spec: DebateSpec,
    est: Forecast,
    *,
    source: str,
    notes: Sequence[str] = (),
) -> str:
    """The plan as the estimate walked it (bot/run/estimate.py: the batches the
    engine asks for, answered by placeholder replies) and its cost."""
    batch_lines, totals = _batches(est.expected.batches)
    lines = [*_head(spec, source, notes), *batch_lines, *_cost(spec, est, totals)]
    return "\n".join(lines) + "\n"


def _head(spec: DebateSpec, source: str, notes: Sequence[str]) -> list[str]:
    """The debate as planned: topic, mode, personas, context, warnings, notes."""
    lines = [
        f"DRY RUN of {source} — planned batches; no model is called.",
        f"Topic: {spec.title}",
        f"Mode: {spec.mode} · rounds: up to {spec.rounds} · turn order: {spec.turn_order} · "
        f"up to {word_budget(spec):,} words per turn",
    ]
    if spec.personas:
        lines.append(
            "Personas: "
            + ", ".join(f"{p.name} ({p.model or 'default model'})" for p in spec.personas)
        )
    else:
        lines.append("Personas: auto-picked by the judge in the frame batch")
    lines += [
        f"Context file: {f.path} ({f.size_bytes:,} bytes)" + (" [CONDENSED]" if f.condensed else "")
        for f in spec.context_files
    ]
    lines += [f"Warning: {w}" for w in spec.warnings]
    lines += [f"Note: {n}" for n in notes]
    return lines


@dataclass(frozen=True)
class _Totals:
    batches: int
    requests: int
    input_tokens: int
    prefix_tokens: int  # of the last request: the prefix the requests share


def _batches(batches: Sequence[Batch]) -> tuple[list[str], _Totals]:
    """Each batch with its requests, and their totals."""
    lines: list[str] = []
    requests = input_tokens = prefix_tokens = 0
    for number, batch in enumerate(batches, 1):
        head = batch.requests[0].key
        label = head.phase if head.round == 0 else f"{head.phase}, round {head.round}"
        count = len(batch.requests)
        how = f"{count} requests in parallel" if count > 1 else "1 request"
        lines += ["", f"Batch {number} · {label} — {how}"]
        for request in batch.requests:
            tokens = approx_tokens(_text(request.prompt))
            prefix_tokens = approx_tokens(request.prompt.system + request.prompt.prefix)
            requests += 1
            input_tokens += tokens
            models = " → ".join(request.models) or "(no model)"
            lines.append(
                f"  - {request.key.slot}: {models} · ~{tokens:,} input tokens"
                f" · ≤ {request.max_output_tokens:,} output tokens"
            )
    return lines, _Totals(len(batches), requests, input_tokens, prefix_tokens)


def _cost(spec: DebateSpec, est: Forecast, totals: _Totals) -> list[str]:
    """The totals, the estimate and what it is based on, and what a real run may do."""
    cost = est.expected
    lines = [
        "",
        f"Total: {totals.batches} batches, {totals.requests} requests, "
        f"~{totals.input_tokens:,} input tokens before prefix caching "
        f"(~{totals.prefix_tokens:,} of each request is a shared, "
        "cacheable prefix).",
        f"Estimated cost: ~${est.usd:.4f}, up to ${est.high_usd:.4f} (the high end); its first "
        f"round ${est.first_round_usd:.4f}. {cost.model_calls} model calls, "
        f"~{cost.input_tokens:,} input and ~{cost.output_tokens:,} output tokens, tool steps "
        "included.",
        "Based on:",
        *(f"  - {line}" for line in basis(est)),
    ]
    if cost.unpriced:
        lines.append(
            f"No price is known for {', '.join(cost.unpriced)}: counted as $0 here "
            "(DEBATE_BOT_PRICES_FILE adds prices)."
        )
    lines += [
        f"Planned outcome: {cost.outcome}.",
        "Simulated with scripted placeholder replies: a real run may add counter rounds "
        f"(up to {spec.rounds} rounds in all) while a crux stays open, stop earlier when the "
        "personas converge, or auto-pick other personas.",
    ]
    return lines
