"""Critical path: does a run take only as long as its sequential model calls?

A 3-round, 2-persona critique of a plan of a few hundred words runs through the
real engine (``next_step``) and the real router (``ModelRouter``) against the
loopback fake model server, which answers every request after a fixed delay L.
The run's wall time is divided by (sequential stages × L), where the sequential
stages are the batches the engine issued, counted as the run goes: everything
that is not waiting on a model is overhead. Target (issue 2): ≤ 1.10 for the
``parallel`` turn order; ``alternating`` is printed beside it (more stages, same
per-stage overhead).

Personas are given explicitly (no persona auto-pick); issue extraction runs as
the engine does it. Beside it, the same runs through a bare ``asyncio.gather``
loop, interleaved with the measured ones: the run layer's own cost as a ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass

from benchmarks._support_models import (
    MODEL,
    PERSONAS,
    Driven,
    drive,
    model_server_process,
    plan_text,
    router_settings,
    verdict,
    word_count,
)
from benchmarks.common import print_table
from bot.engine.protocol import next_step
from bot.engine.types import DebateSpec, Outcome, Turn, TurnOrder
from bot.models.router import ModelRouter

TARGET = 1.10
ROUNDS = 3
PLAN_WORDS = 300


@dataclass
class Measured:
    order: TurnOrder
    latency_s: float
    runs: list[Driven]
    bare_s: list[float]  # the same spec through a bare gather loop, interleaved

    @property
    def stages(self) -> int:
        counts = {len(r.stages) for r in self.runs}
        if len(counts) != 1:
            raise RuntimeError(f"the engine issued a varying number of stages: {counts}")
        return counts.pop()

    @property
    def wall_s(self) -> float:
        return statistics.median(r.elapsed_s for r in self.runs)

    @property
    def ratio(self) -> float:
        return self.wall_s / (self.stages * self.latency_s)

    def shape(self) -> str:
        """The stages as the engine issued them, e.g. ``frame×1 opening×2 …``."""
        run = self.runs[0]
        return " → ".join(
            f"{s.requests[0].key.phase}" + (f"×{len(s.requests)}" if len(s.requests) > 1 else "")
            for s in run.stages
        )


def spec_for(order: TurnOrder) -> DebateSpec:
    plan = plan_text(PLAN_WORDS, seed="critical-path")
    return DebateSpec(
        mode="critique",
        title="Plan: move the billing service to the new event pipeline",
        subject=plan,
        personas=PERSONAS,
        judge=MODEL,
        rounds=ROUNDS,
        turn_order=order,
        seed="bench-critical-path",
    )


async def bare_loop(spec: DebateSpec, router: ModelRouter) -> float:
    """The reference the run layer is held to: ``next_step`` and one
    ``asyncio.gather`` per batch, with no hooks, guard or side work."""
    turns: list[Turn] = []
    started = time.perf_counter()
    while not isinstance(step := next_step(spec, turns), Outcome):
        turns.extend(await asyncio.gather(*(router.complete(r) for r in step.requests)))
    return time.perf_counter() - started


async def measure(base_url: str, latency_s: float, order: TurnOrder, repeats: int) -> Measured:
    spec = spec_for(order)
    runs, bare = [], []
    async with ModelRouter(router_settings(base_url)) as router:
        await drive(spec, router)  # warm-up: connections opened, code paths loaded
        await bare_loop(spec, router)
        for _ in range(repeats):  # interleaved, so load on the machine hits both alike
            runs.append(await drive(spec, router))
            bare.append(await bare_loop(spec, router))
    return Measured(order, latency_s, runs, bare)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks critical_path")
    parser.add_argument("--quick", action="store_true", help="L = 0.1 s and one measured run")
    parser.add_argument("--latency", type=float, default=None, help="model delay L in seconds")
    parser.add_argument("--repeats", type=int, default=None, help="measured runs per order")
    args = parser.parse_args(argv)
    latency = args.latency if args.latency is not None else (0.1 if args.quick else 0.2)
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 5)

    # The rehearsal script as the responder: it converges in round 3, so the
    # counter round runs and the run has its full shape.
    with model_server_process(latency_s=latency) as base_url:

        async def both() -> list[Measured]:
            orders: tuple[TurnOrder, ...] = ("parallel", "alternating")
            return [await measure(base_url, latency, order, repeats) for order in orders]

        results = asyncio.run(both())

    print(
        f"{ROUNDS}-round critique, 2 personas, plan of "
        f"{word_count(plan_text(PLAN_WORDS, seed='critical-path'))} words; model delay "
        f"L = {latency * 1000:.0f} ms (fake server in its own process); "
        f"median of {repeats} run(s) after a warm-up run"
    )
    rows = []
    for m in results:
        ideal = m.stages * m.latency_s
        rows.append(
            [
                m.order,
                str(m.stages),
                f"{ideal:.2f}",
                f"{m.wall_s:.3f}",
                f"{(m.wall_s - ideal) / m.stages * 1000:.1f}",
                f"{m.ratio:.3f}",
            ]
        )
    print_table(
        "Critical path: wall time / (sequential stages × L)",
        ["turn order", "stages", "stages × L (s)", "wall (s)", "overhead/stage (ms)", "ratio"],
        rows,
    )
    for m in results:
        print(f"  {m.order}: {m.shape()}")
    parallel = results[0]
    print(
        f"{verdict(parallel.ratio <= TARGET)}  parallel ratio {parallel.ratio:.3f} ≤ {TARGET:.2f}"
    )
    print(
        f"info  alternating ratio {results[1].ratio:.3f} over {results[1].stages} stages "
        f"(parallel: {parallel.stages})"
    )
    for m in results:
        bare = statistics.median(m.bare_s)
        print(
            f"info  {m.order}: the run layer (bot.run.execute) vs a bare gather loop, "
            f"interleaved: {m.wall_s:.3f} s vs {bare:.3f} s = {m.wall_s / bare:.3f}"
        )
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
