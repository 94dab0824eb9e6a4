"""The one estimate (bot/run/estimate.py) and what it learns from the ledger
(bot/run/habits.py): the plan walked with placeholder replies, each model's
habits from its history here or the prior, tool reads bounded by the snapshot."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.core.settings import Settings
from bot.engine.prompts import word_budget
from bot.engine.protocol import next_step
from bot.engine.rehearsal import reply
from bot.engine.tools import MAX_BYTES, MAX_STEPS, TOOL_PHASES
from bot.engine.types import Batch, DebateSpec, PersonaSpec, RepoRef, Turn
from bot.inputs.repo_config import RepoConfig
from bot.models.base import approx_tokens
from bot.models.pricing import Price, PriceBook
from bot.repo.snapshot import Entry, Limits, Snapshot
from bot.run.estimate import (
    PRIOR,
    PRIOR_HIGH,
    Habits,
    Profile,
    estimate_run,
    forecast,
    padded_answer,
    plan_models,
    prompt_text,
    supply_of,
    tool_reads,
)
from bot.run.habits import MIN_TURNS, basis, learn
from bot.service.worker.budgets import Caps, budget_for, caps_for, estimate_text
from bot.store.rows import MonthSpend, TurnUse, UsageHistory

GPT = "openai/gpt-4.1-mini"
CLAUDE = "anthropic/claude-sonnet-4-5"
REPO = RepoRef("acme/widgets", "0123456789abcdef0123456789abcdef01234567")


def spec(**kw: object) -> DebateSpec:
    base = DebateSpec(
        mode="debate",
        title="gRPC or REST?",
        subject="Should we use gRPC or REST for the public API? " * 10,
        personas=(PersonaSpec("Atlas", "systems", GPT), PersonaSpec("Forge", "pragmatism", CLAUDE)),
        judge=GPT,
        repo_ref=REPO,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def everyone(habits: Habits) -> dict[str, Habits]:
    return dict.fromkeys((GPT, CLAUDE), habits)


# -- the walk ---------------------------------------------------------------------------


def test_the_estimate_walks_the_plan_and_prices_it() -> None:
    est = estimate_run(spec(), PriceBook())
    assert est.outcome == "verdict" and est.usd > 0 and not est.unpriced
    assert {c.model for c in est.calls} == {GPT, CLAUDE}
    phases = [b.requests[0].key.phase for b in est.batches]
    assert phases == ["opening", "rebuttal", "counter", "synthesis"]
    # Later calls of a model hit the shared prefix; an Anthropic first sight writes it.
    assert any(c.cached_tokens for c in est.calls)
    assert any(c.cache_write_tokens for c in est.calls if c.model == CLAUDE)
    # More rounds, a bigger subject, a dearer price file: a bigger estimate.
    assert estimate_run(spec(subject=spec().subject * 8), PriceBook()).usd > est.usd
    assert estimate_run(spec(), PriceBook({"gpt-4.1-mini": Price(40, 10, 160)})).usd > 5 * est.usd
    # Deterministic and pure: the same plan, the same figure.
    assert estimate_run(spec(), PriceBook()) == est


def test_the_first_round_is_the_frame_and_the_openings() -> None:
    est = estimate_run(spec(), PriceBook())
    upto = [c for c in est.calls if c.phase in ("frame", "opening")]
    assert est.first_round_usd == pytest.approx(sum(c.usd for c in upto))
    assert 0 < est.first_round_usd < est.usd


def test_a_capped_plan_stops_where_the_run_would() -> None:
    whole = estimate_run(spec(), PriceBook())
    capped = estimate_run(spec(max_cost_usd=whole.first_round_usd * 1.01), PriceBook())
    assert capped.usd < whole.usd
    assert {c.phase for c in capped.calls} == {"opening", "synthesis"}


def test_the_estimate_lists_models_without_a_price() -> None:
    s = spec(judge="local/mystery")
    assert "local/mystery" in plan_models(s)
    assert estimate_run(s, PriceBook()).unpriced == ("local/mystery",)


def test_answers_are_padded_to_their_word_limit() -> None:
    prompt = "TASK: opening\nWrite at most 400 words. Start with one line `POSITION: x`."
    assert 250 <= len(padded_answer(prompt).split()) <= 420
    assert len(padded_answer(prompt, 0.25).split()) < len(padded_answer(prompt, 0.9).split())
    assert padded_answer("no limit here") == padded_answer("no limit here", fill=0)


def test_habits_move_the_estimate_their_way() -> None:
    base = estimate_run(spec(), PriceBook(), everyone(PRIOR))
    terse = estimate_run(spec(), PriceBook(), everyone(replace(PRIOR, fill=0.25)))
    dense = estimate_run(spec(), PriceBook(), everyone(replace(PRIOR, scale=1.5)))
    assert terse.output_tokens < base.output_tokens and terse.usd < base.usd
    assert dense.input_tokens > 1.4 * base.input_tokens and dense.usd > base.usd
    # A model the table does not name answers by the prior.
    assert estimate_run(spec(), PriceBook(), {GPT: PRIOR}) == base


# -- turns with tools -----------------------------------------------------------------------


def test_a_tool_turn_is_its_steps_each_resending_the_conversation() -> None:
    off = estimate_run(spec(tools=False), PriceBook())
    on = estimate_run(spec(tools=True), PriceBook())
    assert [(c.slot, c.phase) for c in on.calls] == [(c.slot, c.phase) for c in off.calls]
    for a, b in zip(off.calls, on.calls, strict=True):
        if b.phase in TOOL_PHASES:
            assert b.steps == round(PRIOR.tool_steps) + 1
            # What the tools answer is read again at every later step.
            assert b.input_tokens > a.input_tokens + PRIOR.tool_bytes / 4
            assert b.cached_tokens > b.input_tokens / 2  # mostly from the cache
            if b.model == CLAUDE:
                assert b.cache_write_tokens > a.cache_write_tokens  # the new part, written
        else:
            assert b == a  # the frame and the votes answer from the prompt alone
    assert on.model_calls > off.model_calls == len(off.calls)
    # Models that read nothing: a tool turn is one call, as without tools, which
    # still carries the tools' definitions (and the rules in the system prompt).
    silent = estimate_run(spec(tools=True), PriceBook(), everyone(replace(PRIOR, tool_steps=0)))
    assert silent.model_calls == len(silent.calls)
    assert off.usd < silent.usd < on.usd


def test_tool_reads_are_bounded_by_the_budget_and_the_repository() -> None:
    assert tool_reads(PRIOR, MAX_STEPS, MAX_BYTES, None) == (PRIOR.tool_steps, PRIOR.tool_bytes)
    greedy = Habits(fill=1, scale=1, tool_steps=40, tool_bytes=1e6)
    assert tool_reads(greedy, MAX_STEPS, MAX_BYTES, None) == (MAX_STEPS - 1, MAX_BYTES)
    # Three small files: a turn reads at most what they hold (with line numbers
    # and a listing), in fewer steps.
    steps, read = tool_reads(PRIOR, MAX_STEPS, MAX_BYTES, 3_000)
    assert read == pytest.approx(3_000 * 1.25 + 2_000) and 1 <= steps < PRIOR.tool_steps
    big = forecast(spec(tools=True), PriceBook())
    small = forecast(spec(tools=True), PriceBook(), supply_bytes=3_000)
    assert small.usd < big.usd and small.high_usd < big.high_usd


def test_the_supply_is_the_snapshots_files() -> None:
    entries = [Entry("a.py", "file", 100), Entry("src/b.py", "file", 50), Entry("lib", "link", 9)]
    snap = Snapshot(repo="a/b", commit="c", html_url="", entries=entries, limits=Limits())
    assert supply_of(snap) == 150


# -- the forecast -------------------------------------------------------------------------


def test_the_forecast_is_the_expected_figure_its_high_end_and_first_round() -> None:
    est = forecast(spec(), PriceBook())
    assert est.expected == estimate_run(replace(spec(), seed="estimate"), PriceBook())
    assert est.usd < est.high_usd and est.first_round_usd < est.usd
    assert est.high == estimate_run(
        replace(spec(), seed="estimate"), PriceBook(), everyone(PRIOR_HIGH)
    )
    # The same plan under another run id: the same figures.
    assert forecast(spec(seed="run-1"), PriceBook()) == forecast(spec(seed="run-2"), PriceBook())
    learned = Profile(replace(PRIOR, fill=0.3), replace(PRIOR_HIGH, fill=0.5), turns=40)
    cheaper = forecast(spec(), PriceBook(), {GPT: learned, CLAUDE: learned})
    assert cheaper.usd < est.usd and cheaper.high_usd < est.high_usd


def test_budget_for_carries_the_forecast_where_a_budget_applies() -> None:
    est = forecast(spec(judge="local/x"), PriceBook())
    no_caps = caps_for(Settings(_env_file=None), RepoConfig())
    assert budget_for(spec(), est, no_caps, PriceBook()) is None
    capped = caps_for(Settings(_env_file=None, budget_repo_month_usd=5), RepoConfig())
    b = budget_for(spec(judge="local/x"), est, capped, PriceBook())
    assert b is not None and b.estimate_usd == est.usd and b.first_round_usd == est.first_round_usd
    assert b.unpriced == ("local/x",) and b.refuse_unpriced


# -- learning from the ledger --------------------------------------------------------------


def uses(
    model: str,
    n: int,
    *,
    words: int,
    run: str = "r1",
    phase: str = "opening",
    tokens_per_char: float = 0.25,
    tools: tuple[int, int] | None = None,
) -> list[TurnUse]:
    chars = words * 6
    steps, read = tools if tools is not None else (None, 0)
    return [
        TurnUse(run, model, phase, words, chars, round(chars * tokens_per_char), steps, read)
        for _ in range(n)
    ]


def history(*turns: list[TurnUse]) -> UsageHistory:
    flat = tuple(t for group in turns for t in group)
    return UsageHistory(flat, {"r1": spec(), "r2": spec()})


def test_nothing_is_learned_before_twenty_turns() -> None:
    limit = word_budget(spec())
    few = learn(history(uses(GPT, MIN_TURNS - 1, words=limit // 4)), [GPT])
    assert few[GPT] == Profile()


def test_answer_fill_and_tokenizer_are_learned_per_model() -> None:
    limit = word_budget(spec())
    learned = learn(
        history(
            uses(GPT, 10, words=limit // 4),
            uses(GPT, 10, words=limit // 2, run="r2"),
            uses(GPT, 5, words=limit, phase="synthesis"),  # no fill: not a persona turn
            uses(CLAUDE, 20, words=int(limit * 0.9), tokens_per_char=0.2),
        ),
        [GPT, CLAUDE, "openai/other"],
    )
    gpt, claude = learned[GPT], learned[CLAUDE]
    assert gpt.turns == 20 and gpt.expected.fill == pytest.approx(0.375, abs=0.01)
    assert gpt.high.fill == pytest.approx(0.5, abs=0.01)  # p90
    assert gpt.expected.scale == pytest.approx(1.0)  # four characters a token
    assert claude.expected.fill == pytest.approx(0.9, abs=0.01)
    assert claude.expected.scale == pytest.approx(0.8)
    # No tool turns: the tool figures stay the prior's.
    assert gpt.expected.tool_steps == PRIOR.tool_steps and gpt.tool_turns == 0
    # A model of the plan without history of its own takes the plan's models together.
    other = learned["openai/other"]
    assert other.turns == 40 and PRIOR.fill > other.expected.fill > gpt.expected.fill


def test_word_length_and_the_tool_answers_tokenizer_are_learned() -> None:
    limit = word_budget(spec())
    # Answers of long words (8 characters a word), at half their limit.
    long_words = [replace(u, chars=u.words * 8) for u in uses(GPT, 25, words=limit // 2)]
    learned = learn(history(long_words), [GPT])[GPT]
    assert learned.expected.word_chars == pytest.approx(8.0)
    filler = replace(learned, expected=replace(learned.expected, word_chars=None))
    longer = forecast(spec(), PriceBook(), {GPT: learned, CLAUDE: learned})
    shorter = forecast(spec(), PriceBook(), {GPT: filler, CLAUDE: filler})
    assert longer.expected.output_tokens > 1.1 * shorter.expected.output_tokens
    # A tool turn: 2 steps that read 8,000 bytes, the first sent 1,000 tokens. The
    # estimator counts 16 + 1,000 tokens a step, the first re-sent once: 3,048;
    # the provider's input beyond three prompts was half that.
    turn = TurnUse("r1", GPT, "opening", 10, 60, 10, 2, 8_000, 3 * 1_000 + 1_524, 1_000)
    tooled = learn(UsageHistory((turn,) * 20, {"r1": spec()}), [GPT])[GPT]
    assert tooled.expected.tool_scale == pytest.approx(0.5)


def replayed(run: str, s: DebateSpec) -> tuple[list[Turn], list[TurnUse]]:
    """A run's turns (rehearsal answers) and their use as a provider that counts
    twice the estimator's tokens and serves half of each prompt from its cache."""
    turns: list[Turn] = []
    used: list[TurnUse] = []
    while isinstance(step := next_step(s, turns), Batch):
        for r in step.requests:
            text = reply(prompt_text(r))
            turns.append(Turn(r.key, text, r.models[0]))
            counted = approx_tokens(prompt_text(r))
            words, chars = len(text.split()), len(text)
            used.append(
                TurnUse(
                    run,
                    r.models[0],
                    r.key.phase,
                    words,
                    chars,
                    chars // 4,
                    None,
                    0,
                    2 * counted,
                    0,
                    r.key.id(),
                    counted,
                )
            )
    return turns, used


