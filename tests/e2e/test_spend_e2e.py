"""Money end to end: `debate-bot serve` over HTTP against the fake GitHub and the
fake model servers, which report usage as providers do. The ledger holds each
call's usage priced by the deployment's book; `/debate estimate` and admission
quote one estimate, learned from the ledger; a budget admits a run whose first
round fits (capped at what is left) and refuses the rest with one reply and no
model call; a run stops at its own cap and says so; estimates need no model."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from bot.models.pricing import Price, PriceBook
from bot.run.estimate import padded_answer
from bot.store import RunStore
from testkit.harness.scenarios import (
    bot_markers,
    command,
    finished,
    never_converge,
    runs,
    seed_issue,
    stored_turns,
)
from testkit.harness.service import INSTALLATION, REPO, Harness, all_finished

ESTIMATE = re.compile(r"Estimated cost: \*\*\$([0-9.]+)\*\*")
FIRST_ROUND = re.compile(r"its first round \$([0-9]+\.[0-9]+)")
# The issue's setting: a small repository (three source files on the branch a
# run pins, so tools are offered; the fake models read nothing) and dear prices.
SOURCES = {
    "src/app.py": "def handler(request):\n    return route(request)\n" * 30,
    "src/routes.py": "ROUTES = {'/': index, '/api': api}\n" * 40,
    "src/models.py": "class User:\n    name: str\n    email: str\n" * 30,
}
DEAR = (
    "openai/gpt-4.1-mini: {input: 100, cached_input: 25, output: 400}\n"
    "claude-sonnet-4-5: {input: 100, cached_input: 10, output: 400, cache_write: 125}\n"
)


def realistic(prompt: str) -> str:
    """A model that writes most of its word limit (as the estimate assumes)."""
    return padded_answer(prompt)


def stubborn(prompt: str) -> str:
    """Long answers that never converge: every round the run allows is run."""
    return padded_answer(prompt).replace("AGREE", "HOLD").replace("CONCEDE", "HOLD")


def replies(h: Harness, number: int) -> list[str]:
    return [c["body"] for c in h.github.comments(REPO, number) if c["user"] != "Codertocat"]


def say(h: Harness, number: int, text: str) -> int:
    payload, comment_id = command(h, number, text)
    assert h.post("issue_comment", payload).status_code == 202
    return comment_id


def reply_with(h: Harness, number: int, fragment: str) -> str:
    def found() -> str | None:
        return next((b for b in replies(h, number) if fragment in b), None)

    body: str = h.wait_for(found, what=f"a reply with {fragment!r}")
    return body


def estimate_reply(h: Harness, number: int, flags: str = "") -> str:
    """The reply to a new `/debate estimate` on ``number`` (which calls no model)."""
    before = len(h.models.requests)
    seen = sum("Estimated cost" in b for b in replies(h, number))
    say(h, number, f"/debate estimate {flags}".strip())
    h.wait_for(
        lambda: sum("Estimated cost" in b for b in replies(h, number)) > seen,
        what="an estimate",
    )
    body = [b for b in replies(h, number) if "Estimated cost" in b][-1]
    assert len(h.models.requests) == before, "an estimate calls no model"
    return body


def figures(body: str) -> tuple[float, float]:
    """(the expected cost, the first round) an estimate reply quotes."""
    m, f = ESTIMATE.search(body), FIRST_ROUND.search(body)
    assert m is not None and f is not None, body
    return float(m[1]), float(f[1])


def estimate_of(h: Harness, number: int, flags: str = "") -> float:
    return figures(estimate_reply(h, number, flags))[0]


def small_repository(h: Harness, tmp_path: Path) -> None:
    """The issue's setting (SOURCES on the branch the deliveries name, DEAR)."""
    prices = tmp_path / "prices.yml"
    prices.write_text(DEAR)
    for path, text in SOURCES.items():
        h.github.put_file(REPO, path, text, ref="master")
    h.models.responder = realistic
    h.start(DEBATE_BOT_PRICES_FILE=str(prices))


