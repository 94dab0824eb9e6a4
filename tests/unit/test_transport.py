"""bot/transport.py: the aiohttp transport speaks HTTP/1.1 to a real loopback
server as httpx would, and reports failures as httpx's errors, split by whether
the request may have reached the server; the client keeps httpx's cookie
behaviour while skipping the cookie jar for answers that set no cookie."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import anyio
import httpx
import pytest
from pydantic import SecretStr

from bot.config import Settings
from bot.github.gateway import GitHubGateway
from bot.llm.router import ModelRouter
from bot.transport import AiohttpTransport, LeanAsyncClient, _httpx_error


def answer(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/login":
        return httpx.Response(200, headers={"Set-Cookie": "session=abc; Path=/"})
    return httpx.Response(200, json={"cookie": request.headers.get("cookie")})


def test_a_set_cookie_is_kept_and_sent_back_as_httpx_would() -> None:
    async def go() -> list[object]:
        seen: list[object] = []
        for client_type in (httpx.AsyncClient, LeanAsyncClient):
            transport = httpx.MockTransport(answer)
            async with client_type(transport=transport, base_url="http://api.test") as client:
                first = (await client.get("/data")).json()
                await client.get("/login")
                second = (await client.get("/data")).json()
                seen.append((first, second, dict(client.cookies)))
        return seen

    plain, lean = anyio.run(go)
    assert lean == plain == ({"cookie": None}, {"cookie": "session=abc"}, {"session": "abc"})


def test_answers_without_set_cookie_never_reach_the_jar(monkeypatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(
        httpx.Cookies, "extract_cookies", lambda self, response: calls.append(response.url.path)
    )

    async def go() -> None:
        transport = httpx.MockTransport(answer)
        async with LeanAsyncClient(transport=transport, base_url="http://api.test") as client:
            await client.get("/data")
            await client.get("/login")
            client.cookies = {"given": "1"}  # a jar set later skips the same way
            await client.get("/data")
            await client.get("/login")

    anyio.run(go)
    assert calls == ["/login", "/login"]


def test_the_github_session_and_the_model_router_use_it(app_keys: tuple[str, str]) -> None:
    settings = Settings(_env_file=None, app_id=1, private_key=SecretStr(app_keys[0]))
    gateway = GitHubGateway(settings)

    async def clients() -> list[httpx.AsyncClient]:
        made = [await gateway.app._create_async_client(), await gateway.gh._create_async_client()]
        for client in made:
            await client.aclose()
        return made

    assert all(isinstance(c, LeanAsyncClient) for c in anyio.run(clients))
    assert isinstance(ModelRouter(settings)._client, LeanAsyncClient)
    assert isinstance(gateway._transport._inner, AiohttpTransport)
    assert isinstance(ModelRouter(settings)._client._transport, AiohttpTransport)


def test_githubkit_reuses_one_client_that_keeps_no_cookie(app_keys: tuple[str, str]) -> None:
    """githubkit would build an httpx client per request; ours is built once per
    githubkit instance, and since it serves every installation, a cookie one
    answer sets is never sent with another request."""
    settings = Settings(_env_file=None, app_id=1, private_key=SecretStr(app_keys[0]))
    gateway = GitHubGateway(settings, transport=httpx.MockTransport(answer))

    async def go() -> tuple[bool, object, dict[str, str]]:
        async with gateway.gh.get_async_client() as first:
            await first.get("/login")
        async with gateway.gh.get_async_client() as second:
            sent = (await second.get("/data")).json()
        await gateway.aclose()
        return first is second, sent, dict(second.cookies)

    same, sent, jar = anyio.run(go)
    assert same and sent == {"cookie": None} and jar == {}


# -- the transport on the wire ---------------------------------------------------

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Wire:
    """A loopback HTTP/1.1 server whose answer per path is scripted byte by byte."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.routes: dict[str, Handler] = {}
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, target, _ = lines[0].split(" ")
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append((f"{method} {target}", headers, body))
                await self.routes[target.split("?")[0]](reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def answer_with(status: int, body: bytes, *headers: tuple[str, str]) -> Handler:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = [f"HTTP/1.1 {status} Whatever", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in headers]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()

    return handle


async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()  # the request arrived; no answer


async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(30)


async def half_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
    await writer.drain()
    writer.close()


@asynccontextmanager
async def wire() -> AsyncIterator[Wire]:
    w = Wire()
    server = await asyncio.start_server(w._serve, "127.0.0.1", 0)
    w.port = server.sockets[0].getsockname()[1]
    async with server:
        yield w


def url(w: Wire, path: str) -> str:
    return f"http://127.0.0.1:{w.port}{path}"


async def test_a_request_and_its_answer_cross_intact_and_the_connection_is_kept() -> None:
    async with wire() as w, LeanAsyncClient(transport=AiohttpTransport()) as client:
        big = "x" * 20_000  # beyond aiohttp's default 8,190-byte header limit
        w.routes["/data"] = answer_with(
            201, b'{"ok": true}', ("Content-Type", "application/json"), ("Link", big)
        )
        first = await client.post(
            url(w, "/data?page=2"), json={"a": "é"}, headers={"Authorization": "Bearer t"}
        )
        second = await client.get(url(w, "/data"))

    assert (first.status_code, first.json(), first.headers["link"]) == (201, {"ok": True}, big)
    assert first.http_version == "HTTP/1.1" and first.reason_phrase == "Whatever"
    assert second.status_code == 201
    (line, headers, body), (line2, _, body2) = w.requests
    assert (line, line2) == ("POST /data?page=2", "GET /data")
    assert headers["authorization"] == "Bearer t"
    assert headers["content-type"] == "application/json"
    assert body == '{"a":"é"}'.encode() and body2 == b""
    assert w.connections == 1  # kept alive between the two


async def test_a_compressed_answer_is_decoded_once_by_httpx() -> None:
    payload = b'{"text": "' + b"z" * 5000 + b'"}'
    async with wire() as w, LeanAsyncClient(transport=AiohttpTransport()) as client:
        w.routes["/gz"] = answer_with(200, gzip.compress(payload), ("Content-Encoding", "gzip"))
        response = await client.get(url(w, "/gz"))
    assert response.content == payload


async def test_a_refused_connection_is_a_connect_error_the_request_never_sent() -> None:
    async with wire() as w:
        port = w.port
    async with LeanAsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx.ConnectError):
            await client.post(f"http://127.0.0.1:{port}/x", json={})