def test_the_prompts_tokenizer_and_the_cache_are_learned_from_replayed_runs() -> None:
    runs = {f"r{i}": replayed(f"r{i}", spec(seed=f"r{i}")) for i in range(4)}
    history = UsageHistory(
        tuple(u for _, used in runs.values() for u in used),
        {run: spec(seed=run) for run in runs},
        {run: tuple(turns) for run, (turns, _) in runs.items()},
    )
    learned = learn(history, [GPT, CLAUDE])
    for profile in learned.values():
        assert profile.expected.prompt_scale == pytest.approx(2.0)
        assert profile.expected.cache_share == pytest.approx(0.5)
        assert profile.expected.tool_cache_share is None  # no turns with tools
    est = forecast(spec(), PriceBook(), learned)
    for call in est.expected.calls:
        assert call.cached_tokens == round(call.input_tokens * 0.5)
    plain = {
        m: replace(p, expected=replace(p.expected, prompt_scale=None)) for m, p in learned.items()
    }
    unscaled = forecast(spec(), PriceBook(), plain).expected.input_tokens
    assert est.expected.input_tokens > 1.8 * unscaled


def test_tool_steps_and_bytes_are_learned_from_turns_with_tools() -> None:
    limit = word_budget(spec())
    learned = learn(
        history(
            uses(GPT, 18, words=limit, tools=(0, 0)),
            uses(GPT, 2, words=limit, tools=(4, 40_000)),
        ),
        [GPT],
    )
    gpt = learned[GPT]
    assert gpt.tool_turns == 20
    assert gpt.expected.tool_steps == pytest.approx(0.4)
    assert gpt.expected.tool_bytes == pytest.approx(4_000)
    assert gpt.high.tool_steps == 0  # p90: most turns read nothing
    silent = forecast(spec(tools=True), PriceBook(), learned, supply_bytes=10_000)
    prior = forecast(spec(tools=True), PriceBook(), supply_bytes=10_000)
    assert silent.usd < prior.usd