def debate(h: Harness, number: int, done: int, flags: str = "") -> float:
    """Run ``/debate`` to its end (``done`` runs in all by then); its spend."""
    before = sum(r["cost_usd"] for r in ledger(h))
    say(h, number, f"/debate {flags}".strip())
    h.wait_for(lambda: all_finished(h, done), timeout=60, what="the debate")
    return float(sum(r["cost_usd"] for r in ledger(h)) - before)


def all_at_once(h: Harness, issues: list[int], text: str, *, refused: int) -> None:
    """``text`` on every issue at once; wait until ``refused`` of them are refused."""
    for number in issues:
        payload, _ = command(h, number, text)
        h.post("issue_comment", payload)
    h.wait_for(
        lambda: sum(any("Not started" in b for b in replies(h, n)) for n in issues) == refused,
        timeout=60,
        what=f"{refused} refusals",
    )


def ledger(h: Harness) -> list[dict[str, Any]]:
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("select * from spend order by created_at")]


def run_costs(h: Harness) -> list[float]:
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        return [float(r[0]) for r in db.execute("select cost_usd from runs order by created_at")]


def priced(h: Harness, book: PriceBook) -> float:
    """What the fake servers' reported usage costs by ``book``: the ledger's check."""
    total = 0.0
    for req in h.models.requests:
        u = req.usage
        if not u:
            continue
        if req.api == "openai":
            ref = f"openai/{req.model}"
            inp, cached = u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"]
            written, out = 0, u["completion_tokens"]
        else:
            ref = f"anthropic/{req.model}"
            cached, written = u["cache_read_input_tokens"], u["cache_creation_input_tokens"]
            inp, out = u["input_tokens"] + cached + written, u["output_tokens"]
        price, _ = book.lookup(ref)
        assert price is not None
        total += (
            (inp - cached - written) * price.input
            + cached * price.cached_input
            + written * (price.cache_write if price.cache_write is not None else price.input)
            + out * price.output
        ) / 1_000_000
    return total


def test_the_ledger_prices_each_call_and_the_audit_line_reads_it(harness: Harness) -> None:
    h = harness
    h.models.responder = realistic
    h.start()
    number = seed_issue(h)
    say(h, number, "/debate")
    h.wait_for(lambda: finished(h), timeout=60, what="the debate")
    rows = ledger(h)
    assert len(rows) == stored_turns(h) == len(h.models.requests)
    assert {r["repo"] for r in rows} == {REPO} and {r["installation_id"] for r in rows} == {
        INSTALLATION
    }
    assert any(r["cache_write_tokens"] for r in rows)  # Anthropic's cache writes kept
    total = sum(r["cost_usd"] for r in rows)
    assert total == pytest.approx(priced(h, PriceBook()), rel=1e-6)
    assert run_costs(h) == [pytest.approx(total)]
    verdict = reply_with(h, number, "debate-bot:verdict")
    assert f"- **Cost:** ${total:.4f} (spend ledger, {len(rows)} model calls)" in verdict
    # `/debate status` shows the month so far.
    say(h, number, "/debate status")
    status = reply_with(h, number, "Spend this month")
    assert f"this repository ${total:.4f}" in status


def test_a_price_file_changes_the_figures(harness: Harness, tmp_path: Path) -> None:
    h = harness
    prices = tmp_path / "prices.yml"
    prices.write_text(
        "openai/gpt-4.1-mini: {input: 40, cached_input: 10, output: 160}\n"
        "claude-sonnet-4-5: {input: 300, cached_input: 30, output: 1500, cache_write: 375}\n"
    )
    h.start(DEBATE_BOT_PRICES_FILE=str(prices))
    number = seed_issue(h)
    say(h, number, "/debate")
    h.wait_for(lambda: finished(h), timeout=60, what="the debate")
    total = sum(r["cost_usd"] for r in ledger(h))
    book = PriceBook(
        {
            "openai/gpt-4.1-mini": Price(40, 10, 160),
            "claude-sonnet-4-5": Price(300, 30, 1500, 375),
        }
    )
    assert total == pytest.approx(priced(h, book), rel=1e-6)
    assert total > 50 * priced(h, PriceBook())


