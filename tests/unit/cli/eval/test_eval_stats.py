"""`debate-bot eval` statistics against known values, and the oracle test model
through the real eval run (cases → specs → router → cache → report figures)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from bot.cli.eval.cache import Cache, Result
from bot.cli.eval.cases import load_cases
from bot.cli.eval.configs import EvalConfig, parse_config
from bot.cli.eval.report import comparisons, figures, write_report
from bot.cli.eval.run import plan_jobs, run_jobs
from bot.cli.eval.stats import ConfigFigures, mcnemar_exact, paired_difference, percentile, wilson
from bot.core.settings import Settings
from bot.models.oracle import AnswerBook, Labelled, belief, draw
from bot.models.router import ModelRouter


def test_wilson_known_values() -> None:
    # Published values (e.g. Newcombe 1998, Table I): 0/10 → 0–0.2775, 5/10 → 0.2366–0.7634.
    low, high = wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson(5, 10)
    assert (low, high) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    low, high = wilson(81, 263)  # Newcombe 1998, example (c): 0.2553–0.3662
    assert (low, high) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_mcnemar_exact_against_a_hand_computed_table() -> None:
    # Discordant pairs b = 1, c = 9: P(X <= 1 | n = 10, 1/2) = (1 + 10) / 1024, two-sided x2.
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024)
    assert mcnemar_exact(9, 1) == pytest.approx(22 / 1024)
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 0) == 1.0


def test_paired_difference_table_and_interval() -> None:
    # 100 cases: both right 60, only a 5, only b 20, neither 15.
    pairs = [(True, True)] * 60 + [(True, False)] * 5 + [(False, True)] * 20 + [(False, False)] * 15
    p = paired_difference(pairs)
    assert (p.n, p.both, p.only_a, p.only_b, p.neither) == (100, 60, 5, 20, 15)
    assert p.diff == pytest.approx(0.15)
    assert p.low < 0.15 < p.high
    assert p.low > 0  # b is credibly better here
    assert p.p_value == pytest.approx(mcnemar_exact(5, 20))
    assert p.p_value < 0.01
    flipped = paired_difference([(b, a) for a, b in pairs])
    assert flipped.diff == pytest.approx(-0.15)
    assert (flipped.low, flipped.high) == pytest.approx((-p.high, -p.low))
    # Identical configurations: a difference of exactly zero, interval around it.
    same = paired_difference([(True, True)] * 30 + [(False, False)] * 10)
    assert same.diff == 0 and same.low < 0 < same.high and same.p_value == 1.0


def test_percentile() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)


def test_oracle_draws_are_deterministic_and_independent_per_seat() -> None:
    case = Labelled("c-1", "arbitrate", "DISMISSED")
    assert draw("c-1", "scripted/oracle:0.7", "judge") == draw(
        "c-1", "scripted/oracle:0.7", "judge"
    )
    seats = {draw("c-1", "scripted/oracle:0.7", f"sample-{i}") for i in range(50)}
    assert len(seats) == 50
    assert belief(case, "scripted/oracle:1", "x", 1.0) == "DISMISSED"
    assert belief(case, "scripted/oracle:0", "x", 0.0) == "CONFIRMED"


def _write_cases(path: Path, n: int) -> Path:
    lines = []
    for i in range(n):
        lines.append(
            json.dumps(
                {
                    "id": f"case-{i}",
                    "kind": "arbitrate",
                    "comment": f"`value_{i}` may be None here.",
                    "path": "src/m.py",
                    "line": 2,
                    "diff_hunk": "@@ -1,1 +1,2 @@\n+y = value.attr",
                    "files": {"src/m.py": f"value_{i} = load()\ny = value_{i}.attr\n"},
                    "expected": "DISMISSED" if i % 2 else "CONFIRMED",
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(
    tmp_path: Path, n: int, *configs: str
) -> tuple[list[ConfigFigures], list[Result], list[EvalConfig]]:
    cases = load_cases([_write_cases(tmp_path / "cases.jsonl", n)])
    parsed = [c for arg in configs for c in parse_config(arg)]
    settings = Settings()

    async def go() -> list[Result]:
        book = AnswerBook()
        async with ModelRouter(settings, answer_book=book) as router:
            jobs = plan_jobs(cases, parsed, settings=settings, router=router, book=book)
            with Cache(tmp_path / "cache.sqlite") as cache:
                result = await run_jobs(
                    jobs,
                    router=router,
                    cache=cache,
                    concurrency=32,
                    budget_usd=None,
                    console=Console(file=io.StringIO()),
                )
        return result.results

    results = anyio.run(go)
    return [figures(c, results) for c in parsed], results, parsed


def test_oracle_at_0_7_on_2000_cases_lands_in_its_interval(tmp_path: Path) -> None:
    (fig,), _, _ = _run(tmp_path, 2000, "one=single:scripted/oracle:0.7")
    assert fig.n == 2000 and fig.answered == 2000 and fig.escalated == fig.failed == 0
    assert fig.ci_low <= 0.7 <= fig.ci_high
    assert fig.ci_high - fig.ci_low < 0.05  # ~±2 points at n = 2000
    assert fig.accuracy == pytest.approx(0.7, abs=0.035)


def test_a_vote_of_five_oracles_at_0_7_gives_about_0_837(tmp_path: Path) -> None:
    expected = sum(math.comb(5, k) * 0.7**k * 0.3 ** (5 - k) for k in range(3, 6))
    assert expected == pytest.approx(0.83692)
    figs, results, configs = _run(
        tmp_path, 1000, "one=single:scripted/oracle:0.7", "five=vote:5:scripted/oracle:0.7"
    )
    one, five = figs
    assert five.ci_low <= expected <= five.ci_high
    assert five.accuracy == pytest.approx(expected, abs=0.03)
    # The paired comparison sees the vote's gain and its significance.
    (comp,) = comparisons(configs, results)
    assert comp["a"] == "one" and comp["b"] == "five"
    assert comp["diff_low"] > 0 and comp["p_value"] < 1e-6
    assert one.accuracy is not None and five.accuracy is not None
    assert comp["diff"] == pytest.approx(five.accuracy - one.accuracy)


def test_oracle_debates_abstain_when_the_seats_disagree(tmp_path: Path) -> None:
    """In a debate every seat (two personas and the judge) draws on its own: the
    verdict stands only when they agree, else ESCALATED, counted apart."""
    (fig,), results, configs = _run(tmp_path, 300, "deb=debate:scripted/oracle:0.7;rounds=2")
    # All three right: 0.343; all three wrong: 0.027; anything else escalates.
    assert fig.answered + fig.escalated == 300 and fig.failed == 0
    assert fig.escalated / 300 == pytest.approx(0.63, abs=0.08)
    assert fig.accuracy == pytest.approx(0.343 / 0.37, abs=0.06)
    md, js, png = write_report(tmp_path / "out", configs, results, n_cases=300, notes=[])
    report = json.loads(js.read_text())
    assert set(report) == {"configs", "comparisons", "cases"}
    assert set(report["configs"][0]) == {
        "name", "n", "accuracy", "ci_low", "ci_high", "escalated", "failed",
        "cost_usd", "tokens", "p50_s", "p95_s",
    }  # fmt: skip
    assert set(report["cases"][0]) == {"id", "config", "answer", "correct", "cost_usd", "seconds"}
    escalated = [c for c in report["cases"] if c["answer"] == "ESCALATED"]
    assert escalated and all(c["correct"] is None for c in escalated)
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = md.read_text()
    assert "oracle test models" in text and "accuracy-cost.png" in text
