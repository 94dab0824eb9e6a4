"""Helpers shared by benchmarks: uvicorn subprocesses, closed-loop HTTP load
generators, percentiles, process CPU time and result tables."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import h11
import httpx
from rich import box
from rich.console import Console
from rich.table import Table

LOOPBACK = "127.0.0.1"
BOT_PROCESSES = "the bot's processes"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@dataclass
class ServerProcess:
    pid: int
    base_url: str
    log_path: Path

    def cpu_seconds(self) -> float | None:
        return process_cpu_seconds(self.pid)


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process, all threads included (Linux /proc only)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the parenthesised command name; utime and stime are 14th and 15th.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def slowed(pids: Sequence[int], factor: float, period_s: float = 0.01) -> Iterator[None]:
    """Run the processes ``pids`` as if on a machine ``factor`` times slower:
    every ``period_s`` they may run for ``period_s / factor`` and are stopped
    (SIGSTOP) for the rest, so each gets at most 1/``factor`` of a core's time
    while the fakes and the load generator (stand-ins for GitHub, the model
    providers and the senders, which are elsewhere) keep full speed. A CPU quota
    (cgroups) would do the same, but needs root and a cgroup mount; signals work
    for any process of the same user. ``factor`` 1 changes nothing."""
    if factor <= 1:
        yield
        return
    run_s = period_s / factor
    stop = threading.Event()

    def signal_all(sig: signal.Signals) -> None:
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, sig)

    def duty_cycle() -> None:
        try:
            while not stop.is_set():
                time.sleep(run_s)
                signal_all(signal.SIGSTOP)
                time.sleep(period_s - run_s)
                signal_all(signal.SIGCONT)
        finally:
            signal_all(signal.SIGCONT)

    thread = threading.Thread(target=duty_cycle, name="slowed", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        signal_all(signal.SIGCONT)


def _slowdown(text: str) -> float:
    try:
        factor = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not factor >= 1:  # NaN too
        raise argparse.ArgumentTypeError(f"must be 1 or more (1: full speed), got {text}")
    return factor


def add_slower_option(parser: argparse.ArgumentParser, processes: str) -> None:
    """``--slower K``: run ``processes`` K times slower (``slowed``)."""
    parser.add_argument(
        "--slower",
        type=_slowdown,
        default=1.0,
        metavar="K",
        help=f"run {processes} K times slower (stopped for all but 1/K of every 10 ms), as "
        "on a slower machine; the fakes and the load generator keep full speed",
    )


def slowed_text(factor: float, processes: str) -> str:
    """What a table's caption says of ``--slower``: nothing at full speed."""
    if factor <= 1:
        return ""
    return (
        f"; {processes} slowed {factor:g}× (each runs 1/{factor:g} of the time), as on a "
        "machine that much slower"
    )


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextmanager
def uvicorn_server(
    factory: str,
    *,
    env: Mapping[str, str],
    log_path: Path,
    startup_timeout_s: float = 20.0,
) -> Iterator[ServerProcess]:
    """Serve ``module:function`` (an app factory) in its own process on loopback.

    A separate process keeps the server off the load generator's GIL. Every
    target gets the same uvicorn settings: asyncio loop, h11, one worker, no
    access log, no lifespan (as ``bot.service.main`` runs it).
    """
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        factory,
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--loop",
        "asyncio",
        "--http",
        "h11",
        "--lifespan",
        "off",
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd,
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parent.parent,
        )
    try:
        _wait_listening(proc, port, startup_timeout_s, log_path)
        yield ServerProcess(proc.pid, f"http://{LOOPBACK}:{port}", log_path)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_listening(proc: subprocess.Popen[bytes], port: int, timeout_s: float, log: Path) -> None:
    # uvicorn builds the app (calls the factory) before it binds, so an accepted
    # connection means the app is ready.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{_tail(log)}")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server did not listen within {timeout_s:.0f} s:\n{_tail(log)}")


class LoadClients(Protocol):
    """A fixed set of HTTP clients, each with one keep-alive connection."""

    async def post(
        self, client: int, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes]: ...

    async def aclose(self) -> None: ...


class _H11Connection:
    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._host_header = f"{host}:{port}"
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._conn = h11.Connection(h11.CLIENT)

    async def post(self, path: str, headers: Mapping[str, str], body: bytes) -> tuple[int, bytes]:
        reused = self._streams is not None
        if self._streams is not None and self._streams[0].at_eof():
            # uvicorn closes keep-alive connections idle for 5 s (while another
            # target is being measured, say).
            await self.aclose()
            reused = False
        try:
            return await self._exchange(path, headers, body)
        except (OSError, h11.ProtocolError):
            if not reused:
                raise
            # The server may close an idle connection just as it is reused;
            # like httpx, retry once on a fresh one.
            return await self._exchange(path, headers, body)

    async def _exchange(
        self, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes]:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self._host, self._port)
            self._conn = h11.Connection(h11.CLIENT)
        reader, writer = self._streams
        try:
            head = [
                ("Host", self._host_header),
                ("Content-Length", str(len(body))),
                *headers.items(),
            ]
            conn = self._conn
            writer.write(
                conn.send(h11.Request(method="POST", target=path, headers=head))
                + conn.send(h11.Data(data=body))
                + conn.send(h11.EndOfMessage())
            )
            status, chunks = 0, []
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise ConnectionError("server closed the connection")
            conn.start_next_cycle()
            return status, b"".join(chunks)
        except BaseException:
            await self.aclose()  # unknown state: reconnect on the next request
            raise

    async def aclose(self) -> None:
        if self._streams is not None:
            writer = self._streams[1]
            self._streams = None
            writer.close()
            with suppress(OSError):
                await writer.wait_closed()


