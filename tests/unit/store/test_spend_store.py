"""The spend ledger and admission in the store, on SQLite and PostgreSQL:
each call counted once, budgets reserved in create_run's transaction (racing
commands never both take the last dollars), settled when runs end, monthly
budgets reset at the UTC month boundary (the store's clock)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from bot.core.errors import AdmissionRefused, BudgetSpent, PriceUnknown, QuotaSpent
from bot.engine.types import DebateSpec, PersonaSpec, Turn, TurnKey, Usage
from bot.run.admission import Budget, Limits, Quota
from bot.store import NewRun, RunStore
from bot.store.admission import Admission, Admitted, Tally, Used
from bot.store.rows import SpendLine
from testkit.harness.stores import FakeClock, race
from testkit.harness.stores import clock as clock
from testkit.harness.stores import db_url as db_url
from testkit.harness.stores import pg_url as pg_url
from testkit.harness.stores import store as store

REPO = "octo/repo"


def spec() -> DebateSpec:
    return DebateSpec(
        mode="debate",
        title="gRPC or REST?",
        subject="Should we use gRPC or REST?",
        personas=(
            PersonaSpec("pro", "for gRPC", "openai/gpt-4.1-mini"),
            PersonaSpec("con", "for REST", "anthropic/claude-sonnet-4-5"),
        ),
        judge="openai/gpt-4.1-mini",
    )


def budget(
    estimate: float,
    *,
    per_run_usd: float | None = None,
    repo_month_usd: float | None = None,
    installation_month_usd: float | None = None,
) -> Limits:
    return Limits(budget=Budget(estimate, per_run_usd, repo_month_usd, installation_month_usd))


def turn(slot: str, rnd: int = 1, usd: float = 0.01, **usage: int) -> Turn:
    return Turn(
        key=TurnKey("opening", rnd, slot),
        text="answer",
        model="anthropic/claude-sonnet-4-5",
        usage=Usage(
            input_tokens=usage.get("input", 1000),
            cached_tokens=usage.get("cached", 200),
            cache_write_tokens=usage.get("written", 300),
            output_tokens=usage.get("output", 100),
            cost_usd=usd,
        ),
    )


def create(store: RunStore, issue: int, limits: Admission | None = None, **kw):
    new = NewRun(
        repo=kw.pop("repo", REPO),
        issue_number=issue,
        spec=spec(),
        installation_id=kw.pop("installation_id", 7),
        requested_by="alice",
        **kw,
    )
    return store.create_run(new, limits)


def test_each_stored_turn_is_one_ledger_row_counted_once(store: RunStore) -> None:
    run = create(store, 1)
    assert store.save_turn(run.id, turn("pro", usd=0.25)).new
    # A resumed attempt saving the same turn again (a call it repeated) adds nothing.
    assert not store.save_turn(run.id, turn("pro", usd=0.25)).new
    store.save_turn(run.id, turn("con", usd=0.5))
    dropped = Turn(
        TurnKey("opening", 1, "judge"), "", "openai/x", status="dropped", drop_class="timeout"
    )
    store.save_turn(run.id, dropped)  # nothing billed: no ledger row
    spent = store.run_spend(run.id)
    assert (spent.usd, spent.calls, spent.assumed, spent.unknown) == (0.75, 2, (), ())
    assert store.get_run(run.id).cost_usd == pytest.approx(0.75)  # type: ignore[union-attr]
    [line] = store.spend_report(
        datetime(2025, 3, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC), "model"
    )
    assert line == SpendLine("anthropic/claude-sonnet-4-5", 1, 2, 2000, 400, 200, 0.75)
    [by_installation] = store.spend_report(
        datetime(2025, 3, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC), "installation"
    )
    assert by_installation.key == "7"
    assert list(store.spend_totals()) == [(7, REPO, "anthropic/claude-sonnet-4-5", 0.75)]


def test_the_ledger_names_assumed_and_unknown_prices(store: RunStore) -> None:
    run = create(store, 1)
    store.save_turn(
        run.id,
        Turn(
            TurnKey("opening", 1, "a"),
            "x",
            "local/llama",
            usage=Usage(10, 5, price_basis="assumed", cost_usd=0.1),
        ),
    )
    store.save_turn(
        run.id,
        Turn(
            TurnKey("opening", 1, "b"),
            "x",
            "local/other",
            usage=Usage(10, 5, price_basis="unknown"),
        ),
    )
    spent = store.run_spend(run.id)
    assert (spent.assumed, spent.unknown) == (("local/llama",), ("local/other",))


def test_admission_sets_the_cap_and_holds_the_estimate_until_the_run_ends(
    store: RunStore,
) -> None:
    limits = budget(0.3, per_run_usd=0.5, repo_month_usd=1.0)
    first = create(store, 1, limits)
    # The cap: the per-run budget (the monthly one has more room).
    assert first.debate_spec().max_cost_usd == 0.5
    assert create(store, 2, limits).debate_spec().max_cost_usd == 0.5
    # 0.6 held: the cap is what is left of the month.
    third = create(store, 3, limits)
    assert third.debate_spec().max_cost_usd == pytest.approx(0.4)
    with pytest.raises(BudgetSpent) as refused:
        create(store, 4, limits)
    exc = refused.value
    assert (exc.scope, exc.limit, exc.estimate) == ("repo", 1.0, 0.3)
    assert exc.spent == pytest.approx(0.9)
    assert exc.resets == datetime(2025, 4, 1, tzinfo=UTC)
    assert "resets on 2025-04-01" in exc.public and "$0.3000" in exc.public
    # The first run ends having spent 0.1 of its 0.3: settled to the real spend.
    assert first.id in {r.id for r in store.claim_runs("w", 60, 10)}
    store.save_turn(first.id, turn("pro", usd=0.1))
    assert store.release_run(first.id, "w", "done")
    month = store.month_spend(REPO, 7)
    assert month.repo_usd == pytest.approx(0.1)
    assert month.repo_held_usd == pytest.approx(0.6)
    fourth = create(store, 4, limits)
    assert fourth.debate_spec().max_cost_usd == pytest.approx(0.3)


def test_a_run_over_the_per_run_budget_is_refused(store: RunStore) -> None:
    with pytest.raises(BudgetSpent) as refused:
        create(store, 1, budget(0.6, per_run_usd=0.5))
    assert refused.value.scope == "run" and refused.value.resets is None
    assert "per-run budget" in refused.value.public


def test_installation_budget_spans_its_repositories(store: RunStore) -> None:
    create(store, 1, budget(0.6, installation_month_usd=1.0), repo="octo/a")
    with pytest.raises(BudgetSpent) as refused:
        create(store, 1, budget(0.6, installation_month_usd=1.0), repo="octo/b")
    assert refused.value.scope == "installation"
    # Another installation has its own.
    create(store, 1, budget(0.6, installation_month_usd=1.0), repo="other/c", installation_id=8)


def test_monthly_budgets_reset_at_the_utc_month_boundary(store: RunStore, clock: FakeClock) -> None:
    clock.now = datetime(2025, 3, 31, 23, 0, tzinfo=UTC)
    run = create(store, 1, budget(0.5, repo_month_usd=1.0))
    store.claim_run("w", 60)
    store.save_turn(run.id, turn("pro", usd=0.9))
    store.release_run(run.id, "w", "done")
    with pytest.raises(BudgetSpent) as refused:
        create(store, 2, budget(0.5, repo_month_usd=1.0))
    assert refused.value.resets == datetime(2025, 4, 1, tzinfo=UTC)
    clock.now = datetime(2025, 4, 1, 0, 0, 1, tzinfo=UTC)
    assert store.month_spend(REPO, 7).repo_usd == 0.0
    create(store, 2, budget(0.5, repo_month_usd=1.0))
    march = store.spend_report(
        datetime(2025, 3, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC), "repo"
    )
    assert [(line.key, line.usd) for line in march] == [(REPO, 0.9)]


def test_unpriced_models_are_refused_when_the_policy_says_so(store: RunStore) -> None:
    limits = Limits(
        budget=Budget(0.1, repo_month_usd=5, unpriced=("local/x",), refuse_unpriced=True)
    )
    with pytest.raises(PriceUnknown) as refused:
        create(store, 1, limits)
    assert "`local/x`" in refused.value.public
    create(store, 1, Limits(budget=Budget(0.1, repo_month_usd=5, unpriced=("local/x",))))


def test_quota_and_budget_are_one_admission(store: RunStore, clock: FakeClock) -> None:
    limits = Limits(
        Quota(clock.now - timedelta(days=1), per_repo=1, per_user=5), Budget(0.1, repo_month_usd=5)
    )
    create(store, 1, limits)
    with pytest.raises(QuotaSpent):
        create(store, 2, limits)


@dataclass
class Recorded:
    """An admission of the store's own types alone: it records the sums it was given."""

    tally: Tally
    answer: Admitted | AdmissionRefused
    seen: list[Used] = field(default_factory=list)

    def decide(self, used: Used, now: datetime) -> Admitted | AdmissionRefused:
        self.seen.append(used)
        return self.answer


