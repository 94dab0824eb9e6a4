"""The model gateway (bot/models/agents/gateway.py) over its real unix socket,
forwarding to a loopback fake upstream that speaks the providers' streaming
formats (testkit/fakes/agent_upstream.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import httpx
import pytest

from bot.engine.types import Usage
from bot.models.agents.gateway import Gateway, GatewayCall, Purse, TurnAccount, Upstream
from testkit.fakes.agent_upstream import AgentScript, FakeAgentUpstream, Fault

TOKEN = "turn-token-123"
KEY = "sk-real-upstream-key"
ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 100,
    "stream": True,
    "metadata": {"user_id": "session-a"},
    "messages": [{"role": "user", "content": "hello"}],
}


def _price(model: str, usage: Usage) -> Usage:
    """A dollar per input and ten per output token: every figure is visible."""
    return replace(usage, cost_usd=usage.input_tokens + 10 * usage.output_tokens)


class Log:
    def __init__(self, stored: list[GatewayCall] | None = None) -> None:
        self.calls = list(stored or [])

    async def load(self) -> list[GatewayCall]:
        return list(self.calls)

    async def save(self, call: GatewayCall) -> None:
        self.calls.append(call)


@pytest.fixture
def upstream() -> Iterator[FakeAgentUpstream]:
    with FakeAgentUpstream(script=AgentScript(files=()), api_key=KEY) as fake:
        yield fake


def _gateway(tmp_path: Path, fake: FakeAgentUpstream, client: httpx.AsyncClient, *,
             log: Log | None = None, purse: Purse | None = None, max_calls: int = 5,
             ) -> tuple[Gateway, TurnAccount]:  # fmt: skip
    account = TurnAccount(TOKEN, max_calls=max_calls, purse=purse or Purse(None))
    gateway = Gateway(
        socket_path=tmp_path / "gw.sock",
        upstream=Upstream("anthropic", fake.url, KEY),
        account=account,
        client=client,
        charge=_price,
        log_calls=log,
        share=None,
    )
    return gateway, account


async def _post(tmp_path: Path, body: dict[str, object], token: str = TOKEN) -> httpx.Response:
    transport = httpx.AsyncHTTPTransport(uds=str(tmp_path / "gw.sock"))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as cli:
        return await cli.post(
            "/v1/messages?beta=true",
            json=body,
            headers={"x-api-key": token, "anthropic-version": "2023-06-01",
                     "anthropic-beta": "tools-2024", "x-stainless-os": "Linux"},
        )  # fmt: skip


async def test_a_call_goes_upstream_with_the_real_key_and_is_priced(
    tmp_path: Path, upstream: FakeAgentUpstream
) -> None:
    log = Log()
    async with httpx.AsyncClient() as client:
        gateway, account = _gateway(tmp_path, upstream, client, log=log)
        async with gateway:
            answer = await _post(tmp_path, ANTHROPIC_BODY)
    assert answer.status_code == 200
    assert "event: message_stop" in answer.text  # the stream, relayed as it came
    (seen,) = upstream.requests
    assert seen.auth == KEY  # the real key upstream; the turn's token never leaves
    assert TOKEN not in json.dumps(seen.headers)
    assert seen.headers["anthropic-beta"] == "tools-2024"
    assert "x-stainless-os" not in seen.headers  # only the protocol's headers
    assert account.calls == 1 and account.usage.input_tokens == 120
    assert account.usage.cost_usd == 120 + 10 * 12  # from the upstream's usage
    assert account.models == ["anthropic/claude-sonnet-4-5"]
    assert [c.n for c in log.calls] == [0] and log.calls[0].body == answer.text


async def test_a_wrong_token_is_refused_before_anything_goes_upstream(
    tmp_path: Path, upstream: FakeAgentUpstream
) -> None:
    async with httpx.AsyncClient() as client:
        gateway, account = _gateway(tmp_path, upstream, client)
        async with gateway:
            answer = await _post(tmp_path, ANTHROPIC_BODY, token=KEY)
    assert answer.status_code == 401
    assert upstream.requests == [] and account.calls == 0


async def test_a_repeated_call_is_answered_from_the_log_and_not_paid_again(
    tmp_path: Path, upstream: FakeAgentUpstream
) -> None:
    log = Log()
    async with httpx.AsyncClient() as client:
        first, _ = _gateway(tmp_path, upstream, client, log=log)
        async with first:
            paid = await _post(tmp_path, ANTHROPIC_BODY)
        # The re-run after a crash: a new session id, the same request otherwise.
        again = {**ANTHROPIC_BODY, "metadata": {"user_id": "session-b"}}
        second, account = _gateway(tmp_path, upstream, client, log=log)
        async with second:
            replayed = await _post(tmp_path, again)
            fresh = await _post(tmp_path, {**again, "max_tokens": 7})
    assert replayed.status_code == 200 and replayed.text == paid.text
    assert len(upstream.requests) == 2  # the first call and the new one, nothing twice
    assert account.replayed == 1 and account.calls == 2
    assert fresh.status_code == 200 and [c.n for c in log.calls] == [0, 1]


async def test_the_run_cap_refuses_calls_once_reached(
    tmp_path: Path, upstream: FakeAgentUpstream
) -> None:
    purse = Purse(cap_usd=200.0, spent_usd=0.0)
    async with httpx.AsyncClient() as client:
        gateway, account = _gateway(tmp_path, upstream, client, purse=purse)
        async with gateway:
            first = await _post(tmp_path, ANTHROPIC_BODY)  # costs 240: past the cap
            second = await _post(tmp_path, {**ANTHROPIC_BODY, "max_tokens": 9})
    assert first.status_code == 200 and second.status_code == 429
    assert account.refused == "agent_budget" and purse.spent_usd == 240
    assert len(upstream.requests) == 1


async def test_the_turns_call_budget_is_counted_here(
    tmp_path: Path, upstream: FakeAgentUpstream
) -> None:
    async with httpx.AsyncClient() as client:
        gateway, account = _gateway(tmp_path, upstream, client, max_calls=2)
        async with gateway:
            codes = [
                (await _post(tmp_path, {**ANTHROPIC_BODY, "max_tokens": n})).status_code
                for n in (1, 2, 3)
            ]
    assert codes == [200, 200, 429]
    assert account.refused == "agent_protocol" and len(upstream.requests) == 2


@pytest.mark.parametrize(("fault", "status"), [(Fault.unauthorized(), 401),
                                               (Fault.rate_limited(), 429)])  # fmt: skip
async def test_an_upstream_refusal_is_relayed_and_remembered(
    tmp_path: Path, upstream: FakeAgentUpstream, fault: Fault, status: int
) -> None:
    upstream.add_faults(fault)
    log = Log()
    async with httpx.AsyncClient() as client:
        gateway, account = _gateway(tmp_path, upstream, client, log=log)
        async with gateway:
            answer = await _post(tmp_path, ANTHROPIC_BODY)
    assert answer.status_code == status
    assert account.upstream_status == status and account.usage.cost_usd == 0
    assert log.calls == []  # a refusal is not an answer to replay


async def test_what_is_not_a_model_call_is_refused(
    tmp_path: Path, upstream: FakeAgentUpstream
) -> None:
    transport = httpx.AsyncHTTPTransport(uds=str(tmp_path / "gw.sock"))
    async with httpx.AsyncClient() as client:
        gateway, _ = _gateway(tmp_path, upstream, client)
        async with gateway, httpx.AsyncClient(transport=transport, base_url="http://gw") as cli:
            probe = await cli.head("/api/hello", headers={"x-api-key": TOKEN})
            other = await cli.post("/v1/files", json={}, headers={"x-api-key": TOKEN})
            bad = await cli.post("/v1/messages", content=b"{", headers={"x-api-key": TOKEN})
    assert (probe.status_code, other.status_code, bad.status_code) == (404, 404, 400)
    assert upstream.requests == []


async def test_a_rerun_asking_in_another_order_gets_each_stored_answer(
    tmp_path: Path, upstream: FakeAgentUpstream
) -> None:
    """A CLI's parallel calls may come in another order the second time: the
    stored answer is found by its request, not by its place."""
    log = Log()
    first_body = {**ANTHROPIC_BODY, "max_tokens": 11}
    second_body = {**ANTHROPIC_BODY, "max_tokens": 22}
    async with httpx.AsyncClient() as client:
        before, _ = _gateway(tmp_path, upstream, client, log=log)
        async with before:
            a = await _post(tmp_path, first_body)
            b = await _post(tmp_path, second_body)
        again, account = _gateway(tmp_path, upstream, client, log=log)
        async with again:
            b2 = await _post(tmp_path, second_body)
            a2 = await _post(tmp_path, first_body)
            new = await _post(tmp_path, {**ANTHROPIC_BODY, "max_tokens": 33})
    assert (a2.text, b2.text) == (a.text, b.text)
    assert account.replayed == 2 and len(upstream.requests) == 3
    assert [c.n for c in log.calls] == [0, 1, 2]  # the new call stored after the old ones
    assert new.status_code == 200


async def test_an_unpriced_model_is_refused_when_the_run_has_a_cap(
    tmp_path: Path, upstream: FakeAgentUpstream
) -> None:
    def unpriced(model: str, usage: Usage) -> Usage:
        return replace(usage, cost_usd=0.0, price_basis="unknown")

    async with httpx.AsyncClient() as client:
        gateway, account = _gateway(tmp_path, upstream, client, purse=Purse(cap_usd=5.0))
        gateway.charge = unpriced
        async with gateway:
            answer = await _post(tmp_path, ANTHROPIC_BODY)
    assert answer.status_code == 403 and upstream.requests == []
    assert account.refused == "agent_budget"


async def test_a_cli_gone_mid_answer_still_pays_for_what_came(
    tmp_path: Path, upstream: FakeAgentUpstream
) -> None:
    """A turn killed while an answer streams: the answer is read to its end,
    priced and stored; the gateway does not stop counting because the CLI did."""
    upstream.latency_s = 0.5
    log = Log()
    async with httpx.AsyncClient() as client:
        gateway, account = _gateway(tmp_path, upstream, client, log=log)
        async with gateway:
            transport = httpx.AsyncHTTPTransport(uds=str(tmp_path / "gw.sock"))
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as cli:
                with pytest.raises(httpx.ReadTimeout):
                    await cli.post("/v1/messages", json=ANTHROPIC_BODY,
                                   headers={"x-api-key": TOKEN}, timeout=0.1)  # fmt: skip
            for _ in range(100):  # the handler finishes on its own
                if account.usage.cost_usd:
                    break
                await anyio.sleep(0.05)
    assert account.usage.cost_usd == 120 + 10 * 12 and len(log.calls) == 1
