"""`debate-bot run --dry-run`: the batches a run would send, with no model called.

``next_step`` only moves on once a batch has turns, so the walk is simulated:
each request gets a placeholder turn written locally by the scripted rehearsal
(``bot.engine.rehearsal.reply``). The printout says so — it is a plan, not a
debate: a real run may add counter rounds while a crux stays open, stop
earlier on convergence, and auto-pick different personas.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bot.core.errors import ProtocolError
from bot.engine.prompts import word_budget
from bot.engine.rehearsal import reply
from bot.engine.types import Batch, DebateSpec, ModelRequest, Outcome, Prompt, Turn, Usage
from bot.models.base import approx_tokens
from bot.models.estimate import estimate_run
from bot.models.pricing import PriceBook
from bot.run.execute import execute

# Far above any real plan (frame + 10 rounds × 3 tiers + votes + synthesis).
_MAX_BATCHES = 200


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


@dataclass
class _Batches:
    """Hooks that keep every batch the engine asks for."""

    seen: list[Batch] = field(default_factory=list)

    async def before_step(self) -> None:
        return None

    async def on_turn(self, turn: Turn) -> None:
        return None

    async def alongside(self, finished: Sequence[Turn], step: Batch | Outcome) -> None:
        if isinstance(step, Batch):
            if len(self.seen) >= _MAX_BATCHES:
                raise ProtocolError(f"the dry run did not finish within {_MAX_BATCHES} batches")
            self.seen.append(step)


async def simulate(spec: DebateSpec) -> tuple[list[Batch], Outcome]:
    """Every batch the engine asks for, answered by placeholder turns."""
    batches = _Batches()
    outcome = await execute(spec, (), models=Placeholders(), hooks=batches)
    return batches.seen, outcome


def format_plan(
    spec: DebateSpec,
    batches: Sequence[Batch],
    outcome: Outcome,
    *,
    source: str,
    notes: Sequence[str] = (),
    prices: PriceBook | None = None,
) -> str:
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
    total_requests = 0
    total_tokens = 0
    prefix_tokens = 0
    for number, batch in enumerate(batches, 1):
        head = batch.requests[0].key
        label = head.phase if head.round == 0 else f"{head.phase}, round {head.round}"
        count = len(batch.requests)
        how = f"{count} requests in parallel" if count > 1 else "1 request"
        lines += ["", f"Batch {number} · {label} — {how}"]
        for request in batch.requests:
            tokens = approx_tokens(_text(request.prompt))
            prefix_tokens = approx_tokens(request.prompt.system + request.prompt.prefix)
            total_requests += 1
            total_tokens += tokens
            models = " → ".join(request.models) or "(no model)"
            lines.append(
                f"  - {request.key.slot}: {models} · ~{tokens:,} input tokens"
                f" · ≤ {request.max_output_tokens:,} output tokens"
            )
    # The cost as admission would estimate it (bot/models/estimate.py): answers
    # filling most of their word limit, prefixes cached after first sight.
    cost = estimate_run(replace(spec, available_providers=frozenset()), prices or PriceBook())
    unpriced = f"; no price for {', '.join(cost.unpriced)}" if cost.unpriced else ""
    lines += [
        "",
        f"Total: {len(batches)} batches, {total_requests} requests, ~{total_tokens:,} input "
        f"tokens before prefix caching (~{prefix_tokens:,} of each request is a shared, "
        "cacheable prefix).",
        f"Estimated cost: ~${cost.usd:.4f} (~{cost.input_tokens:,} input and "
        f"~{cost.output_tokens:,} output tokens with answers using most of their word "
        f"limit{unpriced}).",
        f"Planned outcome: {outcome.kind}.",
        "Simulated with scripted placeholder replies: a real run may add counter rounds "
        f"(up to {spec.rounds} rounds in all) while a crux stays open, stop earlier when the "
        "personas converge, or auto-pick other personas.",
    ]
    return "\n".join(lines) + "\n"