def test_the_store_counts_what_the_admission_asks_and_acts_on_its_answer(
    store: RunStore, clock: FakeClock
) -> None:
    create(store, 1, budget(0.25, repo_month_usd=5.0, installation_month_usd=5.0))
    create(store, 1, budget(0.1, repo_month_usd=5.0), repo="octo/b")  # the same installation
    nothing = Recorded(Tally(), Admitted(None, 0.0))
    create(store, 2, nothing)
    assert nothing.seen == [Used()]
    asked = Recorded(
        Tally(clock.now - timedelta(days=1), repo_month=True, installation_month=True),
        Admitted(0.4, 0.15),
    )
    run = create(store, 3, asked)
    # Issues 1 and 2 here; issue 1's hold, and octo/b's too in the installation's.
    assert asked.seen == [Used(2, 2, 0.25, pytest.approx(0.35))]  # type: ignore[arg-type]
    assert run.debate_spec().max_cost_usd == 0.4
    assert store.month_spend(REPO, 7).repo_held_usd == pytest.approx(0.4)  # 0.25 + 0.15
    refusal = QuotaSpent("user")
    with pytest.raises(QuotaSpent) as refused:
        create(store, 4, Recorded(Tally(), refusal))
    assert refused.value is refusal and store.active_run(REPO, 4) is None


