"""Webhooks on a laptop: follow a smee.io-style channel (server-sent events) and
post each forwarded delivery to this service's own webhook route, so it goes
through exactly the signature check, dedupe and persistence of a direct POST.

Development only, and only when ``DEBATE_BOT_WEBHOOK_PROXY_URL`` is set.
A channel event's data is a JSON object: the delivery's headers (lower-cased),
``body`` (the parsed payload) and optionally ``rawBody`` (the exact bytes,
which the signature covers); ``query`` and ``timestamp`` are not headers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import httpx

from bot.core.logs import get_logger

log = get_logger(__name__)

NOT_HEADERS = frozenset({"body", "rawbody", "query", "timestamp", "host", "content-length"})
MAX_BACKOFF_S = 30.0


async def events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) of each server-sent event in the stream."""
    name, data = "message", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
        elif line.startswith(":"):
            continue  # a comment: keep-alive
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)


def delivery_of(data: str) -> tuple[dict[str, str], bytes] | None:
    """The headers and body bytes a forwarded delivery carries, or None."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if not isinstance(doc, dict) or "body" not in doc:
        return None
    raw = doc.get("rawBody")
    if isinstance(raw, str):
        body = raw.encode()
    else:  # what smee relays without raw bytes: compact JSON, as GitHub sends it
        body = json.dumps(doc["body"], separators=(",", ":"), ensure_ascii=False).encode()
    headers = {
        k: str(v) for k, v in doc.items() if k.lower() not in NOT_HEADERS and isinstance(v, str)
    }
    return headers, body


async def forward(client: httpx.AsyncClient, channel: str, target: str) -> int:
    """Follow the channel once, until it closes; returns the deliveries forwarded."""
    forwarded = 0
    async with client.stream("GET", channel, headers={"Accept": "text/event-stream"}) as stream:
        stream.raise_for_status()
        log.info("proxy.connected")
        async for name, data in events(stream):
            if name != "message":
                continue  # ready, ping
            delivery = delivery_of(data)
            if delivery is None:
                log.warning("proxy.unreadable_event")
                continue
            headers, body = delivery
            answer = await client.post(target, content=body, headers=headers)
            forwarded += 1
            log.info(
                "proxy.forwarded",
                delivery=headers.get("x-github-delivery"),
                status=answer.status_code,
            )
    return forwarded


async def follow_channel(channel: str, target: str) -> None:
    """Forward deliveries forever, reconnecting with backoff (1 s doubling to 30 s,
    reset after a connection that worked)."""
    backoff = 1.0
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as client:
        while True:
            try:
                await forward(client, channel, target)
                backoff = 1.0
            except httpx.HTTPError as exc:
                log.warning("proxy.disconnected", error=type(exc).__name__, retry_in_s=backoff)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