def test_the_basis_says_where_the_figures_come_from() -> None:
    limit = word_budget(spec())
    learned = learn(history(uses(GPT, 25, words=limit // 2, tools=(1, 5_000))), [GPT, CLAUDE])
    lines = basis(forecast(spec(tools=True), PriceBook(), learned, supply_bytes=2_000))
    assert any(f"`{GPT}`: answers at 50% of their word limit (25 turns" in x for x in lines)
    assert any("25 turns with tools" in x for x in lines)
    assert lines[-1] == "the repository holds 2.0 kB of files"
    prior = basis(forecast(spec(), PriceBook()))
    assert all("the prior" in x and "tools" not in x for x in prior)


# -- what `/debate estimate` replies -------------------------------------------------------


def test_the_estimate_reply_counts_every_step_and_says_what_a_run_would_do() -> None:
    s = spec(tools=True)
    est = forecast(s, PriceBook())
    text = estimate_text(s, est, Caps(None, None, None), PriceBook())
    assert f"Estimated cost: **${est.usd:.4f}**, up to ${est.high_usd:.4f}" in text
    assert f"its first round ${est.first_round_usd:.4f}" in text
    assert f"{est.expected.model_calls} model calls" in text
    for model in (GPT, CLAUDE):
        calls = sum(c.steps for c in est.expected.calls if c.model == model)
        assert f"| `{model}` | {calls} |" in text
    assert "If started now" not in text  # no budget applies
    month = MonthSpend(
        repo_usd=0.0, repo_held_usd=0.0, installation_usd=0.0, installation_held_usd=0.0
    )
    room = Caps(None, est.usd * 2, None)
    assert "If started now: it would start." in estimate_text(s, est, room, PriceBook(), month)
    tight = Caps(est.first_round_usd * 1.5, None, None)
    assert "stop at its cap of" in estimate_text(s, est, tight, PriceBook(), month)
    none = Caps(est.first_round_usd / 2, None, None)
    refused = estimate_text(s, est, none, PriceBook(), month)
    assert "If started now: Not started: this run is estimated at" in refused
    assert f"${est.usd:.4f}" in refused and f"${est.first_round_usd:.4f}" in refused
