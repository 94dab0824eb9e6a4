"""Concurrent runs: do the bot's processes carry N debates as fast as one?

N debates at once (3 rounds, 2 personas, never converging, so every round runs),
against the loopback fake GitHub (in this process, enforcing GitHub's
content-creation limits) and the fake model server (in its own process)
answering every call after a delay L (``--latency``). Three parts
(``--topology``):

- ``serve``: each debate on its own installation and repository, on one real
  `debate-bot serve` process with SQLite; N = 1, 10, 50, 200 (``--sizes``),
  each on a fresh process and database.
- ``pg``: the same debates on one `web` and two `worker` processes sharing a
  fresh PostgreSQL database (DEBATE_BOT_TEST_PG_URL); N = 1 and 200 (``--pg-n``).
- ``one-installation``: 20 debates at once in ONE installation (20 issues of one
  repository) on web + two workers with PostgreSQL and the default pacing: the
  workers share the installation's write pacing through the database, so the
  fake GitHub must never refuse a write (skipped with ``--quick``).

Figures of the first two parts:

- makespan(N): from the first delivery posted to the last run done, divided by
  wall(1), the same for N = 1 on the same topology. Target (issue 9): ≤ 1.5.
- peak RSS growth: the run-carrying processes' peak RSS (VmHWM) once all N are
  done, minus their RSS after warm-up runs (code paths loaded, connections
  open), per run, summed over both workers with PostgreSQL. Target: ≤ 1 MB per
  active run (judged for N ≥ 10, where it is not noise).

Figures of the third, from the fake's record of the installation's content-creating
requests (by arrival): refusals (target 0), the most in any 60 s (≤ 80) and
3,600 s (≤ 500), and the smallest gap between two consecutive ones (≥ 1 s); and the
bot's CPU per debate (web and both workers, from start, code paths loaded cold). Each
debate has its own requester: the default quota lets a user start 10 a day in a
repository.

Every setting is the service's default (issue 22): a worker drives up to
`worker_concurrency` (256) runs at once, and model calls go through the
adaptive window per provider (it starts at `provider_initial_concurrency` and
grows while calls succeed), no cap raised for the benchmark. CPU per debate:
the run-carrying processes' CPU over the batch ÷ N (intake, driving, posting,
the store).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import httpx
import pytest

from benchmarks._support_models import model_server_process, verdict
from benchmarks.common import (
    BOT_PROCESSES,
    add_slower_option,
    print_table,
    process_cpu_seconds,
    slowed,
    slowed_text,
)
from bot.core.transport import AiohttpTransport
from bot.github.webhooks import sign
from bot.store import RunStore
from testkit.fakes.github_server import CONTENT_LIMITS, CONTENT_METHODS, FakeGitHub, RecordedRequest
from testkit.fakes.model_server import FakeModelServer
from testkit.harness.postgres import fresh_pg_database
from testkit.harness.service import APP_ID, SECRET, Harness, Service, delivery, rsa_keypair

ROUNDS = 3
TARGET_RATIO = 1.5
TARGET_MB_PER_RUN = 1.0
USER = "Codertocat"
TITLE = "Should we use gRPC or REST for the public API?"
ONE_INSTALLATION = 77
ONE_REPO = "org/one"
ONE_DEBATES = 20
TARGET_MIN_GAP_S = 1.0
FINISHED = ("done", "failed", "aborted")
STALL_S = 300.0


@dataclass
class Measured:
    n: int
    makespan_s: float
    states: dict[str, int]
    warm_runs: int  # runs before the batch (done too when all went well)
    baseline_kb: int  # summed over the run-carrying processes
    peak_kb: int
    cpu_s: dict[str, float]  # CPU time per process over the batch
    runs_by: dict[str, int] = field(default_factory=dict)  # runs each worker drove

    @property
    def growth_mb_per_run(self) -> float:
        return (self.peak_kb - self.baseline_kb) / 1024 / self.n

    @property
    def cpu_ms_per_run(self) -> float:
        """CPU of the bot's processes (web and workers, or serve) per debate."""
        bot = sum(v for k, v in self.cpu_s.items() if k != "fake GitHub")
        return bot * 1000 / self.n

    @property
    def all_done(self) -> bool:
        return self.states.get("done", 0) == self.n + self.warm_runs


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def add_installation(github: FakeGitHub, i: int) -> tuple[str, int, int]:
    """Repository ``org{i}/repo`` on installation ``1000 + i``, with one open issue."""
    repo = f"org{i}/repo"
    github.add_repo(repo, installation_id=1000 + i)
    github.set_permission(repo, USER, "admin")
    number = github.add_issue(repo, title=TITLE, body="For partners.")
    return repo, number, 1000 + i


