"""Ingestion: signed deliveries per second and time to 202 at 50 concurrent clients.

The real webhook route (``bot.service.web.main.create_app`` on a fresh SQLite file
database) is measured beside a bare FastAPI route answering 202, each in its own
uvicorn process with the same settings, in the same run. Targets (issue 3):
at least half the bare throughput, and p99 under 50 ms. Afterwards the run is
checked for correctness: one row per "queued" answer, and a redelivery of a
known id answers "duplicate".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import h11
import httpx

from benchmarks._ingest_apps import DATABASE_ENV, ROUTE, SECRET_ENV
from benchmarks.common import (
    LOAD_CLIENTS,
    LoadResult,
    ServerProcess,
    add_slower_option,
    closed_loop,
    print_table,
    slowed,
    slowed_text,
    uvicorn_server,
)
from bot.github.webhooks import SIGNATURE_HEADER, sign
from bot.store import RunStore
from testkit.harness.service import CORPUS

SERVERS = "both servers"
PAYLOAD = "issue_comment.created.with-installation.json"
COMMENT_BODY = "/debate Should we ship the ingestion path as is?"
EVENT = "issue_comment"
QUEUED = "202 queued"
DUPLICATE = "202 duplicate"

MIN_RATIO = 0.5
MAX_P99_MS = 50.0


@dataclass
class Target:
    name: str
    factory: str


BARE = Target("bare FastAPI 202", "benchmarks._ingest_apps:bare_app")
REAL = Target("debate-bot webhook", "benchmarks._ingest_apps:real_app")


@dataclass
class TargetRun:
    target: Target
    warmup: LoadResult
    measured: LoadResult
    redelivery: str | None = None


def command_payload(path: Path = CORPUS / PAYLOAD, body: str = COMMENT_BODY) -> bytes:
    """The corpus delivery's bytes with only the comment body replaced, so the
    route persists it instead of ignoring a non-command comment."""
    raw = path.read_bytes()
    payload = json.loads(raw)
    old = json.dumps(payload["comment"]["body"]).encode()
    if raw.count(old) == 1:
        return raw.replace(old, json.dumps(body).encode())
    payload["comment"]["body"] = body  # ambiguous in place: re-serialize instead
    return json.dumps(payload, indent=2).encode()


class _Driver:
    """Signed deliveries to one target, each under a fresh X-GitHub-Delivery."""

    def __init__(
        self, server: ServerProcess, body: bytes, secret: bytes, concurrency: int, client_kind: str
    ) -> None:
        self.server = server
        self.body = body
        # The body is the same for every delivery, so is its signature: GitHub
        # signs the body only; the delivery id travels in a header.
        self.signature = sign(secret, body)
        self.run_id = uuid.uuid4().hex[:12]
        self.concurrency = concurrency
        self.clients = LOAD_CLIENTS[client_kind](server.base_url, concurrency)
        self.sent = 0

    async def send(self, client: int, i: int) -> str:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/bench",
            "X-GitHub-Event": EVENT,
            "X-GitHub-Delivery": f"{self.run_id}-{i:07d}",
            SIGNATURE_HEADER: self.signature,
        }
        try:
            status_code, content = await self.clients.post(client, ROUTE, headers, self.body)
        except (OSError, h11.ProtocolError, httpx.HTTPError) as exc:
            return f"error {type(exc).__name__}"
        try:
            status = json.loads(content).get("status", "?")
        except (ValueError, AttributeError):
            status = "non-JSON"
        return f"{status_code} {status}"

    async def load(self, requests: int, *, measure: bool) -> LoadResult:
        result = await closed_loop(
            self.send,
            requests=requests,
            concurrency=self.concurrency,
            first_index=self.sent,
            server=self.server if measure else None,
        )
        self.sent += requests
        return result


async def _measure(
    drivers: dict[str, _Driver], *, warmup: int, requests: int, rounds: int
) -> dict[str, tuple[LoadResult, LoadResult]]:
    # Targets take turns in a few rounds, so background load on the machine
    # drifting during the run weighs on both alike.
    warm = {name: await d.load(warmup, measure=False) for name, d in drivers.items()}
    measured: dict[str, LoadResult | None] = dict.fromkeys(drivers)
    for r in range(rounds):
        chunk = requests // rounds + (1 if r < requests % rounds else 0)
        for name, d in drivers.items():
            result = await d.load(chunk, measure=True)
            previous = measured[name]
            measured[name] = result if previous is None else previous + result
    return {name: (warm[name], m) for name, m in measured.items() if m is not None}


def run_targets(
    targets: list[Target],
    workdir: Path,
    body: bytes,
    secret: bytes,
    database_url: str,
    *,
    warmup: int,
    requests: int,
    rounds: int,
    concurrency: int,
    client_kind: str,
    slower: float = 1.0,
) -> list[TargetRun]:
    """Serve every target at once (idle while another is measured), measure them
    in turns, then redeliver the first delivery sent to each; ``slower`` > 1 slows
    every target's process alike (``benchmarks.common.slowed``)."""
    env = {SECRET_ENV: secret.decode(), DATABASE_ENV: database_url}

    async def drive(servers: dict[str, ServerProcess]) -> list[TargetRun]:
        drivers = {
            name: _Driver(server, body, secret, concurrency, client_kind)
            for name, server in servers.items()
        }
        try:
            results = await _measure(drivers, warmup=warmup, requests=requests, rounds=rounds)
            return [
                TargetRun(t, *results[t.name], await drivers[t.name].send(0, 0)) for t in targets
            ]
        finally:
            for d in drivers.values():
                await d.clients.aclose()

    with ExitStack() as stack:
        servers = {
            t.name: stack.enter_context(
                uvicorn_server(
                    t.factory, env=env, log_path=workdir / f"{t.factory.rsplit(':', 1)[1]}.log"
                )
            )
            for t in targets
        }
        stack.enter_context(slowed([s.pid for s in servers.values()], slower))
        return asyncio.run(drive(servers))


