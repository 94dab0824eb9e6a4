"""`debate-bot eval CASES…`: load and check everything, run, write the report."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from bot.cli.eval.cache import Cache
from bot.cli.eval.cases import Loaded, load_cases
from bot.cli.eval.configs import EvalConfig, check_unique, parse_config
from bot.cli.eval.material import tools_supported
from bot.cli.eval.report import write_report
from bot.cli.eval.run import RunResult, check_models, plan_jobs, run_jobs
from bot.cli.terminal import make_console
from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.models.oracle import AnswerBook
from bot.models.router import ModelRouter


def run_eval(
    case_paths: Sequence[Path],
    config_args: Sequence[str],
    *,
    out: Path,
    budget_usd: float | None,
    concurrency: int,
    settings: Settings,
) -> int:
    if not config_args:
        raise ConfigError(
            "name at least one configuration, e.g. --config one=single:openai/gpt-4.1-mini"
        )
    cases = load_cases(case_paths)
    configs = check_unique([c for arg in config_args for c in parse_config(arg)])
    console = make_console(stderr=True)
    result = asyncio.run(_run(cases, configs, out, budget_usd, concurrency, settings, console))
    notes = _notes(configs, result)
    md, _, png = write_report(out, configs, result.results, n_cases=len(cases), notes=notes)
    console.print(
        f"report: {md} ({len(cases)} case(s) × {len(configs)} configuration(s); "
        f"{result.reused} from the cache; spent ${result.spent_usd:.4f} now)"
    )
    if png is None:
        console.print("no picture: install the eval extra (pip install 'debate-bot[eval]')")
    if result.unfinished:
        why = "the budget was reached" if result.stopped_by_budget else "they did not finish"
        console.print(
            f"{result.unfinished} case run(s) left out: {why}; "
            "run the same command again to continue (finished cases are not paid again)"
        )
    return 0


async def _run(
    cases: Sequence[Loaded],
    configs: Sequence[EvalConfig],
    out: Path,
    budget_usd: float | None,
    concurrency: int,
    settings: Settings,
    console: Console,
) -> RunResult:
    book = AnswerBook()  # filled by plan_jobs; the oracle reads it through the router
    async with ModelRouter(settings, answer_book=book) as router:
        check_models(configs, router)
        jobs = plan_jobs(cases, configs, settings=settings, router=router, book=book)
        with Cache(out / "cache.sqlite") as cache:
            return await run_jobs(
                jobs,
                router=router,
                cache=cache,
                concurrency=concurrency,
                budget_usd=budget_usd,
                console=console,
            )


def _notes(configs: Sequence[EvalConfig], result: RunResult) -> list[str]:
    notes = []
    asked = [c.name for c in configs if c.tools is not None]
    if asked and not tools_supported():
        notes.append(
            "Tools were not available in this version: "
            + ", ".join(asked)
            + " asked for tools=on|off and debated from the embedded context only."
        )
    if result.stopped_by_budget:
        notes.append(
            f"Stopped at the budget (${result.spent_usd:.4f} spent by this run): "
            f"{result.unfinished} case run(s) are not in this report."
        )
    elif result.unfinished:
        notes.append(f"{result.unfinished} case run(s) did not finish and are not in this report.")
    if result.reused:
        notes.append(f"{result.reused} result(s) came from the cache of an earlier run.")
    return notes
