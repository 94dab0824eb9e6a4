"""What a run will cost before it starts: the one estimate (docs/configuration.md, "Money").

``forecast`` is what `/debate estimate`, admission, `debate-bot run --dry-run`
and the estimate benchmark all quote. It walks the plan as the run layer drives
it (``next_step``; a batch's requests side by side; each answered before the
engine is asked again) with placeholder replies from ``bot.engine.rehearsal``,
so it sees the batches the run will ask for: personas, rounds, judge and voter
calls, the subject and context in every prompt, and the engine's own cost cap
(a capped plan stops where the run would).

What a rehearsal cannot know comes from ``Habits``, per model: how much of its
word limit an answer fills, how many tokens the provider counts for what the
estimate counts as one (four characters), and, for a turn that reads the
repository, its tool steps and the bytes they bring back. ``bot/run/habits.py``
learns them from this installation's runs of the same model and mode; until
there is enough history the stated prior (``PRIOR``, ``PRIOR_HIGH``) stands.
A turn's tool reads are bounded by what the pinned snapshot can supply.

A prompt's shared prefix (system + subject + context) is a prefix-cache hit
once the same model has seen it in an earlier batch (a cache write on the first
sight for an Anthropic-style provider). A turn with tools is a loop of model
steps, each re-sending the conversation so far: all of it but the newest calls
and answers is a cache hit. Prices come from the deployment's ``PriceBook``; a
model without one adds nothing and is listed in ``unpriced``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from bot.core.errors import ProtocolError
from bot.engine.agents import is_agent
from bot.engine.protocol import next_step
from bot.engine.rehearsal import reply
from bot.engine.tools import MAX_BYTES, MAX_CALLS, MAX_STEPS, definitions
from bot.engine.types import (
    TOOL_NAMES,
    Batch,
    DebateSpec,
    ModelRequest,
    Outcome,
    Prompt,
    ToolBudget,
    ToolName,
    Turn,
    Usage,
)
from bot.models.base import approx_tokens
from bot.models.pricing import PriceBook
from bot.repo.snapshot import Snapshot


@dataclass(frozen=True)
class Habits:
    """What one model's turns use, beyond what the plan says."""

    fill: float  # share of a turn's word limit its answer uses
    scale: float  # the provider's tokens per estimator token (four characters)
    tool_steps: float  # tool steps (model calls that read) of a turn with tools
    tool_bytes: float  # repository bytes those steps bring back, in all
    # Characters per word of its answers, spaces included (None: the filler's own).
    word_chars: float | None = None
    # The provider's tokens per estimator token of what tools answer (None: scale).
    tool_scale: float | None = None
    # The provider's tokens per estimator token of a prompt (None: scale).
    prompt_scale: float | None = None
    # Shares of input served from the provider's cache, of turns without and with
    # tools (None: the estimate's own model of the cache).
    cache_share: float | None = None
    tool_cache_share: float | None = None


# The prior, until a model has history here (bot/run/habits.py, MIN_TURNS):
# answers use three quarters of their word limit (models asked for "at most N
# words" write most of them) and a turn with tools takes three of its five tool
# steps and reads half its byte budget; the high end, all of both.
PRIOR = Habits(fill=0.75, scale=1.0, tool_steps=3.0, tool_bytes=MAX_BYTES / 2)
PRIOR_HIGH = Habits(fill=1.0, scale=1.0, tool_steps=MAX_STEPS - 1, tool_bytes=MAX_BYTES)


@dataclass(frozen=True)
class Profile:
    """A model's habits: expected and high end (p90), and the history behind them
    (0 turns: the prior)."""

    expected: Habits = PRIOR
    high: Habits = PRIOR_HIGH
    turns: int = 0  # turns of history behind fill and scale
    tool_turns: int = 0  # turns with tools behind tool_steps and tool_bytes


NO_HISTORY = Profile()

