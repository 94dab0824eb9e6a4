"""What a run will cost, estimated from its plan before it starts (pure).

The engine is walked as a dry run does (``next_step`` with placeholder replies
from ``bot.debate.rehearsal``), so the estimate sees the batches the run will
ask for: its personas, rounds, judge and voter calls, the subject and context
in every prompt. Two things a rehearsal cannot know are assumed: each answer
written under a word limit ("Write at most N words") is taken to fill
``ANSWER_FILL`` of it, and a prompt's shared prefix (system + subject +
context) is a prefix-cache hit once the same model has seen it in an earlier
batch (a cache write on the first sight for an Anthropic-style provider).
Tokens are counted as ``approx_tokens`` (four characters a token, about what
providers' tokenizers give for English) unless a counter is passed. Prices come
from the deployment's ``PriceBook``; a model without one adds nothing and is
listed in ``unpriced``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from bot.debate.protocol import next_step
from bot.debate.rehearsal import reply
from bot.debate.types import DebateSpec, ModelRequest, Outcome, Prompt, Turn, Usage
from bot.errors import ProtocolError
from bot.llm.base import approx_tokens
from bot.llm.pricing import PriceBook

# Share of a turn's word limit an answer is assumed to use: models asked for "at
# most N words" write most of them.
ANSWER_FILL = 0.75
# Far above any real plan (frame + 10 rounds × 3 tiers + votes + synthesis).
_MAX_BATCHES = 200
_WORD_LIMIT = re.compile(r"Write at most (\d+) words")
_FILLER = "This paragraph stands for the reasoning a model writes at this point."
# Providers whose prompt cache is written explicitly (and billed as such).
_CACHE_WRITE_PROVIDERS = frozenset({"anthropic"})


@dataclass(frozen=True)
class CallEstimate:
    slot: str
    phase: str
    model: str
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    output_tokens: int
    usd: float


@dataclass(frozen=True)
class RunEstimate:
    calls: tuple[CallEstimate, ...]
    batches: int
    outcome: str  # the outcome kind the walk reached
    unpriced: tuple[str, ...]  # models of the plan with no price, sorted

    @property
    def usd(self) -> float:
        return round(sum(c.usd for c in self.calls), 8)

    @property
    def input_tokens(self) -> int:
        return sum(c.input_tokens for c in self.calls)

    @property
    def output_tokens(self) -> int:
        return sum(c.output_tokens for c in self.calls)


def plan_models(spec: DebateSpec) -> tuple[str, ...]:
    """Every model reference the plan may call (primaries and fallbacks), sorted."""
    refs = {spec.judge, *spec.judge_fallbacks, *spec.voters, *spec.default_models}
    for persona in spec.personas:
        refs.update((persona.model, *persona.fallbacks))
    for tier in spec.tiers:
        refs.update(tier)
    return tuple(sorted(r for r in refs if r))


def padded_answer(prompt_text: str, fill: float = ANSWER_FILL) -> str:
    """The rehearsal's reply, lengthened to ``fill`` of the prompt's word limit
    (the filler goes after the first two lines, before any stance block)."""
    answer = reply(prompt_text)
    limit = _WORD_LIMIT.search(prompt_text)
    if limit is None:
        return answer
    missing = int(int(limit.group(1)) * fill) - len(answer.split())
    if missing <= 0:
        return answer
    per = len(_FILLER.split())
    filler = " ".join([_FILLER] * (missing // per + 1))
    head, sep, tail = answer.partition("\n")
    second, sep2, rest = tail.partition("\n")
    return f"{head}{sep}{second}\n{filler}{sep2 or chr(10)}{rest}"


def _text(prompt: Prompt) -> str:
    return prompt.system + prompt.prefix + prompt.suffix


def estimate_run(
    spec: DebateSpec,
    prices: PriceBook,
    *,
    fill: float = ANSWER_FILL,
    count: Callable[[str], int] = approx_tokens,
) -> RunEstimate:
    """The run's calls, tokens and cost as its plan predicts them."""
    turns: list[Turn] = []
    calls: list[CallEstimate] = []
    seen: set[tuple[str, str]] = set()  # (model, shared prefix) cached by an earlier batch
    for batches in range(_MAX_BATCHES):
        step = next_step(spec, turns)
        if isinstance(step, Outcome):
            return RunEstimate(
                tuple(calls),
                batches,
                step.kind,
                tuple(prices.unpriced([*plan_models(spec), *(c.model for c in calls)])),
            )
        fresh: set[tuple[str, str]] = set()
        for request in step.requests:
            call, answer = _call(request, prices, seen, fill, count)
            calls.append(call)
            fresh.add((call.model, request.prompt.system + request.prompt.prefix))
            turns.append(
                Turn(
                    key=request.key,
                    text=answer,
                    model=call.model,
                    usage=Usage(
                        input_tokens=call.input_tokens,
                        output_tokens=call.output_tokens,
                        cost_usd=call.usd,
                    ),
                )
            )
        # Requests of one batch run side by side: they miss each other's cache.
        seen |= fresh
    raise ProtocolError(f"the estimate did not finish within {_MAX_BATCHES} batches")


def _call(
    request: ModelRequest,
    prices: PriceBook,
    seen: set[tuple[str, str]],
    fill: float,
    count: Callable[[str], int],
) -> tuple[CallEstimate, str]:
    model = request.models[0] if request.models else ""
    text = _text(request.prompt)
    answer = padded_answer(text, fill)
    shared = request.prompt.system + request.prompt.prefix
    prefix_tokens = count(shared)
    input_tokens = count(text)
    output_tokens = min(count(answer), request.max_output_tokens)
    cached = written = 0
    if (model, shared) in seen:
        cached = prefix_tokens
    elif model.partition("/")[0] in _CACHE_WRITE_PROVIDERS:
        written = prefix_tokens
    usage = Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cached_tokens=cached,
        cache_write_tokens=written,
    )
    usd = prices.charge(model, usage).cost_usd
    call = CallEstimate(
        request.key.slot,
        request.key.phase,
        model,
        input_tokens,
        cached,
        written,
        output_tokens,
        usd,
    )
    return call, answer