def command_body(
    github: FakeGitHub, repo: str, number: int, installation: int, user: str = USER
) -> bytes:
    text = f"/debate --rounds {ROUNDS}"
    comment_id = github.add_comment(repo, number, text, user=user)
    owner, name = repo.split("/", 1)
    payload = delivery(
        "issue_comment.created.with-installation",
        **{
            "comment.body": text,
            "comment.id": comment_id,
            "comment.user.login": user,
            "issue.number": number,
            "issue.title": github.issue(repo, number)["title"],
            "issue.body": github.issue(repo, number)["body"],
            "sender.login": user,
            "sender.type": "User",
            "installation.id": installation,
            "repository.full_name": repo,
            "repository.name": name,
            "repository.owner.login": owner,
        },
    )
    return json.dumps(payload).encode()


async def post_all(url: str, bodies: list[bytes]) -> None:
    """All deliveries at once, as a burst of webhooks would arrive. The client's
    CPU is this box's too (GitHub's senders are elsewhere): the requests are
    signed first, and sent over aiohttp's pool (``bot.core.transport``): httpx's own
    pool scans every connection for every queued request (for 200 at once, more
    CPU than the service spent receiving them)."""
    requests = [
        (
            body,
            {
                "X-GitHub-Event": "issue_comment",
                "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-Hub-Signature-256": sign(SECRET.encode(), body),
                "Content-Type": "application/json",
            },
        )
        for body in bodies
    ]
    transport = AiohttpTransport()
    async with httpx.AsyncClient(timeout=60, transport=transport) as client:

        async def one(body: bytes, headers: dict[str, str]) -> None:
            r = await client.post(url + "/api/github/webhooks", content=body, headers=headers)
            if r.status_code != 202:
                raise RuntimeError(f"delivery answered {r.status_code}: {r.text}")

        await asyncio.gather(*(one(b, h) for b, h in requests))


def sqlite_states(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("select state, count(*) from runs group by state"))


def finished(counts: dict[str, int]) -> int:
    return sum(counts.get(s, 0) for s in FINISHED)


# -- deployments -------------------------------------------------------------------


@dataclass
class Deployment:
    """The bot's processes for one measurement, and how to read their runs."""

    url: str  # where deliveries go
    pids: dict[str, int]  # every process of the bot, by name
    carriers: list[str]  # the processes that drive runs (their RSS is run state)
    states: Callable[[], dict[str, int]]
    logs: dict[str, Path]

    def runs_by(self) -> dict[str, int]:
        """Runs each carrier drove to the end (its ``run.released`` log lines)."""
        return {
            name: self.logs[name].read_text(errors="replace").count("run.released")
            for name in self.carriers
        }


def bench_env(h: Harness) -> None:
    """The service's defaults (issue 22: no setting raised for N): the harness's
    test-speed overrides go, the runs' concurrency and the intake's are the
    defaults (``worker_concurrency`` 256, ``intake_concurrency`` 64, ``intake_max_mb`` 64)."""
    for name in (
        "DEBATE_BOT_GITHUB_WRITE_INTERVAL_S",
        "DEBATE_BOT_GITHUB_MAX_RETRY_WAIT_S",
        "DEBATE_BOT_MODEL_MAX_RETRY_WAIT_S",
        "DEBATE_BOT_LEASE_S",
        "DEBATE_BOT_WORKER_POLL_S",
        "DEBATE_BOT_WORKER_CONCURRENCY",
        "DEBATE_BOT_INTAKE_CONCURRENCY",
    ):
        h.env.pop(name, None)
    h.env["DEBATE_BOT_LOG_LEVEL"] = "INFO"


