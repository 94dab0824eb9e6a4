"""Money without a service: the admission policy, the price book and its file,
and `debate-bot spend` (docs/configuration.md, "Money"; the estimate:
test_estimate.py)."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.errors import BudgetSpent, ConfigError, PriceUnknown, QuotaSpent
from bot.core.settings import Settings
from bot.engine.types import DebateSpec, PersonaSpec, Turn, TurnKey, Usage
from bot.inputs.repo_config import RepoConfig
from bot.models.pricing import Price, PriceBook, load_price_book
from bot.run.admission import Budget, Limits, Quota, decide
from bot.service.worker.budgets import caps_for, ledger_cost_line, with_ledger_cost
from bot.store import NewRun, RunStore
from bot.store.admission import Admitted, Tally, Used, month_start, next_month
from bot.store.rows import RunSpend

NOW = datetime(2026, 12, 15, 10, 0, tzinfo=UTC)
BOT = Path(__file__).resolve().parents[3] / "bot"


def spec(**kw: object) -> DebateSpec:
    base = DebateSpec(
        mode="debate",
        title="gRPC or REST?",
        subject="Should we use gRPC or REST for the public API? " * 10,
        personas=(
            PersonaSpec("Atlas", "systems", "openai/gpt-4.1-mini"),
            PersonaSpec("Forge", "pragmatism", "anthropic/claude-sonnet-4-5"),
        ),
        judge="openai/gpt-4.1-mini",
    )
    return replace(base, **kw)  # type: ignore[arg-type]


# -- admission (pure) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        (("run", "admission.py"), {"bot.core.errors", "bot.store.admission"}),
        (("store", "admission.py"), {"bot.core.errors"}),
    ],
)
def test_admission_imports_only_the_stdlib_the_errors_and_the_stores_value_types(
    path: tuple[str, str], allowed: set[str]
) -> None:
    tree = ast.parse(BOT.joinpath(*path).read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    ours = {m for m in imported if m and m.split(".")[0] == "bot"}
    assert ours <= allowed, ours
    import sys

    foreign = {m for m in imported - ours if m and m.split(".")[0] not in sys.stdlib_module_names}
    assert foreign <= {"__future__"}, foreign


def test_limits_tally_only_the_sums_their_policy_reads() -> None:
    quota = Quota(NOW, per_repo=3, per_user=2)
    assert Limits().tally == Tally()
    assert Limits(quota).tally == Tally(runs_since=NOW)
    # Unknown prices alone need no sums; any dollar cap needs the repository's month.
    assert Limits(budget=Budget(0.1, unpriced=("local/x",), refuse_unpriced=True)).tally == Tally()
    assert Limits(budget=Budget(0.1, per_run_usd=1.0)).tally == Tally(repo_month=True)
    both = Limits(quota, Budget(0.1, installation_month_usd=5.0)).tally
    assert both == Tally(runs_since=NOW, repo_month=True, installation_month=True)
    # As the store calls it: the same decision as the policy's.
    limits = Limits(quota, Budget(0.2, repo_month_usd=5.0))
    assert limits.decide(Used(1, 0, 4.5), NOW) == decide(limits, Used(1, 0, 4.5), NOW)


def test_quotas_are_checked_first_repository_before_requester() -> None:
    quota = Quota(NOW, per_repo=3, per_user=2)
    assert isinstance(decide(Limits(quota), Used(3, 0), NOW), QuotaSpent)
    assert decide(Limits(quota), Used(3, 0), NOW).scope == "repo"  # type: ignore[union-attr]
    assert decide(Limits(quota), Used(1, 2), NOW).scope == "user"  # type: ignore[union-attr]
    assert decide(Limits(quota), Used(2, 1), NOW) == Admitted(None, 0.0)


def test_budgets_cap_the_run_at_the_tightest_room_left() -> None:
    b = Budget(0.2, per_run_usd=1.0, repo_month_usd=5.0, installation_month_usd=10.0)
    assert decide(Limits(budget=b), Used(repo_month_usd=4.5), NOW) == Admitted(0.5, 0.2)
    capped = decide(Limits(budget=b), Used(installation_month_usd=9.7), NOW)
    assert isinstance(capped, Admitted) and capped.cap_usd == pytest.approx(0.3)
    assert decide(Limits(budget=b), Used(), NOW) == Admitted(1.0, 0.2)
    refused = decide(Limits(budget=b), Used(repo_month_usd=4.9), NOW)
    assert isinstance(refused, BudgetSpent) and refused.scope == "repo"
    assert refused.resets == datetime(2027, 1, 1, tzinfo=UTC) == next_month(NOW)
    over = decide(Limits(budget=Budget(2.0, per_run_usd=1.0)), Used(), NOW)
    assert isinstance(over, BudgetSpent) and over.scope == "run"
    # No budget at all: admitted uncapped.
    assert decide(Limits(budget=Budget(2.0)), Used(), NOW) == Admitted(None, 2.0)


def test_a_budget_admits_a_run_whose_first_round_fits() -> None:
    b = Budget(1.0, per_run_usd=5.0, repo_month_usd=2.2, first_round_usd=0.4)
    # The whole run fits: it holds its estimate, capped at what is left.
    whole = decide(Limits(budget=b), Used(repo_month_usd=1.0), NOW)
    assert isinstance(whole, Admitted) and whole.reserved_usd == 1.0
    assert whole.cap_usd == pytest.approx(1.2)
    # Only its first round fits: it starts, capped at (and holding) what is left.
    capped = decide(Limits(budget=b), Used(repo_month_usd=1.7), NOW)
    assert isinstance(capped, Admitted)
    assert capped.cap_usd == pytest.approx(0.5) and capped.reserved_usd == pytest.approx(0.5)
    # Not even the first round fits: refused, naming the budget and the shortfall.
    refused = decide(Limits(budget=b), Used(repo_month_usd=2.0), NOW)
    assert isinstance(refused, BudgetSpent) and refused.scope == "repo"
    assert (refused.least, refused.estimate) == (0.4, 1.0)
    assert "which leaves $0.2000" in refused.public and "$0.2000 short" in refused.public
    # The per-run cap stops the run; it refuses only a first round over it.
    run = Budget(1.0, per_run_usd=0.62, first_round_usd=0.4)
    assert decide(Limits(budget=run), Used(), NOW) == Admitted(0.62, 0.62)
    over = decide(Limits(budget=replace(run, first_round_usd=0.7)), Used(), NOW)
    assert isinstance(over, BudgetSpent) and over.scope == "run"
    assert "over the per-run budget of $0.6200 by $0.0800" in over.public


def test_an_unpriced_model_is_refused_only_when_the_policy_says_so() -> None:
    b = Budget(0.1, repo_month_usd=5.0, unpriced=("local/x",), refuse_unpriced=True)
    refused = decide(Limits(budget=b), Used(), NOW)
    assert isinstance(refused, PriceUnknown) and refused.models == ("local/x",)
    assert "`local/x`" in refused.public and "DEBATE_BOT_PRICES_FILE" in refused.public
    assert isinstance(
        decide(Limits(budget=Budget(0.1, unpriced=("local/x",))), Used(), NOW), Admitted
    )


def test_month_arithmetic_rolls_the_year() -> None:
    assert month_start(NOW) == datetime(2026, 12, 1, tzinfo=UTC)
    assert next_month(datetime(2026, 12, 31, 23, 59, tzinfo=UTC)) == datetime(
        2027, 1, 1, tzinfo=UTC
    )


# -- prices -----------------------------------------------------------------------


def test_the_price_file_overrides_and_extends_the_table(tmp_path: Path) -> None:
    path = tmp_path / "prices.yml"
    path.write_text(
        "openai/gpt-4.1-mini: {input: 4, cached_input: 1, output: 16}\n"
        "local/llama3: {input: 0.5, cached_input: 0.5, output: 1, cache_write: 0.7}\n"
    )
    book = load_price_book(path, None)
    assert book.lookup("openai/gpt-4.1-mini") == (Price(4, 1, 16), "list")
    assert book.lookup("local/llama3") == (Price(0.5, 0.5, 1, 0.7), "list")
    assert book.lookup("anthropic/claude-sonnet-4-5")[1] == "list"  # built-in still there
    assert book.lookup("local/other") == (None, "unknown")
    usage = Usage(input_tokens=1_000_000, cached_tokens=500_000, output_tokens=1_000_000)
    assert book.charge("openai/gpt-4.1-mini", usage).cost_usd == pytest.approx(2 + 0.5 + 16)
    assert PriceBook().charge("openai/gpt-4.1-mini", usage).cost_usd == pytest.approx(
        0.2 + 0.05 + 1.6
    )


def test_unknown_prices_follow_the_setting() -> None:
    assumed = load_price_book(None, 2.0)
    usage = assumed.charge("local/x", Usage(input_tokens=1_000_000, output_tokens=500_000))
    assert usage.cost_usd == pytest.approx(3.0) and usage.price_basis == "assumed"
    assert assumed.unpriced(["local/x"]) == []
    assert PriceBook().charge("local/x", Usage(10, 10)).price_basis == "unknown"
    assert PriceBook(unknown="refuse").refuses(budgeted=False)
    assert PriceBook().refuses(budgeted=True) and not PriceBook().refuses(budgeted=False)
    assert not assumed.refuses(budgeted=True)
    assert PriceBook().lookup("scripted/anything")[0] == Price(0, 0, 0)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("gpt-x: {input: 1, output: 2}", "missing ['cached_input']"),
        ("gpt-x: {input: 1, cached_input: 1, output: 2, speed: 3}", "unknown keys ['speed']"),
        ("gpt-x: {input: -1, cached_input: 1, output: 2}", "gpt-x.input"),
        ("gpt-x: {input: yes, cached_input: 1, output: 2}", "gpt-x.input"),
        ("gpt-x: 3", "expected {input"),
        ("- a\n- b", "expected a mapping"),
        ("a: [", "not valid YAML"),
    ],
)
def test_a_bad_price_file_is_one_line_naming_the_entry(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "prices.yml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_price_book(path, None)
    assert fragment in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="cannot read"):
        load_price_book(tmp_path / "absent.yml", None)


def test_the_settings_read_the_unknown_price_and_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBATE_BOT_UNKNOWN_PRICE", "refuse")
    monkeypatch.setenv("DEBATE_BOT_BUDGET_RUN_USD", "2")
    assert Settings(_env_file=None).unknown_price == "refuse"
    monkeypatch.setenv("DEBATE_BOT_UNKNOWN_PRICE", "1.5")
    settings = Settings(_env_file=None)
    assert settings.unknown_price == 1.5 and settings.budget_run_usd == 2.0


def test_a_repository_can_only_lower_the_operators_budgets() -> None:
    settings = Settings(_env_file=None, budget_run_usd=2, budget_repo_month_usd=50)
    lower = RepoConfig.model_validate({"budget": {"per_run_usd": 1, "per_month_usd": 80}})
    caps = caps_for(settings, lower)
    assert (caps.per_run, caps.repo_month, caps.installation_month) == (1, 50, None)
    # With no operator cap the repository's own applies.
    caps = caps_for(Settings(_env_file=None), lower)
    assert (caps.per_run, caps.repo_month) == (1, 80)
    with pytest.raises(ValueError):
        RepoConfig.model_validate({"budget": {"per_run_usd": 0}})


# -- the audit -------------------------------------------------------------------------


def test_the_audit_cost_line_comes_from_the_ledger() -> None:
    body = "### Audit\n\n- **Tokens:** 1 input\n- **Cost estimate:** $0.0100\n- **Drops:** none"
    spent = RunSpend(0.0123, 4, ("local/a",), ("local/b",))
    out = with_ledger_cost(body, spent)
    assert "- **Cost:** $0.0123 (spend ledger, 4 model calls)" in out
    assert "price assumed (DEBATE_BOT_UNKNOWN_PRICE) for `local/a`" in out
    assert "no price known for `local/b` (counted as $0)" in out
    assert "Cost estimate" not in out and out.endswith("- **Drops:** none")
    assert ledger_cost_line(RunSpend(0.5, 1, (), ())).endswith("1 model calls)")


# -- `debate-bot spend` -----------------------------------------------------------------


def test_spend_cli_tables_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    monkeypatch.setenv("DEBATE_BOT_DATABASE_URL", url)
    store = RunStore.from_url(url, clock=lambda: datetime(2026, 11, 20, tzinfo=UTC))
    store.migrate()
    run = store.create_run(NewRun(repo="octo/a", issue_number=1, spec=spec(), installation_id=3))
    for slot, usd in (("Atlas", 0.25), ("Forge", 0.5)):
        store.save_turn(
            run.id,
            Turn(
                TurnKey("opening", 1, slot),
                "x",
                f"openai/{slot}",
                usage=Usage(100, 10, cost_usd=usd),
            ),
        )
    store.dispose()
    runner = CliRunner()
    table = runner.invoke(app, ["spend", "--month", "2026-11", "--by", "model"])
    assert table.exit_code == 0, table.output
    assert "openai/Forge" in table.output and "$0.5000" in table.output
    assert "Total: $0.7500" in table.output
    doc = json.loads(runner.invoke(app, ["spend", "--month", "2026-11", "--json"]).output)
    assert doc["by"] == "repo" and doc["total_usd"] == 0.75
    assert doc["rows"][0]["key"] == "octo/a" and doc["rows"][0]["calls"] == 2
    empty = runner.invoke(app, ["spend", "--month", "2026-10"])
    assert "(no model calls recorded)" in empty.output
    for args, hint in ((["--month", "Nov"], "YYYY-MM"), (["--by", "user"], "repo, installation")):
        bad = runner.invoke(app, ["spend", *args])
        assert bad.exit_code == 2 and hint in bad.output
        assert "Traceback" not in bad.output and len(bad.output.strip().splitlines()) == 1


def test_spend_metrics_are_read_at_scrape_time() -> None:
    from bot.core.metrics import Metrics

    metrics = Metrics()
    metrics.watch_spend(
        lambda: iter([(3, "octo/a", "openai/gpt-4.1-mini", 1.25)]), lambda: {3: 40.0}, 50.0
    )
    text = metrics.render().decode()
    assert (
        'debate_bot_spend_usd_total{installation="3",model="openai/gpt-4.1-mini",'
        'repository="octo/a"} 1.25' in text
    )
    assert "debate_bot_budget_limit_usd 50.0" in text
    assert 'debate_bot_budget_remaining_usd{installation="3"} 10.0' in text

    def down() -> list[tuple[int | None, str, str, float]]:
        raise RuntimeError("database down")

    quiet = Metrics()
    quiet.watch_spend(down, dict, None)
    assert b"debate_bot_spend_usd" in quiet.render()  # a scrape never fails


def test_estimate_parses_like_a_debate() -> None:
    from bot.core.errors import UsageError
    from bot.inputs.parser import parse_command

    cmd = parse_command("/debate estimate --rounds 2 --mode critique")
    assert cmd is not None and (cmd.action, cmd.rounds, cmd.mode) == ("estimate", 2, "critique")
    flag = parse_command("/debate --estimate --rounds 2 #12")
    assert flag is not None and (flag.action, flag.issue_ref) == ("estimate", 12)
    topic = parse_command("/debate estimate Kafka or NATS?")
    assert topic is not None and (topic.action, topic.topic) == ("estimate", "Kafka or NATS?")
    assert parse_command("/debate estimate --help").action == "help"  # type: ignore[union-attr]
    for bad in ("/debate estimate --bots", "/debate review a.md --estimate"):
        with pytest.raises(UsageError):
            parse_command(bad)
