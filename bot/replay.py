"""`debate-bot replay`: sign a payload file as GitHub would and post it to a
running service, for trying triggers locally without GitHub."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

from bot.app.webhook import known_events, local_webhook_url
from bot.config import Settings
from bot.errors import ConfigError
from bot.github.webhooks import SIGNATURE_HEADER, sign
from bot.worker.triggers import build_router


@dataclass(frozen=True)
class ReplayResult:
    status: int
    delivery_id: str
    body: str


def read_payload(file: Path, event: str) -> bytes:
    """The file's exact bytes (GitHub signs the raw body), checked to be a JSON object."""
    known = known_events(build_router().delivery_filter())
    if event not in known:  # anything else is almost surely a typo
        raise ConfigError(f"unknown event {event!r}; one of: {', '.join(sorted(known))}")
    try:
        body = file.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot be read ({exc.strerror})") from None
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{file}: a webhook payload is a JSON object")
    return body


def replay(
    settings: Settings, file: Path, event: str, url: str | None = None, *, timeout_s: float = 10.0
) -> ReplayResult:
    """Post ``file`` as one delivery of ``event``. ``httpx.HTTPError`` when unreachable."""
    if settings.webhook_secret is None:
        raise ConfigError("set DEBATE_BOT_WEBHOOK_SECRET (the secret the service verifies with)")
    body = read_payload(file, event)
    secret = settings.webhook_secret.get_secret_value().encode()
    delivery_id = str(uuid.uuid4())
    response = httpx.post(
        url or local_webhook_url(settings),
        content=body,
        headers={
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/debate-bot-replay",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id,
            SIGNATURE_HEADER: sign(secret, body),
        },
        timeout=timeout_s,
    )
    return ReplayResult(response.status_code, delivery_id, response.text)