@contextmanager
def serve_deployment(h: Harness) -> Iterator[Deployment]:
    db = h.tmp / "bot.db"
    try:
        svc = h.start()
        assert svc.proc is not None
        yield Deployment(
            svc.url,
            {"serve": svc.proc.pid},
            ["serve"],
            lambda: sqlite_states(db),
            {"serve": h.tmp / "service.log"},
        )
    finally:
        h.stop()


@contextmanager
def pg_deployment(h: Harness, pg_url: str, workers: int = 2) -> Iterator[Deployment]:
    """``migrate``, then one ``web`` and ``workers`` worker processes on ``pg_url``."""
    env = {**h.env, "DEBATE_BOT_DATABASE_URL": pg_url}
    migrate = subprocess.run(
        [sys.executable, "-m", "bot", "migrate"], env=env, capture_output=True, text=True
    )
    if migrate.returncode != 0:
        raise RuntimeError(f"migrate failed: {migrate.stderr[-2000:]}")
    services: dict[str, Service] = {}
    store = RunStore.from_url(pg_url)
    try:
        services["web"] = Service(env, h.tmp / "web.log").start("web")
        for i in range(workers):
            services[f"worker{i}"] = Service(env, h.tmp / f"worker{i}.log").start("worker")
        pids = {}
        for name, svc in services.items():
            assert svc.proc is not None
            pids[name] = svc.proc.pid
        yield Deployment(
            services["web"].url,
            pids,
            [name for name in services if name != "web"],
            store.counts_by_state,
            {name: svc.log_path for name, svc in services.items()},
        )
    finally:
        for svc in services.values():
            svc.stop()
        store.dispose()


@contextmanager
def bench_harness(
    tmp: Path, github: FakeGitHub, models_url: str, private: str
) -> Iterator[Harness]:
    # Harness only reads the model server's two base URLs; the server itself runs
    # in another process so its work does not share this one's GIL.
    root = models_url.removesuffix("/v1")
    urls = SimpleNamespace(openai_base_url=models_url, anthropic_base_url=root)
    yield Harness(tmp, github, cast(FakeModelServer, urls), private)


def wait_finished(
    h: Harness, dep: Deployment, target: int, timeout_s: float, what: str
) -> dict[str, int]:
    h.wait_for(lambda: finished(dep.states()) >= target, timeout=timeout_s, what=what)
    return dep.states()


# -- parts 1 and 2: makespan and RSS per run ---------------------------------------


