"""What a run will cost, estimated from its plan before it starts (pure).

The engine is walked as a dry run does (``next_step`` with placeholder replies
from ``bot.engine.rehearsal``), so the estimate sees the batches the run will
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

A request with tools (``ModelRequest.tools``, a run with tools on) is a loop of
model steps (bot/run/tool_loop.py), and each step re-sends the conversation so far.
It is assumed to use ``TOOL_FILL`` of its budget: that share of its tool steps
(``max_steps - 1``; the last step answers), each a response of calls answered
by an even share of ``TOOL_FILL`` of its byte budget. A step's request extends
the one before byte for byte, so all of it but the newest calls and answers is a
prefix-cache hit (written to the cache, for an Anthropic-style provider).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.errors import ProtocolError
from bot.engine.protocol import next_step
from bot.engine.rehearsal import reply
from bot.engine.types import DebateSpec, ModelRequest, Outcome, Prompt, Turn, Usage
from bot.models.base import approx_tokens
from bot.models.pricing import PriceBook

# Share of a turn's word limit an answer is assumed to use: models asked for "at
# most N words" write most of them.
ANSWER_FILL = 0.75
# Far above any real plan (frame + 10 rounds × 3 tiers + votes + synthesis).
_MAX_BATCHES = 200
_WORD_LIMIT = re.compile(r"Write at most (\d+) words")
_FILLER = "This paragraph stands for the reasoning a model writes at this point."
# Providers whose prompt cache is written explicitly (and billed as such).
_CACHE_WRITE_PROVIDERS = frozenset({"anthropic"})
# Share of a turn's tool budget (steps, bytes) a turn with tools is assumed to
# use: the same lean as the answers' (an estimate that admits runs should not
# fall short of the spend).
TOOL_FILL = 0.75
# What one step of calls writes, and a line of what read_file answers (counted
# with the estimate's own counter, so a tokenizer's view of code is kept).
_CALL_TEXT = 'read_file {"path": "src/app/handlers/retry.py", "start_line": 1}'
_TOOL_LINE = "  41:         return self._cache.get(key, default)  # held until expiry\n"


@dataclass(frozen=True)
class CallEstimate:
    """One turn: a model call, or (with tools) its loop's steps summed."""

    slot: str
    phase: str
    model: str
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    output_tokens: int
    usd: float
    steps: int = 1  # model calls the turn makes (tool steps, then the answer)


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

    @property
    def model_calls(self) -> int:
        """Model calls, a turn's tool steps included."""
        return sum(c.steps for c in self.calls)


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
    tool_fill: float = TOOL_FILL,
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
            call, answer = _call(request, prices, seen, fill, count, tool_fill)
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
    tool_fill: float,
) -> tuple[CallEstimate, str]:
    model = request.models[0] if request.models else ""
    text = _text(request.prompt)
    answer = padded_answer(text, fill)
    shared = request.prompt.system + request.prompt.prefix
    prefix_tokens = count(shared)
    input_tokens = count(text)
    output_tokens = min(count(answer), request.max_output_tokens)
    writes = model.partition("/")[0] in _CACHE_WRITE_PROVIDERS
    cached = written = 0
    if (model, shared) in seen:
        cached = prefix_tokens
    elif writes:
        written = prefix_tokens
    legs = [(input_tokens, cached, written)]
    outputs = [output_tokens]
    if request.tools is not None:
        legs, outputs = _tool_legs(request, legs[0], output_tokens, writes, count, tool_fill)
    usage = Usage(
        input_tokens=sum(leg[0] for leg in legs),
        output_tokens=sum(outputs),
        cached_tokens=sum(leg[1] for leg in legs),
        cache_write_tokens=sum(leg[2] for leg in legs),
    )
    usd = prices.charge(model, usage).cost_usd
    call = CallEstimate(
        request.key.slot,
        request.key.phase,
        model,
        usage.input_tokens,
        usage.cached_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
        usd,
        steps=len(legs),
    )
    return call, answer


def _tool_legs(
    request: ModelRequest,
    first: tuple[int, int, int],
    answer_tokens: int,
    writes: bool,
    count: Callable[[str], int],
    tool_fill: float,
) -> tuple[list[tuple[int, int, int]], list[int]]:
    """A turn's tool loop as (input, cached, written) per step and each step's
    output: ``tool_fill`` of its tool steps, then the answer."""
    budget = request.tools
    assert budget is not None
    steps = max(0, round((budget.max_steps - 1) * tool_fill))
    if steps == 0:
        return [first], [answer_tokens]
    call = min(count(_CALL_TEXT), request.max_output_tokens)
    per_step = int(budget.max_bytes * tool_fill / steps)
    lines = _TOOL_LINE * (per_step // len(_TOOL_LINE) + 1)
    result = count(lines[:per_step])
    legs = [first]
    for _ in range(steps):
        before = legs[-1][0]
        grown = before + call + result  # the previous request is the cached prefix
        legs.append((grown, before, grown - before if writes else 0))
    return legs, [call] * steps + [answer_tokens]