def test_a_spent_repository_budget_refuses_the_next_debate_without_a_model_call(
    harness: Harness,
) -> None:
    h = harness
    h.models.responder = realistic
    h.start()
    first = seed_issue(h)
    _, first_round = figures(estimate_reply(h, first))
    say(h, first, "/debate")
    h.wait_for(lambda: finished(h), timeout=60, what="the first debate")
    spent = sum(r["cost_usd"] for r in ledger(h))
    # What is left is half the next debate's first round.
    budget = round(spent + first_round / 2, 6)
    h.github.put_file(REPO, ".github/debate.yml", f"budget: {{per_month_usd: {budget}}}\n")

    second = seed_issue(h, title="Kafka or NATS for the event bus?")
    calls = len(h.models.requests)
    comment_id = say(h, second, "/debate")
    body = reply_with(h, second, "Not started")
    assert "this repository's monthly budget" in body and f"${budget:.4f}" in body
    assert f"${spent:.4f} is spent" in body and "estimated at $" in body
    assert "even its first round at $" in body and " short." in body
    assert re.search(r"resets on \d{4}-\d{2}-01 00:00 UTC", body)
    time.sleep(0.5)
    assert len(h.models.requests) == calls
    assert "eyes" not in h.github.reactions(REPO, comment_id=comment_id)
    assert len(runs(h)) == 1
    assert len(replies(h, second)) == 1


def test_budgeted_debates_that_fit_run_and_the_estimate_learns_from_them(
    harness: Harness, tmp_path: Path
) -> None:
    h = harness
    small_repository(h, tmp_path)
    issue = seed_issue(h)
    prior, _ = figures(estimate_reply(h, issue))
    real = [debate(h, issue, n) for n in (1, 2, 3)]
    # Never below the real spend by more than 30 % before there is history.
    assert prior >= 0.7 * max(real)
    body = estimate_reply(h, issue)
    estimate, _ = figures(body)
    assert "turns of history here" in body and "turns with tools" in body
    assert "the repository holds" in body
    # Once three debates are in the ledger: within 0.7-1.5 of what one costs.
    assert 0.7 <= estimate / real[-1] <= 1.5, (estimate, real)
    # A monthly budget with room for 2.3 more debates admits them.
    spent = sum(r["cost_usd"] for r in ledger(h))
    budget = round(spent + 2.3 * real[-1], 6)
    h.github.put_file(REPO, ".github/debate.yml", f"budget: {{per_month_usd: {budget}}}\n")
    for n in (4, 5):
        assert debate(h, issue, n) > 0
    assert not any("Not started" in b for b in replies(h, issue))
    # `/debate estimate` and the refusal quote the same figures for the same plan.
    quoted = estimate_reply(h, issue)
    expected, least = figures(quoted)
    assert budget - sum(r["cost_usd"] for r in ledger(h)) < least, "no room for a third"
    say(h, issue, "/debate")
    refusal: str = h.wait_for(
        lambda: next(
            (b for b in replies(h, issue) if "Not started" in b and "Estimated" not in b), None
        ),
        what="the refusal",
    )
    assert f"this run is estimated at ${expected:.4f}" in refusal
    assert f"even its first round at ${least:.4f}" in refusal
    assert refusal[refusal.index("Not started") :] in quoted
    assert len(runs(h)) == 5


def test_six_at_once_against_a_budget_of_two_point_two_debates_start_exactly_two(
    harness: Harness,
) -> None:
    h = harness
    h.models.responder = realistic
    h.models.latency_s = 1.0  # the two admitted hold their estimates meanwhile
    h.start()
    issues = [seed_issue(h) for _ in range(6)]
    budget = round(estimate_of(h, issues[0]) * 2.2, 6)
    h.github.put_file(REPO, ".github/debate.yml", f"budget: {{per_month_usd: {budget}}}\n")
    all_at_once(h, issues, "/debate", refused=4)
    assert len(runs(h)) == 2
    h.wait_for(lambda: all_finished(h, 2), timeout=60, what="the two debates")
    assert sum(r["cost_usd"] for r in ledger(h)) <= budget