def measure(
    topology: str,
    tmp: Path,
    models_url: str,
    n: int,
    timeout_s: float,
    pg_url: str | None,
    slower: float = 1.0,
) -> Measured:
    private, public = rsa_keypair()
    with (
        FakeGitHub(app_id=APP_ID, public_key_pem=public) as github,
        bench_harness(tmp, github, models_url, private) as h,
    ):
        bench_env(h)
        deployment = serve_deployment(h) if pg_url is None else pg_deployment(h, pg_url, workers=2)
        with deployment as dep, slowed(list(dep.pids.values()), slower):
            next_index = 0

            def run_batch(count: int) -> float:
                nonlocal next_index
                bodies = []
                for _ in range(count):
                    repo, number, installation = add_installation(github, next_index)
                    bodies.append(command_body(github, repo, number, installation))
                    next_index += 1
                before = finished(dep.states())
                t0 = time.perf_counter()
                asyncio.run(post_all(dep.url, bodies))
                wait_finished(h, dep, before + count, timeout_s, f"{count} runs ({topology})")
                return time.perf_counter() - t0

            # Warm-up: code paths loaded, pools open, in every process that drives
            # runs (with two workers, pairs until each has driven one).
            for _ in range(6):
                run_batch(len(dep.carriers))
                if len(dep.carriers) == 1 or all(dep.runs_by().values()):
                    break
            warm = next_index
            warm_by = dep.runs_by()
            baseline = sum(status_kb(dep.pids[c], "VmRSS") for c in dep.carriers)
            pids = {**dep.pids, "fake GitHub": os.getpid()}
            cpu0 = {name: process_cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
            makespan = run_batch(n)
            cpu = {
                name: (process_cpu_seconds(pid) or 0.0) - cpu0[name] for name, pid in pids.items()
            }
            peak = sum(status_kb(dep.pids[c], "VmHWM") for c in dep.carriers)
            states = dep.states()
            runs_by = {k: v - warm_by.get(k, 0) for k, v in dep.runs_by().items()}
    states = {k: v for k, v in states.items() if v}
    return Measured(n, makespan, states, warm, baseline, peak, cpu, runs_by)


def serve_part(
    models_url: str, sizes: Sequence[int], latency: float, timeout_s: float, slower: float
) -> int:
    results: list[Measured] = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix=f"bench-concurrent-{n}-") as tmp:
            results.append(measure("serve", Path(tmp), models_url, n, timeout_s, None, slower))

    wall1 = results[0].makespan_s
    print(
        f"{ROUNDS}-round debates, 2 auto-picked personas, never converging; model delay "
        f"L = {latency * 1000:.0f} ms (fake server in its own process); one `serve` "
        "process with SQLite, each debate on its own installation; GitHub write pacing "
        f"1 s per installation (the default){slowed_text(slower, BOT_PROCESSES)}"
    )
    rows = []
    for m in results:
        rows.append(
            [
                *size_cells(m, wall1),
                f"{m.cpu_s['serve'] / m.makespan_s:.0%}",
                f"{m.cpu_ms_per_run:.0f}",
                runs_text(m.states),
            ]
        )
    print_table(
        "Concurrent runs: makespan(N) ÷ wall(1), peak RSS growth per run",
        [
            *SIZE_COLUMNS,
            "serve CPU",
            "CPU/debate (ms)",
            "runs",
        ],
        rows,
    )
    print_verdicts(results, wall1, "")
    return 0


SIZE_COLUMNS = ("N", "makespan (s)", "÷ wall(1)", "RSS base (MB)", "peak (MB)", "MB/run")


def size_cells(m: Measured, wall1: float) -> list[str]:
    """The cells under SIZE_COLUMNS, shared by the serve and PostgreSQL tables."""
    return [
        str(m.n),
        f"{m.makespan_s:.2f}",
        f"{m.makespan_s / wall1:.2f}",
        f"{m.baseline_kb / 1024:.0f}",
        f"{m.peak_kb / 1024:.0f}",
        f"{m.growth_mb_per_run:.2f}",
    ]


def pg_part(models_url: str, n: int, latency: float, timeout_s: float, slower: float) -> int:
    results: list[Measured] = []
    for size in [1, n] if n != 1 else [1]:
        with (
            tempfile.TemporaryDirectory(prefix=f"bench-concurrent-pg-{size}-") as tmp,
            fresh_pg_database("bench_concurrent") as pg_url,
        ):
            results.append(measure("pg", Path(tmp), models_url, size, timeout_s, pg_url, slower))

    wall1 = results[0].makespan_s
    print(
        f"\n{ROUNDS}-round debates, 2 auto-picked personas, never converging; model delay "
        f"L = {latency * 1000:.0f} ms; one `web` + two `worker` processes on PostgreSQL, "
        "each debate on its own installation; GitHub write pacing 1 s per installation "
        "(the default), shared through the database. RSS: both workers summed; CPU: "
        "share of one core over the makespan ('fake GitHub' is this process)"
        + slowed_text(slower, BOT_PROCESSES)
    )
    procs = ["web", "worker0", "worker1", "fake GitHub"]
    rows = []
    for m in results:
        rows.append(
            [
                *size_cells(m, wall1),
                *(f"{m.cpu_s.get(p, 0.0) / m.makespan_s:.0%}" for p in procs),
                f"{m.cpu_ms_per_run:.0f}",
                " / ".join(str(m.runs_by.get(w, 0)) for w in ("worker0", "worker1")),
                runs_text(m.states),
            ]
        )
    print_table(
        "Concurrent runs, web + 2 workers on PostgreSQL: makespan(N) ÷ wall(1), "
        "peak RSS growth per run",
        [
            *SIZE_COLUMNS,
            *(f"{p} CPU" for p in procs),
            "CPU/debate (ms)",
            "runs w0 / w1",
            "runs",
        ],
        rows,
    )
    print_verdicts(results, wall1, "PG ")
    return 0