def _row(run: TargetRun, bare: TargetRun) -> list[str]:
    m = run.measured
    ratio = m.throughput / bare.measured.throughput if bare.measured.throughput else float("nan")
    server_cpu = f"{m.server_cpu_s / m.requests * 1000:.2f}" if m.server_cpu_s is not None else "-"
    return [
        run.target.name,
        str(m.requests),
        f"{m.throughput:,.0f}",
        f"{m.percentile(50):.1f}",
        f"{m.percentile(99):.1f}",
        f"{ratio:.2f}x",
        server_cpu,
        f"{m.client_cpu_s / m.elapsed_s:.0%}",
    ]


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(
    bare: TargetRun, real: TargetRun, rows_in_db: int, concurrency: int, slower: float = 1.0
) -> None:
    print_table(
        f"Ingestion: {EVENT} deliveries, {concurrency} concurrent clients, loopback"
        + slowed_text(slower, SERVERS),
        [
            "target",
            "requests",
            "deliveries/s",
            "p50 ms",
            "p99 ms",
            "ratio to bare",
            "server CPU/delivery (ms)",
            "client CPU",
        ],
        [_row(bare, bare), _row(real, bare)],
    )
    m = real.measured
    ratio = m.throughput / bare.measured.throughput
    p99 = m.percentile(99)
    print(f"{_verdict(ratio >= MIN_RATIO)}  throughput >= {MIN_RATIO}x bare: {ratio:.2f}x")
    print(f"{_verdict(p99 < MAX_P99_MS)}  p99 < {MAX_P99_MS:.0f} ms: {p99:.1f} ms")

    for run in (bare, real):
        if run.measured.client_cpu_s / run.measured.elapsed_s > 0.9:
            print(
                f"WARN  {run.target.name}: the load generator was CPU-bound; "
                "its figures understate the server"
            )
        outcomes = run.warmup.outcomes + run.measured.outcomes
        unexpected = {k: v for k, v in outcomes.items() if k != QUEUED}
        if unexpected:
            print(f"FAIL  {run.target.name}: unexpected answers {dict(unexpected)}")
    queued = real.warmup.outcomes[QUEUED] + real.measured.outcomes[QUEUED]
    print(
        f"{_verdict(rows_in_db == queued)}  deliveries rows == 'queued' answers: "
        f"{rows_in_db} rows, {queued} queued"
    )
    print(
        f"{_verdict(real.redelivery == DUPLICATE)}  redelivery of a known id answers "
        f"'duplicate': got {real.redelivery!r}"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks ingest", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="500 measured requests per target")
    parser.add_argument("--requests", type=int, help="measured requests per target (default 3000)")
    parser.add_argument("--warmup", type=int, help="unmeasured requests first (default 300)")
    parser.add_argument("--rounds", type=int, default=3, help="measurement turns per target")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument(
        "--client",
        choices=sorted(LOAD_CLIENTS),
        default="h11",
        help="load generator; httpx saturates its own core first (see benchmarks.common)",
    )
    add_slower_option(parser, SERVERS)
    args = parser.parse_args(argv)
    requests = args.requests or (500 if args.quick else 3000)
    warmup = args.warmup if args.warmup is not None else (100 if args.quick else 300)
    rounds = max(1, min(args.rounds, requests))

    body = command_payload()
    secret = uuid.uuid4().hex.encode()  # per run; never printed
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        workdir = Path(tmp)
        database_url = f"sqlite:///{workdir / 'ingest.db'}"
        store = RunStore.from_url(database_url)
        try:
            store.migrate()
            bare, real = run_targets(
                [BARE, REAL],
                workdir,
                body,
                secret,
                database_url,
                warmup=warmup,
                requests=requests,
                rounds=rounds,
                concurrency=args.concurrency,
                client_kind=args.client,
                slower=args.slower,
            )
            rows = sum(store.delivery_counts_by_state().values())
        finally:
            store.dispose()
    report(bare, real, rows, args.concurrency, args.slower)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
