"""Concurrent runs: does one `serve` process carry N debates as fast as one?

N debates at once (3 rounds, 2 personas, never converging, so every round runs),
each on its own installation and repository, on one real `debate-bot serve`
process with SQLite, against the loopback fake GitHub (in this process) and the
fake model server (in its own process) answering every call after a delay L.
N = 1, 10, 50, 200, each on a fresh process and database.

- makespan(N): from the first delivery posted to the last run done, divided by
  wall(1), the same for N = 1. Target (issue 9): ≤ 1.5 for every N.
- peak RSS growth: the process's peak RSS (VmHWM) once all N are done, minus its
  RSS after a warm-up run (code paths loaded, connections open), per run.
  Target: ≤ 1 MB per active run (judged for N ≥ 10, where it is not noise).

The worker admits N runs at once (`worker_concurrency`) and the provider N × 2
calls (`provider_concurrency`): the limits are settings, and this measures what
the process does when they are not the bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import httpx

from benchmarks._support_models import model_server_process, verdict
from benchmarks.common import print_table, process_cpu_seconds
from bot.github.webhooks import sign
from tests.fakes.github_server import FakeGitHub
from tests.fakes.model_server import FakeModelServer
from tests.harness.service import APP_ID, SECRET, Harness, delivery, rsa_keypair

ROUNDS = 3
TARGET_RATIO = 1.5
TARGET_MB_PER_RUN = 1.0
USER = "Codertocat"


@dataclass
class Measured:
    n: int
    makespan_s: float
    states: dict[str, int]
    baseline_kb: int
    peak_kb: int
    cpu_s: float  # the serve process's CPU time over the batch

    @property
    def growth_mb_per_run(self) -> float:
        return (self.peak_kb - self.baseline_kb) / 1024 / self.n


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def add_installation(github: FakeGitHub, i: int) -> tuple[str, int]:
    """Repository ``org{i}/repo`` on installation ``1000 + i``, with one open issue."""
    repo = f"org{i}/repo"
    github.add_repo(repo, installation_id=1000 + i)
    github.set_permission(repo, USER, "admin")
    number = github.add_issue(
        repo, title="Should we use gRPC or REST for the public API?", body="For partners."
    )
    return repo, number


def command_body(github: FakeGitHub, repo: str, number: int, installation: int) -> bytes:
    text = f"/debate --rounds {ROUNDS}"
    comment_id = github.add_comment(repo, number, text, user=USER)
    owner = repo.split("/", 1)[0]
    payload = delivery(
        "issue_comment.created.with-installation",
        **{
            "comment.body": text,
            "comment.id": comment_id,
            "comment.user.login": USER,
            "issue.number": number,
            "issue.title": github.issue(repo, number)["title"],
            "issue.body": github.issue(repo, number)["body"],
            "sender.login": USER,
            "sender.type": "User",
            "installation.id": installation,
            "repository.full_name": repo,
            "repository.name": "repo",
            "repository.owner.login": owner,
        },
    )
    return json.dumps(payload).encode()


async def post_all(url: str, bodies: list[bytes]) -> None:
    """All deliveries at once, as a burst of webhooks would arrive."""
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=50)) as client:

        async def one(body: bytes) -> None:
            headers = {
                "X-GitHub-Event": "issue_comment",
                "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-Hub-Signature-256": sign(SECRET.encode(), body),
                "Content-Type": "application/json",
            }
            r = await client.post(url + "/api/github/webhooks", content=body, headers=headers)
            if r.status_code != 202:
                raise RuntimeError(f"delivery answered {r.status_code}: {r.text}")

        await asyncio.gather(*(one(b) for b in bodies))


def states(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("select state, count(*) from runs group by state"))


def measure(tmp: Path, models_url: str, n: int, timeout_s: float) -> Measured:
    private, public = rsa_keypair()
    with FakeGitHub(app_id=APP_ID, public_key_pem=public) as github:
        # Harness only reads the model server's two base URLs; the server itself
        # runs in another process so its work does not share this one's GIL.
        root = models_url.removesuffix("/v1")
        urls = SimpleNamespace(openai_base_url=models_url, anthropic_base_url=root)
        h = Harness(tmp, github, cast(FakeModelServer, urls), private)
        h.env.update(
            {
                "DEBATE_BOT_WORKER_CONCURRENCY": str(max(64, n)),
                "DEBATE_BOT_PROVIDER_CONCURRENCY": json.dumps(
                    {"openai": max(16, 2 * n), "anthropic": max(16, 2 * n)}
                ),
                "DEBATE_BOT_GITHUB_WRITE_INTERVAL_S": "1.0",  # the default pacing
                "DEBATE_BOT_LEASE_S": "60",
                "DEBATE_BOT_WORKER_POLL_S": "1.0",  # the default; wake-ups do the rest
                "DEBATE_BOT_INTAKE_CONCURRENCY": "64",
                "DEBATE_BOT_LOG_LEVEL": "INFO",
            }
        )
        db = tmp / "bot.db"
        try:
            svc = h.start()
            assert svc.proc is not None
            pid = svc.proc.pid

            def run_batch(first: int, count: int) -> float:
                bodies = []
                for i in range(first, first + count):
                    repo, number = add_installation(github, i)
                    bodies.append(command_body(github, repo, number, 1000 + i))
                done_before = states(db).get("done", 0)
                t0 = time.perf_counter()
                asyncio.run(post_all(svc.url, bodies))
                h.wait_for(
                    lambda: states(db).get("done", 0) + states(db).get("failed", 0)
                    >= done_before + count,
                    timeout=timeout_s,
                    what=f"{count} runs",
                )
                return time.perf_counter() - t0

            run_batch(0, 1)  # warm-up: code paths loaded, pools open
            baseline = status_kb(pid, "VmRSS")
            cpu0 = process_cpu_seconds(pid) or 0.0
            makespan = run_batch(1, n)
            cpu = (process_cpu_seconds(pid) or 0.0) - cpu0
            peak = status_kb(pid, "VmHWM")
            final = states(db)
        finally:
            h.stop()
    return Measured(n, makespan, final, baseline, peak, cpu)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks concurrent_runs")
    parser.add_argument("--quick", action="store_true", help="N = 1, 10, 50 only")
    parser.add_argument("--latency", type=float, default=0.5, help="model delay L in seconds")
    parser.add_argument("--sizes", type=str, default=None, help="comma-separated N values")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait per N")
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

    results: list[Measured] = []
    with model_server_process(latency_s=args.latency, never_converge=True) as models_url:
        for n in sizes:
            with tempfile.TemporaryDirectory(prefix=f"bench-concurrent-{n}-") as tmp:
                results.append(measure(Path(tmp), models_url, n, args.timeout))

    wall1 = results[0].makespan_s
    print(
        f"{ROUNDS}-round debates, 2 auto-picked personas, never converging; model delay "
        f"L = {args.latency * 1000:.0f} ms (fake server in its own process); one `serve` "
        "process with SQLite, each debate on its own installation; GitHub write pacing "
        "1 s per installation (the default)"
    )
    rows = []
    for m in results:
        state = ", ".join(f"{k} {v}" for k, v in sorted(m.states.items()))
        rows.append(
            [
                str(m.n),
                f"{m.makespan_s:.2f}",
                f"{m.makespan_s / wall1:.2f}",
                f"{m.baseline_kb / 1024:.0f}",
                f"{m.peak_kb / 1024:.0f}",
                f"{m.growth_mb_per_run:.2f}",
                f"{m.cpu_s / m.makespan_s:.0%}",
                state,
            ]
        )
    print_table(
        "Concurrent runs: makespan(N) ÷ wall(1), peak RSS growth per run",
        [
            "N",
            "makespan (s)",
            "÷ wall(1)",
            "RSS base (MB)",
            "peak (MB)",
            "MB/run",
            "serve CPU",
            "runs",
        ],
        rows,
    )
    status = 0
    for m in results:
        ok = m.makespan_s / wall1 <= TARGET_RATIO and m.states.get("done", 0) == m.n + 1
        print(f"{verdict(ok)}  N = {m.n}: makespan ÷ wall(1) {m.makespan_s / wall1:.2f} ≤ 1.5")
        if m.n >= 10:
            mb = m.growth_mb_per_run
            print(f"{verdict(mb <= TARGET_MB_PER_RUN)}  N = {m.n}: {mb:.2f} MB/run ≤ 1")
    return status


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