def runs_text(states: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(states.items()))


def print_verdicts(results: Sequence[Measured], wall1: float, label: str) -> None:
    for m in results:
        ratio = m.makespan_s / wall1
        ok = ratio <= TARGET_RATIO and m.all_done
        print(f"{verdict(ok)}  {label}N = {m.n}: makespan ÷ wall(1) {ratio:.2f} ≤ 1.5")
        if m.n >= 10:
            mb = m.growth_mb_per_run
            print(f"{verdict(mb <= TARGET_MB_PER_RUN)}  {label}N = {m.n}: {mb:.2f} MB/run ≤ 1")


# -- part 3: one installation, shared pacing ---------------------------------------


@dataclass
class Pacing:
    """What the fake GitHub saw of one installation's content-creating requests."""

    writes: list[RecordedRequest]  # by arrival
    refused: int  # by the fake's content limits

    def most_in(self, span_s: float) -> tuple[int, int]:
        """The most writes that arrived within any ``span_s`` (as the fake counts:
        later than ``span_s`` before the last), and the index of that window's last."""
        best, best_end, start = 0, 0, 0
        for end, w in enumerate(self.writes):
            while self.writes[start].received <= w.received - span_s:
                start += 1
            if end - start + 1 > best:
                best, best_end = end - start + 1, end
        return best, best_end

    def gaps(self, apart: int = 1) -> list[tuple[float, int]]:
        """Time from each write to the ``apart``-th next one, with that one's index."""
        return [
            (self.writes[i + apart].received - self.writes[i].received, i + apart)
            for i in range(len(self.writes) - apart)
        ]

    def smallest_gap(self) -> tuple[float, int]:
        """The smallest time between two consecutive writes, and the later one's index."""
        return min(self.gaps(), default=(float("inf"), 0))


def content_writes(github: FakeGitHub, installation: int) -> list[RecordedRequest]:
    with github._lock:  # the server thread appends while we read
        seen = list(github.requests)
    return sorted(
        (
            r
            for r in seen
            if r.installation == installation
            and r.method in CONTENT_METHODS
            and r.route != "/graphql"
        ),
        key=lambda r: r.received,
    )


