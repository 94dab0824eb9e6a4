"""bot/transport.py's client keeps httpx's cookie behaviour while skipping the
cookie jar for answers that set no cookie."""

from __future__ import annotations

import anyio
import httpx
from pydantic import SecretStr

from bot.config import Settings
from bot.github.gateway import GitHubGateway
from bot.llm.router import ModelRouter
from bot.transport import LeanAsyncClient


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
