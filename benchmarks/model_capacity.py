"""Model capacity under a provider's limit, and fair shares (issue 22).

Debates (3 rounds, 2 auto-picked personas on two vendors, never converging) on
one real `debate-bot serve` process with SQLite and DEFAULT model settings,
against the loopback fake GitHub and the fake model server (both in this
process) answering after a delay L (``--latency``). The fake server enforces a
provider's limit per API (requests and tokens a minute, token buckets holding
``BURST_S`` seconds of it, 429 with ``retry-after`` beyond it, the rate-limit
headers in every answer). The limit is sized from a calibration debate so that
the batch's work takes about ``--target`` seconds at the limit.

Two parts (``--part``):

- ``limit``: N debates at once on N installations. Figures: makespan against
  the limit's lower bound — per API, (tokens charged − the bucket's burst) ÷
  the per-minute rate, the same for requests, the largest of them (shown beside
  the issue's plain total ÷ tokens a minute) — target ≤ 1.15; the share of
  calls answered 429, target ≤ 2 %; the bot's CPU per debate.
- ``fairness``: installation A starts ``--a-debates`` debates at once, B one
  debate a second later. Figures: B's wall ÷ B's wall alone (measured just
  before, same limit), target ≤ 1.5; A's p95 finish time ÷ A's fair-share
  bound, target ≤ 1.2. The bound is the larger of the limit's lower bound for
  all the work done meanwhile (A's and B's) and GitHub's pacing of A's
  content-creating writes (one installation: a write every second and a
  little, ``bot/github/pacing.py``), which no model capacity can beat.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchmarks._support_models import model_server, persona_responder, verdict
from benchmarks.common import print_table, process_cpu_seconds
from benchmarks.concurrent_runs import (
    ROUNDS,
    TITLE,
    add_installation,
    command_body,
    content_writes,
    finished,
    post_all,
    sqlite_states,
)
from bot.github.pacing import spacing
from testkit.fakes.github_server import FakeGitHub
from testkit.fakes.model_server import FakeModelServer, RateLimit
from testkit.harness.service import APP_ID, Harness, rsa_keypair

BURST_S = 5.0  # the fake provider's buckets hold five seconds of its limit
TARGET_BOUND_RATIO = 1.15
TARGET_429_SHARE = 0.02
TARGET_B_RATIO = 1.5
TARGET_A_RATIO = 1.2
A_INSTALLATION, A_REPO = 5000, "orga/repo"
B_INSTALLATION, B_REPO = 6000, "orgb/repo"
GENEROUS = RateLimit(requests_per_minute=1e6, tokens_per_minute=1e9, burst_s=60.0)


@dataclass
class Counts:
    """What the fake provider counted, per API."""

    admitted: dict[str, int]
    refused: dict[str, int]
    tokens: dict[str, int]

    @classmethod
    def of(cls, server: FakeModelServer) -> Counts:
        limiters = server.limiters.items()
        return cls(
            {api: lim.admitted for api, lim in limiters},
            {api: lim.refused for api, lim in limiters},
            {api: lim.tokens_charged for api, lim in limiters},
        )

    def minus(self, other: Counts) -> Counts:
        return Counts(
            {k: v - other.admitted[k] for k, v in self.admitted.items()},
            {k: v - other.refused[k] for k, v in self.refused.items()},
            {k: v - other.tokens[k] for k, v in self.tokens.items()},
        )

    @property
    def calls(self) -> int:
        return sum(self.admitted.values())

    @property
    def refusals(self) -> int:
        return sum(self.refused.values())


def lower_bound(work: Counts, limit: RateLimit) -> tuple[float, float]:
    """(the limit's lower bound with the buckets' burst, the plain total ÷ rate)."""
    bound = plain = 0.0
    for api in work.admitted:
        for amount, per_minute in (
            (work.tokens[api], limit.tokens_per_minute),
            (work.admitted[api], limit.requests_per_minute),
        ):
            if not per_minute:
                continue
            rate = per_minute / 60.0
            bound = max(bound, max(0.0, amount - rate * limit.burst_s) / rate)
            plain = max(plain, amount / rate)
    return bound, plain


def set_limit(server: FakeModelServer, limit: RateLimit) -> None:
    for limiter in server.limiters.values():
        limiter.set_limit(limit)


@dataclass
class Bot:
    """One `serve` process and the fakes around it."""

    h: Harness
    github: FakeGitHub
    server: FakeModelServer
    pid: int

    @property
    def db(self) -> Path:
        return self.h.tmp / "bot.db"

    def cpu_s(self) -> float:
        return process_cpu_seconds(self.pid) or 0.0

    def run_all(self, bodies: list[bytes], timeout_s: float, what: str) -> float:
        before = finished(sqlite_states(self.db))
        t0 = time.perf_counter()
        asyncio.run(post_all(self.h.service.url if self.h.service else "", bodies))
        self.h.wait_for(
            lambda: finished(sqlite_states(self.db)) >= before + len(bodies),
            timeout=timeout_s,
            what=what,
        )
        return time.perf_counter() - t0


@contextmanager
def serve(tmp: Path, server: FakeModelServer) -> Iterator[Bot]:
    private, public = rsa_keypair()
    with FakeGitHub(app_id=APP_ID, public_key_pem=public) as github:
        h = Harness(tmp, github, server, private)
        # Default settings: only what the harness sets for tests is put back.
        for name in (
            "DEBATE_BOT_MODEL_MAX_RETRY_WAIT_S",
            "DEBATE_BOT_GITHUB_WRITE_INTERVAL_S",
            "DEBATE_BOT_GITHUB_MAX_RETRY_WAIT_S",
            "DEBATE_BOT_WORKER_POLL_S",
            "DEBATE_BOT_LEASE_S",
        ):
            h.env.pop(name, None)
        try:
            svc = h.start()
            assert svc.proc is not None
            yield Bot(h, github, server, svc.proc.pid)
        finally:
            h.stop()


def debates(bot: Bot, first: int, count: int) -> list[bytes]:
    """``count`` debates, each on its own installation (``1000 + i``)."""
    bodies = []
    for i in range(first, first + count):
        repo, number, installation = add_installation(bot.github, i)
        bodies.append(command_body(bot.github, repo, number, installation))
    return bodies


def calibrate(server: FakeModelServer, latency: float) -> tuple[Counts, float]:
    """One debate with no binding limit: its work, and its wall."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-capacity-cal-") as tmp,
        serve(Path(tmp), server) as bot,
    ):
        bot.run_all(debates(bot, 0, 1), 120, "warm-up")
        before = Counts.of(server)
        wall = bot.run_all(debates(bot, 1, 1), 120, "calibration")
        return Counts.of(server).minus(before), wall


