"""The eval run: every case under every configuration, at most ``concurrency``
at a time, with a progress bar, the result cache and a spending cap.

Everything that can be refused is refused before the first model call: the
specs of every (case, configuration) are built up front (unknown providers,
personas that do not fit), and models whose provider has no credentials are
named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from bot.cli.eval.answer import Job, Spend, answer
from bot.cli.eval.cache import Cache, Result, job_key
from bot.cli.eval.cases import Loaded
from bot.cli.eval.configs import EvalConfig
from bot.cli.eval.debate import Stopped
from bot.cli.eval.material import case_spec, labelled
from bot.core.errors import ConfigError, ModelError
from bot.core.settings import Settings
from bot.engine.prompts import shared_prefix
from bot.models.oracle import PREFIX as ORACLE_PREFIX
from bot.models.oracle import AnswerBook, probability
from bot.models.router import ModelRouter


@dataclass
class RunResult:
    results: list[Result]  # in (configuration, case) order, finished jobs only
    unfinished: int = 0  # jobs not run or left half-way (the budget)
    reused: int = 0  # jobs answered from the cache
    spent_usd: float = 0.0  # by this invocation
    stopped_by_budget: bool = False
    notes: list[str] = field(default_factory=list)


def check_models(configs: Sequence[EvalConfig], router: ModelRouter) -> None:
    """Every model reference resolves and its provider can be reached."""
    for config in configs:
        try:
            available = router.available_providers() | router.seatable(config.all_models())
        except ConfigError as exc:  # an agent seat that cannot run here
            raise ConfigError(f"configuration {config.name!r}: {exc}") from exc
        for ref in config.all_models():
            try:
                provider, model = router.resolve(ref)
                if provider == "scripted" and model.startswith(ORACLE_PREFIX):
                    probability(model)
            except (ConfigError, ModelError) as exc:
                raise ConfigError(f"configuration {config.name!r}: {exc}") from exc
            if provider not in available:
                raise ConfigError(
                    f"configuration {config.name!r}: {ref} needs credentials for {provider!r} "
                    "(e.g. OPENAI_API_KEY or ANTHROPIC_API_KEY, or an endpoint in the settings)"
                )


def plan_jobs(
    cases: Sequence[Loaded],
    configs: Sequence[EvalConfig],
    *,
    settings: Settings,
    router: ModelRouter,
    book: AnswerBook,
) -> list[Job]:
    jobs = []
    available = router.available_providers()
    for config in configs:
        for loaded in cases:
            try:
                spec = case_spec(loaded, config, settings=settings, available=available)
            except ConfigError as exc:
                raise ConfigError(
                    f"case {loaded.id!r}, configuration {config.name!r}: {exc}"
                ) from exc
            book.add(shared_prefix(spec), labelled(loaded))
            key = job_key(loaded.fingerprint(), config.canonical())
            jobs.append(Job(loaded, config, spec, key))
    return jobs


async def run_jobs(
    jobs: Sequence[Job],
    *,
    router: ModelRouter,
    cache: Cache,
    concurrency: int,
    budget_usd: float | None,
    console: Console,
) -> RunResult:
    spend = Spend(budget_usd)
    done: dict[str, Result] = {}
    out = RunResult([])
    todo = []
    for job in jobs:
        cached = cache.result(job.key)
        if cached is not None:
            done[job.key] = cached
            out.reused += 1
        else:
            todo.append(job)
    limiter = anyio.CapacityLimiter(max(1, concurrency))
    progress = Progress(
        TextColumn("[bold]eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[spent]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
    )

    async def one(job: Job, task: TaskID) -> None:
        async with limiter:
            if not spend.proceed():
                return
            try:
                result = await answer(job, router, cache, spend)
            except Stopped:
                return
            cache.save_result(job.key, result)
            done[job.key] = result
            progress.update(task, advance=1, spent=f"${spend.spent_usd:.4f}")

    with progress:
        task = progress.add_task("eval", total=len(jobs), completed=out.reused, spent="$0")
        async with anyio.create_task_group() as tg:
            for job in todo:
                tg.start_soon(one, job, task)
    out.results = [done[j.key] for j in jobs if j.key in done]
    out.unfinished = len(jobs) - len(out.results)
    out.spent_usd = spend.spent_usd
    out.stopped_by_budget = spend.stopped
    return out