# What ``approx_tokens`` counts as one token.
CHARS_PER_TOKEN = 4
# Far above any real plan (frame + 10 rounds × 3 tiers + votes + synthesis).
_MAX_BATCHES = 200
_WORD_LIMIT = re.compile(r"Write at most (\d+) words")
_FILLER = "This paragraph stands for the reasoning a model writes at this point."
_LETTERS = "reasoningaboutthetradeoffsofthisplanandwhatitcostsovertime" * 2
# Providers whose prompt cache is written explicitly (and billed as such).
_CACHE_WRITE_PROVIDERS = frozenset({"anthropic"})
# What one step of calls writes.
_CALL_TEXT = 'read_file {"path": "src/app/handlers/retry.py", "start_line": 1}'
CALL_TOKENS = approx_tokens(_CALL_TEXT)
# Beyond the files themselves a turn's tools answer with line numbers (read_file)
# and listings and search hits: what a repository of N bytes can supply a turn.
_LINE_NUMBERS = 1.25
_LISTINGS = 2_000
# The bytes one tool step brings in the prior: a repository that supplies less
# than the prior's bytes supplies fewer steps too.
_PRIOR_STEP_BYTES = PRIOR.tool_bytes / PRIOR.tool_steps


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
    batches: tuple[Batch, ...]  # what the engine asked for, in order
    outcome: str  # the outcome kind the walk reached
    unpriced: tuple[str, ...]  # models of the plan with no price, sorted
    first_round_usd: float  # the frame and the first round of persona turns

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


@dataclass(frozen=True)
class Forecast:
    """The estimate everyone quotes: the expected cost, its high end, and the
    least a run of this plan spends (its frame and first round)."""

    expected: RunEstimate
    high: RunEstimate
    profiles: Mapping[str, Profile] = field(default_factory=dict)  # per model of the plan
    tools: bool = False  # the plan's turns read the repository
    supply_bytes: int | None = None  # what the pinned snapshot holds (None: not known)

    @property
    def usd(self) -> float:
        return self.expected.usd

    @property
    def high_usd(self) -> float:
        return max(self.high.usd, self.expected.usd)

    @property
    def first_round_usd(self) -> float:
        return self.expected.first_round_usd

    @property
    def bounded(self) -> bool:
        """Whether the repository holds less than the prior's tool reads."""
        return self.supply_bytes is not None and supply_bound(self.supply_bytes) < PRIOR.tool_bytes


def plan_models(spec: DebateSpec) -> tuple[str, ...]:
    """Every model reference the plan may call (primaries and fallbacks), sorted."""
    refs = {spec.judge, *spec.judge_fallbacks, *spec.voters, *spec.default_models}
    for persona in spec.personas:
        refs.update((persona.model, *persona.fallbacks))
    for tier in spec.tiers:
        refs.update(tier)
    return tuple(sorted(r for r in refs if r))


def supply_of(snapshot: Snapshot) -> int:
    """The bytes of the files a snapshot holds: the most a turn's tools can read."""
    return sum(size for _, size, kind in snapshot.listing() if kind == "file")