def sized_limit(one: Counts, debates_n: int, target_s: float) -> RateLimit:
    """A limit under which ``debates_n`` debates' work takes about ``target_s``."""
    busiest = max(one.tokens, key=lambda api: one.tokens[api])
    tokens_per_minute = debates_n * one.tokens[busiest] * 60.0 / target_s
    # Requests: a limit too, but not the binding one.
    requests_per_minute = 2 * debates_n * one.admitted[busiest] * 60.0 / target_s
    return RateLimit(
        requests_per_minute=math.ceil(requests_per_minute),
        tokens_per_minute=math.ceil(tokens_per_minute),
        burst_s=BURST_S,
    )


# -- part 1: N debates under a limit ------------------------------------------------


def limit_part(n: int, latency: float, target_s: float, timeout_s: float) -> int:
    responder = persona_responder(never_converge=True)
    with model_server(responder=responder, latency_s=latency, rate_limit=GENEROUS) as server:
        one, wall1 = calibrate(server, latency)
        limit = sized_limit(one, n, target_s)
        set_limit(server, limit)
        with (
            tempfile.TemporaryDirectory(prefix="bench-capacity-limit-") as tmp,
            serve(Path(tmp), server) as bot,
        ):
            bot.run_all(debates(bot, 0, 1), 120, "warm-up under the limit")
            time.sleep(BURST_S)  # the buckets full again
            before, cpu0 = Counts.of(server), bot.cpu_s()
            makespan = bot.run_all(debates(bot, 1, n), timeout_s, f"{n} debates under the limit")
            cpu = bot.cpu_s() - cpu0
            work = Counts.of(server).minus(before)
            states = sqlite_states(bot.db)
    bound, plain = lower_bound(work, limit)
    share = work.refusals / max(1, work.calls + work.refusals)
    print(
        f"{n} {ROUNDS}-round debates at once on {n} installations, model delay "
        f"L = {latency * 1000:.0f} ms; one `serve` with SQLite and default settings; "
        f"the fake provider limits each API to {limit.requests_per_minute:,.0f} requests "
        f"and {limit.tokens_per_minute:,.0f} tokens a minute ({BURST_S:.0f} s of burst), "
        f"sized for ≈ {target_s:.0f} s of work; one debate alone, unlimited: {wall1:.1f} s"
    )
    print_table(
        "Under a provider limit: makespan ÷ the limit's lower bound, 429s",
        [
            "N",
            "makespan (s)",
            "lower bound (s)",
            "÷ bound",
            "total ÷ TPM (s)",
            "÷ that",
            "calls",
            "429s",
            "429 share",
            "CPU/debate (ms)",
            "runs",
        ],
        [
            [
                str(n),
                f"{makespan:.1f}",
                f"{bound:.1f}",
                f"{makespan / bound:.2f}" if bound else "–",
                f"{plain:.1f}",
                f"{makespan / plain:.2f}" if plain else "–",
                str(work.calls),
                str(work.refusals),
                f"{share:.1%}",
                f"{cpu * 1000 / n:.0f}",
                ", ".join(f"{k} {v}" for k, v in sorted(states.items()) if v),
            ]
        ],
    )
    done = states.get("done", 0) == n + 1
    ratio = makespan / bound if bound else math.inf
    print(f"{verdict(done)}  all {n} debates done")
    print(f"{verdict(ratio <= TARGET_BOUND_RATIO)}  makespan ÷ lower bound {ratio:.2f} ≤ 1.15")
    print(f"{verdict(share <= TARGET_429_SHARE)}  {share:.1%} of calls answered 429 ≤ 2 %")
    return 0


