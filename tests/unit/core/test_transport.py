"""bot/core/transport.py: the aiohttp transport speaks HTTP/1.1 to a real loopback
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

from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.core.transport import AiohttpTransport, LeanAsyncClient, _httpx_error
from bot.github.gateway import GitHubGateway
from bot.models.router import ModelRouter


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


# -- proxies from the environment ------------------------------------------------


def tunnel(host: str, port: int) -> Handler:
    """A CONNECT proxy's answer: 200, then bytes relayed both ways until a side closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, port)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while chunk := await src.read(65536):
                dst.write(chunk)
                await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    return handle


def self_signed(tmp_path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_file), str(key_file)


async def test_http_proxy_carries_plain_requests_with_its_credentials(monkeypatch) -> None:
    async with wire() as target, wire() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://bot%40corp:s3cret@127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        absolute = url(target, "/data")
        proxy.routes[absolute] = answer_with(200, b"via the proxy")
        async with LeanAsyncClient(transport=AiohttpTransport()) as client:
            response = await client.get(absolute, headers={"Authorization": "token t"})

    assert response.text == "via the proxy" and not target.requests
    ((line, headers, _),) = proxy.requests
    assert line == f"GET {absolute}"  # absolute form: the proxy forwards it
    assert headers["proxy-authorization"] == aiohttp.encode_basic_auth("bot@corp", "s3cret")
    assert headers["authorization"] == "token t"


async def test_https_goes_through_a_connect_tunnel_and_tls_still_verifies(
    monkeypatch, tmp_path
) -> None:
    import ssl

    cert, key = self_signed(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    target = Wire()
    server = await asyncio.start_server(target._serve, "127.0.0.1", 0, ssl=served)
    target.port = server.sockets[0].getsockname()[1]
    target.routes["/secure"] = answer_with(200, b"end to end")
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with server, wire() as proxy:
        proxy.routes[f"127.0.0.1:{target.port}"] = tunnel("127.0.0.1", target.port)
        monkeypatch.setenv("HTTPS_PROXY", f"u:p@127.0.0.1:{proxy.port}")  # no scheme: http://
        async with LeanAsyncClient(transport=AiohttpTransport()) as client:
            response = await client.post(f"https://127.0.0.1:{target.port}/secure", json={})

    assert response.text == "end to end"
    ((line, headers, _),) = proxy.requests
    assert line == f"CONNECT 127.0.0.1:{target.port}"
    assert headers["proxy-authorization"] == aiohttp.encode_basic_auth("u", "p")
    ((line, headers, _),) = target.requests  # inside the tunnel
    assert line == "POST /secure" and "proxy-authorization" not in headers


async def test_no_proxy_hosts_are_reached_directly(monkeypatch) -> None:
    async with wire() as target, wire() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        target.routes["/data"] = answer_with(200, b"direct")
        async with LeanAsyncClient(transport=AiohttpTransport()) as client:
            response = await client.get(url(target, "/data"))
    assert response.text == "direct" and not proxy.requests


async def test_an_unreachable_proxy_is_a_proxy_error(monkeypatch) -> None:
    async with wire() as gone:
        port = gone.port
    monkeypatch.setenv("HTTPS_PROXY", f"http://user:hunter2@127.0.0.1:{port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with LeanAsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx.ProxyError) as caught:
            await client.get("https://api.github.com/zen")
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "value",
    [
        "socks5://127.0.0.1:1080",
        "https://proxy.corp:8443",
        "http://u:hunter2@proxy.corp:port",
        "http://",
    ],
)
def test_a_proxy_aiohttp_cannot_tunnel_through_is_refused_at_start(monkeypatch, value) -> None:
    monkeypatch.setenv("HTTPS_PROXY", value)
    with pytest.raises(
        ConfigError, match="HTTPS_PROXY must be http://host:port or http://user:password@host"
    ) as caught:
        AiohttpTransport()
    assert "hunter2" not in str(caught.value)