def _ten_at_once(h: Harness, *, count_runs: Any) -> None:
    issues = [seed_issue(h) for _ in range(10)]
    estimate, first_round = figures(estimate_reply(h, issues[0], "--rounds 1"))
    # Room for three estimates and half a fourth's first round.
    budget = round(estimate * 3 + first_round / 2, 6)
    h.github.put_file(REPO, ".github/debate.yml", f"budget: {{per_month_usd: {budget}}}\n")
    all_at_once(h, issues, "/debate --rounds 1", refused=7)
    assert count_runs() == 3


def test_ten_commands_at_once_start_exactly_three_within_the_budget(harness: Harness) -> None:
    h = harness
    # Answers that cost about the estimate, slowly: the three admitted hold or
    # spend their share while the other seven are decided.
    h.models.responder = realistic
    h.models.latency_s = 1.0
    h.start()
    _ten_at_once(h, count_runs=lambda: len(runs(h)))


@pytest.mark.postgres
def test_ten_commands_at_once_on_postgresql(harness: Harness, pg_database: str) -> None:
    h = harness
    h.models.responder = realistic
    h.models.latency_s = 1.0
    store = RunStore.from_url(pg_database)
    store.migrate()
    try:
        h.start(DEBATE_BOT_DATABASE_URL=pg_database)
        _ten_at_once(h, count_runs=lambda: sum(store.counts_by_state().values()))
    finally:
        store.dispose()


def test_a_capped_five_round_run_starts_stops_early_and_says_so(
    harness: Harness, tmp_path: Path
) -> None:
    h = harness
    small_repository(h, tmp_path)
    number = seed_issue(h)
    # The issue's setting: debates have run here (so the estimate has history)…
    real = max(debate(h, number, n) for n in (1, 2, 3))
    # …and the repository caps a run at about half of what one costs.
    cap = round(real * 0.55, 4)
    h.github.put_file(REPO, ".github/debate.yml", f"budget: {{per_run_usd: {cap}}}\n")
    h.models.responder = stubborn  # every round the run allows is run
    _, first_round = figures(estimate_reply(h, number, "--rounds 5"))
    assert first_round < cap, "its first round fits"
    before = len(ledger(h))
    say(h, number, "/debate --rounds 5")
    h.wait_for(lambda: all_finished(h, 4), timeout=90, what="the capped debate")
    assert not any("Not started" in b for b in replies(h, number))
    verdict = [b for b in replies(h, number) if "debate-bot:verdict" in b][-1]
    assert f"the cost cap (${cap:g}) was reached" in verdict
    assert "Budget cap reached" in verdict
    # It stopped starting persona turns: fewer rounds than it may run.
    run_id = ledger(h)[-1]["run_id"]
    rounds = [m for m in bot_markers(h, number) if "round=" in m and run_id in m]
    assert 1 <= len(rounds) < 5
    # Stopped before a round that would pass the cap: past it by the synthesis at most.
    rows = ledger(h)[before:]
    synthesis = sum(r["cost_usd"] for r in rows if ":synthesis:" in r["turn_id"])
    assert sum(r["cost_usd"] for r in rows) - synthesis <= cap