# -- part 2: fair shares -------------------------------------------------------------


def finish_times(db: Path) -> dict[int, list[float]]:
    """Each installation's runs' finish times (epoch seconds), done runs only."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "select installation_id, updated_at from runs where state = 'done'"
        ).fetchall()
    out: dict[int, list[float]] = {}
    for installation, updated in rows:
        at = datetime.fromisoformat(str(updated)).replace(tzinfo=UTC).timestamp()
        out.setdefault(int(installation), []).append(at)
    return out


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def fairness_part(a_n: int, latency: float, target_s: float, timeout_s: float) -> int:
    responder = persona_responder(never_converge=True)
    with model_server(responder=responder, latency_s=latency, rate_limit=GENEROUS) as server:
        one, _ = calibrate(server, latency)
        limit = sized_limit(one, a_n + 1, target_s)
        set_limit(server, limit)
        with (
            tempfile.TemporaryDirectory(prefix="bench-capacity-fair-") as tmp,
            serve(Path(tmp), server) as bot,
        ):
            github = bot.github
            github.add_repo(A_REPO, installation_id=A_INSTALLATION)
            github.add_repo(B_REPO, installation_id=B_INSTALLATION)
            github.set_permission(B_REPO, "Codertocat", "admin")

            def b_debate(k: int) -> bytes:
                number = github.add_issue(B_REPO, title=f"{TITLE} (B{k})", body="For partners.")
                return command_body(github, B_REPO, number, B_INSTALLATION)

            a_bodies = []
            for i in range(a_n):
                user = f"dev{i + 1}"  # the default quota: 10 a day per user and repository
                github.set_permission(A_REPO, user, "admin")
                number = github.add_issue(A_REPO, title=f"{TITLE} ({i + 1})", body="For partners.")
                a_bodies.append(command_body(github, A_REPO, number, A_INSTALLATION, user))
            bot.run_all(debates(bot, 0, 1), 120, "warm-up under the limit")
            b_alone = bot.run_all([b_debate(0)], 120, "B alone")
            time.sleep(BURST_S)
            before, cpu0 = Counts.of(server), bot.cpu_s()
            writes0 = len(content_writes(github, A_INSTALLATION))
            url = bot.h.service.url if bot.h.service else ""
            b_body = b_debate(1)

            async def burst() -> float:
                a = asyncio.create_task(post_all(url, a_bodies))
                await asyncio.sleep(1.0)
                posted = time.time()
                await post_all(url, [b_body])
                await a
                return posted

            t0 = time.time()
            b_posted = asyncio.run(burst())
            bot.h.wait_for(
                lambda: (
                    len(finish_times(bot.db).get(A_INSTALLATION, [])) >= a_n
                    and len(finish_times(bot.db).get(B_INSTALLATION, [])) >= 2
                ),
                timeout=timeout_s,
                what="A's debates and B's",
            )
            cpu = bot.cpu_s() - cpu0
            work = Counts.of(server).minus(before)
            times = finish_times(bot.db)
            a_writes = len(content_writes(github, A_INSTALLATION)) - writes0
    a_done = [t - t0 for t in times[A_INSTALLATION]]
    b_wall = max(times[B_INSTALLATION]) - b_posted
    model_bound, _ = lower_bound(work, limit)
    github_bound = max(0, a_writes - 1) * spacing(1.0)
    bound = max(model_bound, github_bound)
    a95 = p95(a_done)
    print(
        f"\nFair shares: installation A starts {a_n} {ROUNDS}-round debates at once, B one a "
        f"second later; L = {latency * 1000:.0f} ms; one `serve`, default settings; the fake "
        f"provider limits each API to {limit.requests_per_minute:,.0f} requests and "
        f"{limit.tokens_per_minute:,.0f} tokens a minute ({BURST_S:.0f} s of burst). A's "
        f"fair-share bound: the larger of the limit's lower bound for all the work "
        f"({model_bound:.1f} s) and GitHub's pacing of A's {a_writes} writes "
        f"({github_bound:.1f} s)"
    )
    print_table(
        "Fair shares: one installation's burst beside another's single debate",
        [
            "B alone (s)",
            "B beside A (s)",
            "÷ alone",
            "A p50 (s)",
            "A p95 (s)",
            "A bound (s)",
            "A p95 ÷ bound",
            "429s / calls",
            "CPU/debate (ms)",
        ],
        [
            [
                f"{b_alone:.1f}",
                f"{b_wall:.1f}",
                f"{b_wall / b_alone:.2f}",
                f"{sorted(a_done)[len(a_done) // 2]:.1f}",
                f"{a95:.1f}",
                f"{bound:.1f}",
                f"{a95 / bound:.2f}" if bound else "–",
                f"{work.refusals} / {work.calls}",
                f"{cpu * 1000 / (a_n + 1):.0f}",
            ]
        ],
    )
    print(f"{verdict(b_wall / b_alone <= TARGET_B_RATIO)}  B's wall ÷ alone ≤ 1.5")
    ok = bound > 0 and a95 / bound <= TARGET_A_RATIO
    print(f"{verdict(ok)}  A's p95 ÷ fair-share bound ≤ 1.2")
    return 0


# -- entry -------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks model_capacity")
    parser.add_argument("--quick", action="store_true", help="N = 8; A starts 10")
    parser.add_argument("--latency", type=float, default=1.0, help="model delay L in seconds")
    parser.add_argument("--n", type=int, default=None, help="debates under the limit (24)")
    parser.add_argument("--a-debates", type=int, default=None, help="A's debates (50)")
    parser.add_argument(
        "--target", type=float, default=None, help="seconds of work the limit allows (60)"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait a part")
    parser.add_argument("--part", choices=("limit", "fairness", "all"), default="all")
    args = parser.parse_args(argv)
    n = args.n or (8 if args.quick else 24)
    a_n = args.a_debates or (10 if args.quick else 50)
    target = args.target or (30.0 if args.quick else 60.0)
    status = 0
    if args.part in ("limit", "all"):
        status = max(status, limit_part(n, args.latency, target, args.timeout))
    if args.part in ("fairness", "all"):
        status = max(status, fairness_part(a_n, args.latency, target, args.timeout))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
