"""A uvicorn server for the fakes that stops within ~10 ms of being asked.

uvicorn looks at ``should_exit`` every 0.1 s and its shutdown sleeps 0.1 s more
before it waits for connections in steps of 0.1 s. The fakes start and stop
around most tests, so those ticks were a large part of the inner loop's time
(``python3 dev.py test -m "not e2e"``). The fakes run with ``lifespan="off"``,
so there is no lifespan shutdown to send."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn

POLL_S = 0.01
DRAIN_S = 5.0  # then requests still running are cancelled (a stream never ends)


class Server(uvicorn.Server):
    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):  # the Date header, max requests
            counter = (counter + 1) % 864_000
            for _ in range(10):
                if self.should_exit:
                    return
                await asyncio.sleep(POLL_S)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()
        for _ in range(round(DRAIN_S / POLL_S)):
            if not (state.connections or state.tasks):
                break
            await asyncio.sleep(POLL_S)
        for task in state.tasks:
            task.cancel()
        for server in self.servers:
            await server.wait_closed()


@dataclass
class Running:
    """A fake's server running in a thread of its own, on a loopback port."""

    server: Server
    thread: threading.Thread
    sock: socket.socket
    port: int


def serve_in_thread(app: Any, name: str) -> Running:
    """``app`` served on a free loopback port in a daemon thread, started."""
    # IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on accepted sockets whose
    # proto says TCP; without it every response stalls ~40 ms (Nagle + delayed ACK).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,  # leave the test process's logging alone
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server = Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"{name}-{port}", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"{name} failed to start")
        time.sleep(0.005)
    return Running(server, thread, sock, port)
