"""A loopback webhook-proxy channel in the smee.io style: clients GET it as
server-sent events; each published delivery is one `message` event whose data
is the delivery's headers (lower-cased) with `body`, `query` and `timestamp`."""

from __future__ import annotations

import asyncio
import json
import queue
import socket
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from testkit.fakes import serving

CLOSE = object()  # ends the current stream: the client must reconnect


class FakeChannel:
    def __init__(self) -> None:
        self.connections = 0
        self._queue: queue.Queue[Any] = queue.Queue()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def publish(self, data: dict[str, Any]) -> None:
        self._queue.put(data)

    def close_stream(self) -> None:
        self._queue.put(CLOSE)

    def _app(self) -> FastAPI:
        app = FastAPI()

        async def stream() -> AsyncIterator[bytes]:
            yield b"event: ready\ndata: {}\n\n"
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    yield b": keep-alive\n\n"
                    await asyncio.sleep(0.05)
                    continue
                if item is CLOSE:
                    return
                lines = json.dumps(item, indent=1).splitlines()  # multi-line data, as SSE allows
                yield b"".join(b"data: " + ln.encode() + b"\n" for ln in lines) + b"\n"

        @app.get("/channel")
        async def channel() -> StreamingResponse:
            self.connections += 1
            return StreamingResponse(stream(), media_type="text/event-stream")

        return app

    def __enter__(self) -> FakeChannel:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off")
        self._server = serving.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        while not self._server.started:
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/channel"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._server.force_exit = True
        self._thread.join(timeout=10)
