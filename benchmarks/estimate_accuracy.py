"""Estimate accuracy: the figure a user sees beside what the run then costs.

The estimate is the one `/debate estimate`, admission and the dry run quote
(``bot.run.estimate.forecast``), with what it learns from the ledger
(``RunStore.usage_history`` → ``bot.run.habits.learn``) and, with tools, the
size of the checkout the debaters read (``supply_of`` of its snapshot). The runs
are real: ``bot.run.execute`` through the router (and, with tools, the tool loop
over the real repository tools on a checkout) against the loopback fake model
server, which reports usage as providers do, each turn and tool step stored in
a SQLite store as the worker stores them. Each configuration starts from an
empty store:

1. *before*: the estimate of a debate with no history, beside its real spend;
2. twenty debates of other subjects (sizes vary) fill the ledger;
3. *after*: the estimate of a new debate, beside its real spend.

The fake models write answers that use 25 %, 50 % or 90 % of their word limit
(generated prose, not the estimator's filler); with tools on, every persona and
synthesis turn lists the root, searches the code and reads two files (three
tool steps, as the tool loop runs them), in a small repository (three source
files, about 4 kB) or a large one (400 files, about 2.4 MB). The fake's
tokenizer counts a word or a punctuation mark a token, about 0.6 of the
estimator's four characters on this prose: the prior overcounts it, history
learns it (the scale). Runs are spaced apart: the fake's prefix cache is
cleared between debates, as a provider's expires.

Targets (issue 31): after history the expected figure within ±30 % of the real
spend; before it, never below the real spend by more than 30 %.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks._support_models import MODEL, PERSONAS, paragraph, plan_text, router_settings
from benchmarks.common import print_table
from bot.engine.rehearsal import reply
from bot.engine.types import DebateSpec, RepoRef, Turn
from bot.models.pricing import PriceBook
from bot.models.router import ModelRouter
from bot.repo.local import open_checkout
from bot.repo.snapshot import Snapshot
from bot.repo.tools import ToolCaps, run_tool
from bot.run.estimate import Forecast, forecast, plan_models, supply_of
from bot.run.execute import Collect, execute
from bot.run.habits import learn
from bot.run.tool_loop import ToolLoop
from bot.store import NewRun, RunStore
from testkit.fakes.tool_server import Call, Seen, ToolModelServer

FILLS = (0.25, 0.5, 0.9)
HISTORY = 20
TARGET = 0.30
INSTALLATION = 1
REPO = "octo/estimate"
_LIMIT = re.compile(r"Write at most (\d+) words")


# -- the repositories -----------------------------------------------------------------


def _module(rng: random.Random, name: str, functions: int) -> str:
    lines = [f'"""{name}: {paragraph(rng, 12)}"""', "", "import logging", ""]
    for i in range(functions):
        lines += [
            f"def handler_{i}(request, retries=3):",
            f'    """{paragraph(rng, 10)}"""',
            "    for attempt in range(retries):",
            f"        result = route_{i}(request, attempt)",
            "        if result is not None:",
            "            return result",
            f"    logging.warning('handler_{i} gave up after %d attempts', retries)",
            "    return None",
            "",
        ]
    return "\n".join(lines)


def repository(root: Path, size: str) -> Path:
    """A checkout: three small modules, or 400 modules in 20 packages."""
    rng = random.Random(size)
    if size == "small":
        names = ["src/app.py", "src/routes.py", "src/models.py"]
        functions = 3
    else:
        names = [f"pkg{p}/mod{m}.py" for p in range(20) for m in range(20)]
        functions = 16
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_module(rng, name, functions))
    return root


# -- the fake models --------------------------------------------------------------------


def answer(fill: float) -> Callable[[str], str]:
    """The rehearsal's reply written out to ``fill`` of its word limit with
    generated prose after its first two lines (before any stance block)."""

    def respond(prompt: str) -> str:
        text = reply(prompt)
        limit = _LIMIT.search(prompt)
        missing = int(int(limit[1]) * fill) - len(text.split()) if limit else 0
        if missing <= 0:
            return text
        rng = random.Random(prompt[-200:])
        prose = "\n\n".join(paragraph(rng, min(80, missing - i)) for i in range(0, missing, 80))
        head, _, rest = text.partition("\n")
        second, _, tail = rest.partition("\n")
        return f"{head}\n{second}\n\n{prose}\n\n{tail}"

    return respond


def script(fill: float, files: list[str]) -> Callable[[Seen], str | list[Call]]:
    """With tools: list the root, search the code, read two files (the turn's
    own pick), then answer."""
    respond = answer(fill)

    def step(seen: Seen) -> str | list[Call]:
        if not seen.may_call or seen.step >= 3:
            return respond(seen.text)
        if seen.step == 0:
            return [Call("list_files", {"path": ""})]
        if seen.step == 1:
            return [Call("search_code", {"pattern": "def handler_1\\("})]
        pick = random.Random(seen.text[-300:])
        return [Call("read_file", {"path": p}) for p in pick.sample(files, 2)]

    return step


# -- one configuration ----------------------------------------------------------------


def spec_for(run: int, words: int, tools: bool) -> DebateSpec:
    return DebateSpec(
        mode="debate",
        title=f"Estimate accuracy, run {run}",
        subject=plan_text(words, seed=f"estimate-{run}"),
        personas=PERSONAS,
        judge=MODEL,
        rounds=3,
        seed=f"estimate-{run}",
        tools=tools,
        repo_ref=RepoRef(REPO, "0" * 40) if tools else None,
    )


@dataclass(frozen=True)
class Measured:
    before: float  # estimate ÷ real, no history
    after: float  # estimate ÷ real, twenty runs of history
    high: float  # the high end ÷ real, after
    real: float  # the last run's real spend


class Bench:
    def __init__(self, fill: float, tools: bool, checkout: Path, db: Path) -> None:
        self.fill, self.tools, self.checkout = fill, tools, checkout
        self.snapshot: Snapshot = open_checkout(checkout)
        self.files = sorted(p for p, _, kind in self.snapshot.listing() if kind == "file")
        self.store = RunStore.from_url(f"sqlite:///{db}")
        self.store.migrate()
        self.prices = PriceBook()  # the router's, with no price file

    def estimate(self, spec: DebateSpec) -> Forecast:
        history = self.store.usage_history(
            installation_id=INSTALLATION, repo=REPO, mode=spec.mode, models=plan_models(spec)
        )
        supply = supply_of(self.snapshot) if spec.tools else None
        return forecast(spec, self.prices, learn(history, plan_models(spec)), supply_bytes=supply)

    async def run(self, server: ToolModelServer, router: ModelRouter, spec: DebateSpec) -> float:
        """One debate, stored as the worker stores it; its real spend."""
        server.reset()  # runs spaced apart: the provider's prefix cache has expired
        row = self.store.create_run(
            NewRun(
                repo=REPO,
                issue_number=int(spec.seed.rsplit("-", 1)[-1]),
                spec=spec,
                installation_id=INSTALLATION,
            )
        )
        store = self.store

        class Kept(Collect):
            async def on_turn(self, turn: Turn) -> None:
                if turn.status != "ok":
                    raise RuntimeError(f"{turn.key.id()} dropped ({turn.drop_class})")
                store.save_turn(row.id, turn)
                await super().on_turn(turn)

        hooks = Kept()
        models = ToolLoop(
            routes=router,
            plain=router.complete,
            reader=self.snapshot,
            run_tool=run_tool,
            caps=ToolCaps(),
            run_id=row.id,
            steps=self.store,
        )
        await execute(spec, (), models=models, hooks=hooks)
        return sum(t.usage.cost_usd for t in hooks.turns)


async def measure(fill: float, tools: bool, size: str, history: int, tmp: Path) -> Measured:
    checkout = repository(tmp / f"{size}-{fill}-{tools}", size)
    bench = Bench(fill, tools, checkout, tmp / f"{size}-{fill}-{tools}.db")
    sizes = random.Random(f"{fill}{tools}{size}")
    with ToolModelServer(
        script=script(fill, bench.files), latency_s=0.0, openai_api_key="sk-bench-loopback"
    ) as server:
        async with ModelRouter(router_settings(server.openai_base_url)) as router:
            first = spec_for(1, sizes.randint(300, 1200), tools)
            before = bench.estimate(first)
            real_first = await bench.run(server, router, first)
            for n in range(2, history + 1):
                await bench.run(server, router, spec_for(n, sizes.randint(300, 1200), tools))
            last = spec_for(history + 1, sizes.randint(300, 1200), tools)
            after = bench.estimate(last)
            real_last = await bench.run(server, router, last)
    bench.store.dispose()
    return Measured(
        before.usd / real_first, after.usd / real_last, after.high_usd / real_last, real_last
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks estimate_accuracy")
    parser.add_argument("--quick", action="store_true", help="the large repository only")
    parser.add_argument("--history", type=int, default=HISTORY, help="runs before the last")
    args = parser.parse_args(argv)
    sizes = ("large",) if args.quick else ("small", "large")
    rows: list[list[str]] = []
    hits = total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            for tools in (False, True):
                if not tools and size == "large":
                    continue  # without tools the repository plays no part
                for fill in FILLS:
                    m = asyncio.run(measure(fill, tools, size, args.history, Path(tmp)))
                    ok_before = m.before >= 1 - TARGET
                    ok_after = abs(m.after - 1) <= TARGET
                    hits += ok_before + ok_after
                    total += 2
                    rows.append(
                        [
                            f"{'tools, ' + size + ' repository' if tools else 'no tools'}",
                            f"{fill:.0%}",
                            f"${m.real:.4f}",
                            f"{m.before:.2f}" + ("" if ok_before else " ✗"),
                            f"{m.after:.2f}" + ("" if ok_after else " ✗"),
                            f"{m.high:.2f}",
                        ]
                    )
    print_table(
        f"Estimate ÷ real spend ({MODEL} on the fake server, 3-round debates, "
        f"before and after {args.history} runs of history)",
        [
            "runs",
            "answers use",
            "real spend",
            "before history (≥ 0.70)",
            f"after {args.history} runs (0.70-1.30)",
            "high end after",
        ],
        rows,
    )
    print(f"{hits} of {total} figures on target.")
    return 0 if hits == total else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