def test_ten_commands_at_once_never_pass_the_budget(
    db_url: str, clock: FakeClock, store: RunStore
) -> None:
    """Ten commands at once on ten issues, from two processes, against a monthly
    budget that fits three estimates: exactly three are queued."""
    stores = [RunStore.from_url(db_url, clock=clock) for _ in range(2)]
    created: list[str] = []
    refused: list[str] = []

    def attempt(n: int) -> None:
        try:
            created.append(create(stores[n % 2], n + 1, budget(0.3, repo_month_usd=1.0)).id)
        except BudgetSpent as exc:
            refused.append(exc.scope)

    race(10, attempt)
    for s in stores:
        s.dispose()
    assert len(created) == 3 and refused == ["repo"] * 7
    assert store.month_spend(REPO, 7).repo_held_usd == pytest.approx(0.9)


# -- a budget admits what fits (issue 31) -----------------------------------------------


def fits(estimate: float, first_round: float, **caps: float | None) -> Limits:
    return Limits(budget=Budget(estimate, first_round_usd=first_round, **caps))  # type: ignore[arg-type]


def test_a_run_whose_first_round_fits_starts_capped_at_what_is_left(store: RunStore) -> None:
    limits = fits(1.0, 0.4, repo_month_usd=1.5)
    whole = create(store, 1, limits)
    assert whole.debate_spec().max_cost_usd == 1.5
    assert store.month_spend(REPO, 7).repo_held_usd == 1.0
    # 0.5 is left: not the whole run (1.0), but its first round (0.4) fits. It
    # starts, capped at the 0.5 left, and holds all of it.
    capped = create(store, 2, limits)
    assert capped.debate_spec().max_cost_usd == pytest.approx(0.5)
    assert store.month_spend(REPO, 7).repo_held_usd == pytest.approx(1.5)
    with pytest.raises(BudgetSpent) as refused:
        create(store, 3, limits)
    exc = refused.value
    assert (exc.scope, exc.estimate, exc.least) == ("repo", 1.0, 0.4)
    assert exc.spent == pytest.approx(1.5)
    assert "even its first round at $0.4000" in exc.public and "$0.4000 short" in exc.public


