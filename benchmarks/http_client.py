"""HTTP client CPU: what one GitHub or model call costs the bot's process on the
wire, with httpx's own transport (httpcore) against ``bot.core.transport``'s aiohttp
one, both under the same ``httpx`` client the bot uses.

A bare uvicorn endpoint (its own process) answers POSTs of an 8 KB JSON body, the
size of a debate turn's prompt; ``CONCURRENCY`` clients send back to back. The
figure is this process's CPU per request (``time.process_time``), the two
transports alternating, so the machine's noise falls on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from benchmarks._ingest_apps import ROUTE
from benchmarks.common import print_table, uvicorn_server
from bot.core.transport import AiohttpTransport, LeanAsyncClient

BODY = {"model": "m", "messages": [{"role": "user", "content": "y" * 8000}]}
TRANSPORTS: dict[str, Callable[[], httpx.AsyncBaseTransport]] = {
    "httpcore (httpx's own)": lambda: httpx.AsyncHTTPTransport(
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=None)
    ),
    "aiohttp (bot.core.transport)": AiohttpTransport,
}


async def cpu_per_request_us(
    url: str, make: Callable[[], httpx.AsyncBaseTransport], requests: int, concurrency: int
) -> float:
    async with LeanAsyncClient(transport=make(), timeout=30) as client:

        async def sender(count: int) -> None:
            for _ in range(count):
                response = await client.post(url, json=BODY)
                response.raise_for_status()

        per = requests // concurrency
        await asyncio.gather(*(sender(2) for _ in range(concurrency)))  # connections open
        cpu0 = time.process_time()
        await asyncio.gather(*(sender(per) for _ in range(concurrency)))
        return (time.process_time() - cpu0) / (per * concurrency) * 1e6


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks http_client")
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the transports")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be 1 or more, got {args.rounds}")
    requests = 640 if args.quick else 3200
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-http-") as tmp,
        uvicorn_server(
            "benchmarks._ingest_apps:bare_app", env={}, log_path=Path(tmp) / "server.log"
        ) as server,
    ):
        url = server.base_url + ROUTE
        for concurrency in (1, 64):
            samples: dict[str, list[float]] = {name: [] for name in TRANSPORTS}
            for _ in range(args.rounds):
                for name, make in TRANSPORTS.items():
                    samples[name].append(
                        asyncio.run(cpu_per_request_us(url, make, requests, concurrency))
                    )
            best = {name: min(values) for name, values in samples.items()}
            base = best["httpcore (httpx's own)"]
            for name, us in best.items():
                rows.append([str(concurrency), name, f"{us:.0f}", f"{us / base:.2f}"])
    print(
        f"{requests} POSTs of an 8 KB JSON body per measurement through httpx; best of "
        f"{args.rounds} alternating rounds; the server is another process"
    )
    print_table(
        "HTTP client CPU per request",
        ["in flight", "transport", "CPU/request (µs)", "÷ httpcore"],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