def test_an_unknown_model_is_refused_or_priced_as_configured(harness: Harness) -> None:
    h = harness
    endpoints = json.dumps({"local": {"kind": "openai", "base_url": h.models.openai_base_url}})
    h.github.put_file(
        REPO,
        ".github/debate.yml",
        "models: [local/mystery-a, local/mystery-b]\njudge: local/mystery-a\n",
    )
    h.start(DEBATE_BOT_ENDPOINTS=endpoints, DEBATE_BOT_BUDGET_REPO_MONTH_USD="5")
    number = seed_issue(h)
    comment_id = say(h, number, "/debate --rounds 1")
    body = reply_with(h, number, "Not started")
    assert "`local/mystery-a`" in body and "`local/mystery-b`" in body
    assert h.models.requests == [] and runs(h) == []
    assert "eyes" not in h.github.reactions(REPO, comment_id=comment_id)
    h.stop()

    h.start(
        DEBATE_BOT_ENDPOINTS=endpoints,
        DEBATE_BOT_BUDGET_REPO_MONTH_USD="5",
        DEBATE_BOT_UNKNOWN_PRICE="2",
    )
    say(h, number, "/debate --rounds 1")
    h.wait_for(lambda: finished(h), timeout=60, what="the priced debate")
    rows = ledger(h)
    assert rows and {r["price_basis"] for r in rows} == {"assumed"}
    tokens = sum(r["input_tokens"] + r["output_tokens"] for r in rows)
    assert sum(r["cost_usd"] for r in rows) == pytest.approx(tokens * 2 / 1e6, rel=1e-6)
    verdict = reply_with(h, number, "debate-bot:verdict")
    assert "price assumed (DEBATE_BOT_UNKNOWN_PRICE) for `local/mystery-a`" in verdict


def test_a_crash_and_resume_counts_each_call_once(harness: Harness) -> None:
    h = harness
    h.models.latency_s = 0.3
    h.models.responder = never_converge
    h.start()
    number = seed_issue(h)
    say(h, number, "/debate --rounds 3")
    h.wait_for(lambda: any("round=1" in m for m in bot_markers(h, number)), what="round 1")
    h.wait_for(lambda: len(h.models.requests) > stored_turns(h), what="a turn in flight")
    assert h.service is not None
    h.service.kill()
    assert len(ledger(h)) == stored_turns(h)
    time.sleep(0.5)
    h.start()
    h.wait_for(lambda: finished(h), timeout=60, what="the resumed run")
    rows = ledger(h)
    assert len(rows) == stored_turns(h) == len({(r["run_id"], r["turn_id"]) for r in rows})
    # Calls in flight at the kill were paid to the provider but never stored: the
    # ledger counts what the run used, each once, and agrees with the run's total.
    assert len(rows) <= len(h.models.requests)
    assert run_costs(h) == [pytest.approx(sum(r["cost_usd"] for r in rows))]


def test_estimate_replies_with_the_plan_and_starts_nothing(harness: Harness) -> None:
    h = harness
    h.start(DEBATE_BOT_BUDGET_RUN_USD="3")
    number = seed_issue(h)
    comment_id = say(h, number, "/debate estimate --rounds 2 --mode critique")
    body = reply_with(h, number, "Estimated cost")
    assert "**Estimate** (nothing was run): critique, up to 2 rounds" in body
    assert "`openai/gpt-4.1-mini`" in body and "per run $3.0000" in body
    assert h.models.requests == [] and runs(h) == []
    assert "eyes" not in h.github.reactions(REPO, comment_id=comment_id)
    say(h, number, "/debate estimate --rounds 99")
    assert "rounds" in reply_with(h, number, "--rounds")


def test_estimate_of_another_issue_reads_it_or_says_it_is_missing(harness: Harness) -> None:
    h = harness
    h.start()
    number = seed_issue(h)
    other = seed_issue(h, title="Kafka or NATS?", body="Our event bus. " * 200)
    say(h, number, "/debate estimate #999")
    reply_with(h, number, "Issue #999 was not found in this repository.")
    small = estimate_of(h, number)
    # The other issue's long body makes for a dearer debate than this one.
    say(h, number, f"/debate --estimate #{other}")
    h.wait_for(
        lambda: sum("Estimated cost" in b for b in replies(h, number)) == 2, what="two estimates"
    )
    bodies = [b for b in replies(h, number) if "Estimated cost" in b]
    m = ESTIMATE.search(bodies[-1])
    assert m is not None and float(m[1]) > small
    assert h.models.requests == [] and runs(h) == []