def test_the_per_run_cap_stops_a_run_instead_of_refusing_it(store: RunStore) -> None:
    run = create(store, 1, fits(1.2, 0.35, per_run_usd=0.62))
    assert run.debate_spec().max_cost_usd == 0.62
    assert store.month_spend(REPO, 7).repo_held_usd == 0.62  # held: the cap, not the 1.2
    with pytest.raises(BudgetSpent) as refused:
        create(store, 2, fits(1.2, 0.7, per_run_usd=0.62))
    assert refused.value.scope == "run"
    assert "over the per-run budget of $0.6200 by $0.0800" in refused.value.public


def test_six_at_once_against_two_point_two_debates_start_exactly_two(
    db_url: str, clock: FakeClock, store: RunStore
) -> None:
    stores = [RunStore.from_url(db_url, clock=clock) for _ in range(2)]
    created: list[str] = []
    refused: list[BudgetSpent] = []

    def attempt(n: int) -> None:
        try:
            limits = fits(1.0, 0.4, installation_month_usd=2.2)
            created.append(create(stores[n % 2], n + 1, limits).id)
        except BudgetSpent as exc:
            refused.append(exc)

    race(6, attempt)
    for s in stores:
        s.dispose()
    assert len(created) == 2 and [e.scope for e in refused] == ["installation"] * 4
    assert all(e.spent == pytest.approx(2.0) for e in refused)


def test_usage_history_reads_answers_and_tool_loops_of_the_mode(store: RunStore) -> None:
    from bot.engine.types import Evidence, Exchange
    from bot.store.rows import StoredStep

    run = create(store, 1)
    other = create(store, 2, installation_id=9)  # another installation's run: not read
    words = "word " * 120
    store.save_turn(
        run.id, Turn(TurnKey("opening", 1, "pro"), words, "openai/a", usage=Usage(1, 150))
    )
    store.save_turn(
        other.id, Turn(TurnKey("opening", 1, "pro"), "x", "openai/a", usage=Usage(1, 1))
    )
    key = TurnKey("rebuttal", 2, "pro")
    store.save_step(
        run.id, key.id(), StoredStep(0, "openai/a", Exchange("", (), ()), Usage(800, 9))
    )
    final = StoredStep(
        2,
        "openai/a",
        Exchange("done", (), ()),
        Usage(900, 40),
        final=True,
        evidence=Evidence(tool_calls=3, bytes_read=5000, steps=3),
    )
    store.save_step(run.id, key.id(), final)
    store.save_turn(run.id, Turn(key, "done here", "openai/a", usage=Usage(3000, 90)))
    store.save_turn(run.id, Turn(TurnKey("opening", 1, "con"), "y", "openai/b", usage=Usage(1, 1)))
    history = store.usage_history(installation_id=7, repo=REPO, mode="debate", models=["openai/a"])
    uses = sorted(history.turns, key=lambda u: u.phase)
    assert [
        (u.phase, u.words, u.answer_tokens, u.tool_steps, u.tool_bytes, u.first_input_tokens)
        for u in uses
    ] == [("opening", 120, 150, None, 0, 0), ("rebuttal", 2, 40, 2, 5000, 800)]
    assert [u.input_tokens for u in uses] == [1, 3000]
    assert set(history.specs or {}) == {run.id}
    assert not store.usage_history(
        installation_id=7, repo=REPO, mode="critique", models=["openai/a"]
    ).turns
