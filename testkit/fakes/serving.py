"""A uvicorn server for the fakes that stops within ~10 ms of being asked.

uvicorn looks at ``should_exit`` every 0.1 s and its shutdown sleeps 0.1 s more
before it waits for connections in steps of 0.1 s. The fakes start and stop
around most tests, so those ticks were a large part of the inner loop's time
(``python3 dev.py test -m "not e2e"``). The fakes run with ``lifespan="off"``,
so there is no lifespan shutdown to send."""

from __future__ import annotations

import asyncio
import socket

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