def one_installation_part(models_url: str, latency: float, timeout_s: float) -> int:
    private, public = rsa_keypair()
    with (
        tempfile.TemporaryDirectory(prefix="bench-concurrent-one-") as tmp_name,
        fresh_pg_database("bench_one_installation") as pg_url,
        FakeGitHub(app_id=APP_ID, public_key_pem=public) as github,
        bench_harness(Path(tmp_name), github, models_url, private) as h,
    ):
        bench_env(h)  # the pacing under test at its defaults (bot/inputs/repo_config.py)
        # Half the debates per worker at most: both processes write to the one
        # installation, so the pacing they share is what is measured.
        h.env["DEBATE_BOT_WORKER_CONCURRENCY"] = str(ONE_DEBATES // 2)
        github.add_repo(ONE_REPO, installation_id=ONE_INSTALLATION)
        bodies = []
        for i in range(ONE_DEBATES):
            # One requester per debate: the default quota lets a user start 10 a day
            # in a repository (bot/inputs/repo_config.py Quotas), and this is not about quotas.
            user = f"dev{i + 1}"
            github.set_permission(ONE_REPO, user, "admin")
            number = github.add_issue(ONE_REPO, title=f"{TITLE} ({i + 1})", body="For partners.")
            bodies.append(command_body(github, ONE_REPO, number, ONE_INSTALLATION, user))
        with pg_deployment(h, pg_url, workers=2) as dep:
            cpu0 = bot_cpu_s(dep)
            t0 = time.perf_counter()
            asyncio.run(post_all(dep.url, bodies))
            deadline, last_note = t0 + timeout_s, t0
            seen: tuple[object, ...] = ()
            moved = t0
            while True:
                states = dep.states()
                now = time.perf_counter()
                if finished(states) >= ONE_DEBATES or now > deadline:
                    break
                # Paced writes move at least every ~15 s (250 an hour once the hour's
                # bucket is empty): minutes without a write or a state change is a stall.
                writes = len(content_writes(github, ONE_INSTALLATION))
                if (writes, sorted(states.items())) != seen:
                    seen, moved = (writes, sorted(states.items())), now
                elif now - moved > STALL_S:
                    print(f"  one installation: stalled for {STALL_S:.0f} s", file=sys.stderr)
                    break
                if now - last_note >= 30:  # it takes minutes: show it is moving
                    last_note = now
                    print(
                        f"  one installation, {now - t0:.0f} s: {finished(states)} of "
                        f"{ONE_DEBATES} runs finished, {writes} writes",
                        file=sys.stderr,
                        flush=True,
                    )
                time.sleep(0.5)
            makespan = time.perf_counter() - t0
            cpu_s = bot_cpu_s(dep) - cpu0
            runs_by = dep.runs_by()
        pacing = Pacing(
            content_writes(github, ONE_INSTALLATION), github.content_limited(ONE_INSTALLATION)
        )
    states = {k: v for k, v in states.items() if v}
    cpu_ms = cpu_s * 1000 / max(1, finished(states))
    return report_one_installation(pacing, states, makespan, runs_by, cpu_ms, latency, timeout_s)


def bot_cpu_s(dep: Deployment) -> float:
    """CPU time of every process of the bot (web and workers) so far."""
    return sum(process_cpu_seconds(pid) or 0.0 for pid in dep.pids.values())


def report_one_installation(
    pacing: Pacing,
    states: dict[str, int],
    makespan: float,
    runs_by: dict[str, int],
    cpu_ms: float,
    latency: float,
    timeout_s: float,
) -> int:
    (minute_s, minute_cap), (hour_s, hour_cap) = CONTENT_LIMITS
    per_minute, minute_end = pacing.most_in(minute_s)
    per_hour, _ = pacing.most_in(hour_s)
    gap, gap_at = pacing.smallest_gap()
    writes = pacing.writes
    statuses = Counter(w.status for w in writes)
    print(
        f"\n{ONE_DEBATES} {ROUNDS}-round debates at once in ONE installation (one repository); "
        f"model delay L = {latency * 1000:.0f} ms; one `web` + two `worker` processes on "
        "PostgreSQL with the default pacing (1 s between writes, 80 a minute, 500 an hour "
        "per installation, shared through the database); the fake GitHub refuses writes "
        "beyond 80 a minute or 500 an hour. Times are arrivals at the fake."
    )
    done = states.get("done", 0)
    print_table(
        "One installation, two workers: GitHub's content-creation limits",
        [
            "runs",
            "makespan (s)",
            "writes",
            "writes/min",
            "refused",
            "max in 60 s",
            "max in 3600 s",
            "smallest gap (s)",
            "runs w0 / w1",
            "CPU/debate (ms)",
            "write statuses",
        ],
        [
            [
                runs_text(states),
                f"{makespan:.0f}" + ("" if finished(states) >= ONE_DEBATES else " (gave up)"),
                str(len(writes)),
                f"{len(writes) / makespan * 60:.1f}",
                str(pacing.refused),
                str(per_minute),
                str(per_hour),
                f"{gap:.3f}",
                " / ".join(str(runs_by.get(w, 0)) for w in ("worker0", "worker1")),
                f"{cpu_ms:.0f}",
                ", ".join(f"{s}: {c}" for s, c in sorted(statuses.items())),
            ]
        ],
    )
    all_done = done == ONE_DEBATES
    print(
        f"{verdict(all_done)}  one installation: {done} of {ONE_DEBATES} runs done"
        + (
            ""
            if finished(states) >= ONE_DEBATES
            else f" (gave up: stalled, or the {timeout_s:.0f} s timeout)"
        )
    )
    print(f"{verdict(pacing.refused == 0)}  one installation: {pacing.refused} writes refused = 0")
    print(
        f"{verdict(per_minute <= minute_cap)}  one installation: at most {per_minute} writes "
        f"in any 60 s ≤ {minute_cap}"
    )
    print(
        f"{verdict(per_hour <= hour_cap)}  one installation: at most {per_hour} writes in any "
        f"3600 s ≤ {hour_cap}"
    )
    print(
        f"{verdict(gap >= TARGET_MIN_GAP_S)}  one installation: smallest gap between writes "
        f"{gap:.3f} s ≥ {TARGET_MIN_GAP_S:.0f} s"
    )
    # What a failing target was made of, to report without rerunning.
    t0 = writes[0].received if writes else 0.0
    if gap < TARGET_MIN_GAP_S and gap_at:
        short = sorted(g for g, _ in pacing.gaps() if g < TARGET_MIN_GAP_S)
        # A write sent late after its slot shortens the next gap: whether the
        # spacing holds on average shows over ten gaps (≥ 10 s if it does).
        span = min(pacing.gaps(10), default=(float("inf"), 0))[0]
        print(
            f"    {len(short)} of {len(writes) - 1} gaps under {TARGET_MIN_GAP_S:.0f} s "
            f"(smallest: {', '.join(f'{g:.3f}' for g in short[:5])}); smallest span of "
            f"10 gaps: {span:.2f} s"
        )
        for w in writes[max(0, gap_at - 2) : gap_at + 2]:
            print(f"    +{w.received - t0:9.3f} s  {w.status}  {w.kind}")
    if per_minute > minute_cap:
        window = writes[minute_end - per_minute + 1 : minute_end + 1]
        print(
            f"    densest minute: +{window[0].received - t0:.1f} s to "
            f"+{window[-1].received - t0:.1f} s: {dict(Counter(w.kind for w in window))}"
        )
    refusals = [w for w in writes if w.status == 403]
    for w in refusals[:10]:
        print(f"    refused +{w.received - t0:9.3f} s  {w.kind}  {w.json}")
    return 0


# -- entry -------------------------------------------------------------------------


TOPOLOGIES = ("serve", "pg", "one-installation")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks concurrent_runs")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="N = 1, 10, 50 only; PostgreSQL N = 50; no one-installation part",
    )
    # 2 s: a fast model's ~300-word turn (real ones take 2-30 s). At 0.5 s the
    # 2-core box measures its CPU throughput more than the bot's concurrency.
    parser.add_argument("--latency", type=float, default=2.0, help="model delay L in seconds")
    parser.add_argument("--sizes", type=str, default=None, help="comma-separated N values (serve)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait per N")
    parser.add_argument(
        "--topology",
        choices=(*TOPOLOGIES, "all"),
        default="all",
        help="which part to run: serve (SQLite), pg (web + 2 workers), one-installation",
    )
    parser.add_argument(
        "--pg-n", type=int, default=None, help="N on web + 2 workers (default 200; --quick 50)"
    )
    parser.add_argument(
        "--one-timeout",
        type=float,
        default=3600.0,
        help="seconds to wait for the one-installation debates (the bot paces itself)",
    )
    add_slower_option(parser, BOT_PROCESSES)
    args = parser.parse_args(argv)
    sizes = (
        [int(x) for x in args.sizes.split(",")]
        if args.sizes
        else [1, 10, 50]
        if args.quick
        else [1, 10, 50, 200]
    )
    if sizes[0] != 1:
        sizes = [1, *sizes]
    pg_n = args.pg_n if args.pg_n is not None else 50 if args.quick else 200
    parts: tuple[str, ...] = TOPOLOGIES if args.topology == "all" else (args.topology,)
    if args.quick and args.topology == "all":
        parts = ("serve", "pg")

    status = 0
    with model_server_process(latency_s=args.latency, never_converge=True) as models_url:
        for part in parts:
            try:
                if part == "serve":
                    status = max(
                        status,
                        serve_part(models_url, sizes, args.latency, args.timeout, args.slower),
                    )
                elif part == "pg":
                    status = max(
                        status, pg_part(models_url, pg_n, args.latency, args.timeout, args.slower)
                    )
                else:
                    status = max(
                        status, one_installation_part(models_url, args.latency, args.one_timeout)
                    )
            except pytest.skip.Exception as exc:  # PostgreSQL unreachable, outside CI
                print(f"\n{part}: skipped: {exc.msg}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