class H11Clients:
    """Clients speaking HTTP/1.1 through h11 (the protocol engine under httpx and
    uvicorn) on plain asyncio streams. httpx adds ~0.7 ms of client CPU per
    request on top, and its connection pool scans every connection on each
    request; at 50 connections a single httpx process saturates its core at
    about a quarter of what a bare uvicorn endpoint serves, so the load
    generator, not the server, would be measured."""

    def __init__(self, base_url: str, count: int) -> None:
        parts = urlsplit(base_url)
        assert parts.hostname and parts.port
        self._conns = [_H11Connection(parts.hostname, parts.port) for _ in range(count)]

    async def post(
        self, client: int, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes]:
        return await self._conns[client].post(path, headers, body)

    async def aclose(self) -> None:
        for conn in self._conns:
            await conn.aclose()


class HttpxClients:
    """One ``httpx.AsyncClient`` per simulated client, each with a single pooled
    connection (one shared pool of 50 costs more per request: httpcore scans
    the whole pool on every request)."""

    def __init__(self, base_url: str, count: int) -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        self._clients = [
            httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30.0, trust_env=False)
            for _ in range(count)
        ]

    async def post(
        self, client: int, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, bytes]:
        response = await self._clients[client].post(path, content=body, headers=dict(headers))
        return response.status_code, response.content

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()


LOAD_CLIENTS: dict[str, Callable[[str, int], LoadClients]] = {
    "h11": H11Clients,
    "httpx": HttpxClients,
}


@dataclass
class LoadResult:
    requests: int
    elapsed_s: float
    latencies_ms: list[float]
    outcomes: Counter[str] = field(default_factory=Counter)
    client_cpu_s: float = 0.0
    server_cpu_s: float | None = None

    @property
    def throughput(self) -> float:
        return self.requests / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def percentile(self, q: float) -> float:
        return percentile(self.latencies_ms, q)

    def __add__(self, other: LoadResult) -> LoadResult:
        """Pool two measurement windows of the same target."""
        server_cpu = (
            self.server_cpu_s + other.server_cpu_s
            if self.server_cpu_s is not None and other.server_cpu_s is not None
            else None
        )
        return LoadResult(
            self.requests + other.requests,
            self.elapsed_s + other.elapsed_s,
            self.latencies_ms + other.latencies_ms,
            self.outcomes + other.outcomes,
            self.client_cpu_s + other.client_cpu_s,
            server_cpu,
        )


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 < q < 100), interpolated between samples."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    cuts = statistics.quantiles(values, n=1000, method="inclusive")
    return cuts[round(q * 10) - 1]


async def closed_loop(
    send: Callable[[int, int], Awaitable[str]],
    *,
    requests: int,
    concurrency: int,
    first_index: int = 0,
    server: ServerProcess | None = None,
) -> LoadResult:
    """``concurrency`` clients, each sending its next request as soon as the last
    answered, until ``requests`` were sent. ``send(client, i)`` sends request
    ``i`` on behalf of client number ``client`` and returns an outcome label.

    Latency is client-side: from just before the request is issued to the
    complete response.
    """
    latencies: list[float] = []
    outcomes: Counter[str] = Counter()
    next_index = first_index
    end_index = first_index + requests

    async def client(number: int) -> None:
        nonlocal next_index
        while next_index < end_index:
            i = next_index
            next_index += 1
            t0 = time.perf_counter()
            label = await send(number, i)
            latencies.append((time.perf_counter() - t0) * 1000)
            outcomes[label] += 1

    server_cpu0 = server.cpu_seconds() if server else None
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for number in range(concurrency):
            tg.create_task(client(number))
    elapsed = time.perf_counter() - t0
    client_cpu = time.process_time() - cpu0
    server_cpu1 = server.cpu_seconds() if server else None
    server_cpu = (
        server_cpu1 - server_cpu0 if server_cpu0 is not None and server_cpu1 is not None else None
    )
    return LoadResult(requests, elapsed, latencies, outcomes, client_cpu, server_cpu)


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A markdown-shaped table, so the output can be pasted into the README."""
    table = Table(title=title, box=box.MARKDOWN, title_justify="left")
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=200).print(table)