def padded_answer(
    prompt_text: str, fill: float = PRIOR.fill, word_chars: float | None = None
) -> str:
    """The rehearsal's reply, lengthened to ``fill`` of the prompt's word limit
    (the filler goes after the first two lines, before any stance block), its
    words ``word_chars`` characters long with their space (None: the filler's)."""
    answer = reply(prompt_text)
    limit = _WORD_LIMIT.search(prompt_text)
    if limit is None:
        return answer
    missing = int(int(limit.group(1)) * fill) - len(answer.split())
    if missing <= 0:
        return answer
    if word_chars is None:
        per = len(_FILLER.split())
        filler = " ".join([_FILLER] * (missing // per + 1))
    else:
        filler = _words(missing, word_chars)
    head, sep, tail = answer.partition("\n")
    second, sep2, rest = tail.partition("\n")
    return f"{head}{sep}{second}\n{filler}{sep2 or chr(10)}{rest}"


def _words(n: int, word_chars: float) -> str:
    """``n`` words averaging ``word_chars`` characters with their space."""
    letters = max(1.0, word_chars - 1)
    sizes = (max(1, int((i + 1) * letters) - int(i * letters)) for i in range(n))
    return " ".join(_LETTERS[:size] for size in sizes)


def forecast(
    spec: DebateSpec,
    prices: PriceBook,
    profiles: Mapping[str, Profile] | None = None,
    *,
    supply_bytes: int | None = None,
) -> Forecast:
    """The plan's expected cost and high end, by each model's habits (the prior
    where ``profiles`` has none) and, with tools, what the repository supplies.
    The same plan gives the same figures whatever its run id."""
    known = dict(profiles or {})
    spec = replace(spec, seed="estimate")
    models = plan_models(spec)
    expected = estimate_run(
        spec, prices, {m: known.get(m, NO_HISTORY).expected for m in models}, supply_bytes
    )
    high = estimate_run(
        spec, prices, {m: known.get(m, NO_HISTORY).high for m in models}, supply_bytes
    )
    profile = {m: known.get(m, NO_HISTORY) for m in models}
    return Forecast(expected, high, profile, spec.tools, supply_bytes)


def estimate_run(
    spec: DebateSpec,
    prices: PriceBook,
    habits: Mapping[str, Habits] | None = None,
    supply_bytes: int | None = None,
) -> RunEstimate:
    """The run's calls, tokens and cost, its turns answering by ``habits`` (per
    model; the prior for a model it does not name)."""
    table = habits or {}
    turns: list[Turn] = []
    calls: list[CallEstimate] = []
    batches: list[Batch] = []
    first_round: float | None = None
    seen: set[tuple[str, str]] = set()  # (model, shared prefix) cached by an earlier batch
    for _ in range(_MAX_BATCHES):
        step = next_step(spec, turns)
        if first_round is None and _past_first_round(step, turns):
            first_round = sum(c.usd for c in calls)
        if isinstance(step, Outcome):
            spent = round(sum(c.usd for c in calls), 8)
            return RunEstimate(
                tuple(calls),
                tuple(batches),
                step.kind,
                tuple(prices.unpriced([*plan_models(spec), *(c.model for c in calls)])),
                round(first_round if first_round is not None else spent, 8),
            )
        batches.append(step)
        fresh: set[tuple[str, str]] = set()
        for request in step.requests:
            model = request.models[0] if request.models else ""
            call, answer = _call(request, prices, seen, table.get(model, PRIOR), supply_bytes)
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


def _past_first_round(step: Batch | Outcome, turns: Iterable[Turn]) -> bool:
    """Whether ``step`` comes after the first round's persona turns (which exist)."""
    if not any(t.key.round == 1 and t.key.tier == 0 for t in turns):
        return isinstance(step, Outcome)
    if isinstance(step, Outcome):
        return True
    return not any(r.key.round == 1 and r.key.tier == 0 for r in step.requests)


def _text(prompt: Prompt) -> str:
    return prompt.system + prompt.prefix + prompt.suffix


def _tokens(text: str, scale: float) -> int:
    return round(approx_tokens(text) * scale)


def _call(
    request: ModelRequest,
    prices: PriceBook,
    seen: set[tuple[str, str]],
    habits: Habits,
    supply_bytes: int | None,
) -> tuple[CallEstimate, str]:
    model = request.models[0] if request.models else ""
    text = _text(request.prompt)
    answer = padded_answer(text, habits.fill, habits.word_chars)
    shared = request.prompt.system + request.prompt.prefix
    if request.tools is not None:  # every step sends the tools' definitions first
        defs = definitions_text(request)
        text, shared = defs + text, defs + shared
    prompt_scale = habits.scale if habits.prompt_scale is None else habits.prompt_scale
    prefix_tokens = _tokens(shared, prompt_scale)
    input_tokens = _tokens(text, prompt_scale)
    answer_tokens = min(_tokens(answer, habits.scale), request.max_output_tokens)
    writes = model.partition("/")[0] in _CACHE_WRITE_PROVIDERS
    cached = written = 0
    if (model, shared) in seen:
        cached = prefix_tokens
    elif writes:
        written = prefix_tokens
    usage = Usage(input_tokens, answer_tokens, cached, cache_write_tokens=written)
    steps = 1
    share = habits.cache_share
    if is_agent(model):  # a coding agent reads with its own tools, whatever the plan says
        agent = _agent_request(request)
        writes = prices.priced_as(model).partition("/")[0] in _CACHE_WRITE_PROVIDERS
        usage = _with_cli_prompt(usage, habits, writes)
        usage, steps = _tool_loop(agent, usage, writes, habits, supply_bytes)
        share = habits.tool_cache_share
    elif request.tools is not None:
        usage, steps = _tool_loop(request, usage, writes, habits, supply_bytes)
        share = habits.tool_cache_share
    if share is not None:  # as this model's calls here were served
        cached = round(usage.input_tokens * share)
        written = min(usage.cache_write_tokens, usage.input_tokens - cached)
        usage = replace(usage, cached_tokens=cached, cache_write_tokens=written)
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
        steps=steps,
    )
    return call, answer


def prompt_text(request: ModelRequest) -> str:
    """What a request sends as the estimate counts it: its prompt, after the
    tools' definitions when it has tools."""
    return definitions_text(request) + _text(request.prompt)


def definitions_text(request: ModelRequest) -> str:
    return "" if request.tools is None else _definitions(request.tools.tools)


@functools.cache
def _definitions(names: tuple[ToolName, ...]) -> str:
    """The tools' definitions as a request carries them (what a provider counts)."""
    return json.dumps(
        [{"name": n, "description": d, "parameters": schema} for n, d, schema in definitions(names)]
    )


def supply_bound(supply_bytes: int) -> float:
    """The most one turn's tools can bring back from a repository of that size."""
    return supply_bytes * _LINE_NUMBERS + _LISTINGS


def tool_reads(
    habits: Habits, max_steps: int, max_bytes: int, supply_bytes: int | None
) -> tuple[float, float]:
    """(tool steps, bytes) of one turn: the habits within the turn's budget and
    what the repository can supply (a repository that holds less than the
    prior's bytes supplies proportionally fewer steps, at least one)."""
    steps = min(habits.tool_steps, float(max(0, max_steps - 1)))
    read = min(habits.tool_bytes, float(max_bytes))
    if supply_bytes is not None:
        bound = supply_bound(supply_bytes)
        if read > bound:
            read = bound
            steps = min(steps, max(1.0, bound / _PRIOR_STEP_BYTES))
    return steps, read


# What an agent CLI sends on every call beside the prompt: its own system prompt
# and tools' definitions (measured: Claude Code's first request is ~14 KB, Codex's
# and Gemini CLI's 10-30 KB), in estimator tokens.
AGENT_CLI_PROMPT_TOKENS = 5_000


def _agent_request(request: ModelRequest) -> ModelRequest:
    """An agent turn as a tool loop within the plan's tool budget (the default
    one when the plan offers no tools: the agent reads anyway)."""
    if request.tools is not None:
        return request
    return replace(request, tools=ToolBudget(TOOL_NAMES, MAX_CALLS, MAX_BYTES, MAX_STEPS))


def _with_cli_prompt(usage: Usage, habits: Habits, writes: bool) -> Usage:
    extra = round(AGENT_CLI_PROMPT_TOKENS * habits.scale)
    return replace(
        usage,
        input_tokens=usage.input_tokens + extra,
        cache_write_tokens=usage.cache_write_tokens + (extra if writes else 0),
    )


def _tool_loop(
    request: ModelRequest, first: Usage, writes: bool, habits: Habits, supply_bytes: int | None
) -> tuple[Usage, int]:
    """A turn's tool loop summed: ``n`` tool steps (a real number: an average),
    each adding its calls and an even share of the bytes read to the
    conversation, then the answer. Step ``i`` re-sends the request before it,
    which is a cache hit; what it adds is new (written, Anthropic-style)."""
    budget = request.tools
    assert budget is not None
    n, read = tool_reads(habits, budget.max_steps, budget.max_bytes, supply_bytes)
    if n <= 0:
        return first, 1
    call = min(_tokens(_CALL_TEXT, habits.scale), request.max_output_tokens)
    added = CALL_TOKENS + read / n / CHARS_PER_TOKEN  # estimator tokens a step adds
    grow = added * (habits.scale if habits.tool_scale is None else habits.tool_scale)
    base = first.input_tokens
    inputs = (n + 1) * base + grow * n * (n + 1) / 2
    cached = first.cached_tokens + n * base + grow * n * (n - 1) / 2
    written = first.cache_write_tokens + (grow * n if writes else 0.0)
    usage = Usage(
        input_tokens=round(inputs),
        output_tokens=round(first.output_tokens + n * call),
        cached_tokens=round(cached),
        cache_write_tokens=round(written),
    )
    return usage, 1 + round(n)