@pytest.mark.parametrize(
    ("handler", "error"),
    [(hang_up, httpx.RemoteProtocolError), (half_body, httpx.ReadError)],
    ids=["closed without an answer", "closed mid-body"],
)
async def test_a_connection_lost_after_sending_is_never_called_unsent(
    handler: Handler, error: type[httpx.TransportError]
) -> None:
    async with wire() as w, LeanAsyncClient(transport=AiohttpTransport()) as client:
        w.routes["/x"] = handler
        with pytest.raises(error) as caught:
            await client.post(url(w, "/x"), json={"comment": 1})
    assert not isinstance(caught.value, httpx.ConnectError | httpx.ConnectTimeout)
    assert w.requests and w.requests[0][0] == "POST /x"


async def test_no_answer_within_the_read_timeout_is_a_read_timeout() -> None:
    async with wire() as w, LeanAsyncClient(transport=AiohttpTransport()) as client:
        w.routes["/slow"] = stall
        with pytest.raises(httpx.ReadTimeout):
            await client.get(url(w, "/slow"), timeout=httpx.Timeout(5.0, read=0.2))


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (aiohttp.ConnectionTimeoutError("connect"), httpx.ConnectTimeout),
        (aiohttp.SocketTimeoutError("read"), httpx.ReadTimeout),
        (TimeoutError(), httpx.ReadTimeout),
        (aiohttp.ServerDisconnectedError(), httpx.RemoteProtocolError),
        (aiohttp.ClientPayloadError("cut"), httpx.ReadError),
        (aiohttp.ClientConnectionResetError("reset"), httpx.ReadError),
        (aiohttp.NonHttpUrlClientError("ftp://x"), httpx.UnsupportedProtocol),
    ],
)
def test_each_aiohttp_failure_becomes_the_httpx_error_of_the_same_meaning(
    raised: BaseException, expected: type[httpx.TransportError]
) -> None:
    request = httpx.Request("POST", "https://api.github.com/x")
    error = _httpx_error(raised, request)
    assert type(error) is expected and error.request is request


def test_one_transport_serves_one_event_loop_after_another() -> None:
    transport = AiohttpTransport()

    async def once() -> int:
        async with wire() as w:
            w.routes["/"] = answer_with(200, b"hi")
            client = LeanAsyncClient(transport=transport)
            return (await client.get(url(w, "/"))).status_code

    assert [anyio.run(once), anyio.run(once)] == [200, 200]
    anyio.run(transport.aclose)
