"""The webhook route: verify, cheap pre-filter, dedupe, persist, answer 202.

Everything slow (permission checks, repo config, GitHub replies) happens in the
worker; the route only touches the request and one INSERT.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from bot.app.ingest import DeliveryWriter
from bot.app.metrics import Metrics
from bot.config import Settings
from bot.errors import StoreError, WebhookError
from bot.github.webhooks import verify_signature
from bot.logs import get_logger
from bot.store import NewDelivery

log = get_logger(__name__)

# Event/action pairs the worker can act on; everything else is acknowledged and dropped.
HANDLED: dict[str, frozenset[str]] = {
    "issue_comment": frozenset({"created"}),
    "issues": frozenset({"labeled"}),
    "pull_request": frozenset({"labeled", "synchronize", "opened"}),
    "pull_request_review_comment": frozenset({"created"}),
}


def _reply(status: int, result: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"status": result, **extra}, status_code=status)


def _ignore_reason(event: str, payload: dict[str, Any]) -> str | None:
    """Why a delivery needs no work, judged from fields that don't depend on repo config."""
    action = payload.get("action")
    if action not in HANDLED.get(event, frozenset()):
        return "event"
    sender = payload.get("sender") or {}
    if isinstance(sender, dict) and sender.get("type") == "Bot":
        return "bot sender"
    if event in ("issue_comment", "pull_request_review_comment"):
        body = ((payload.get("comment") or {}).get("body") or "").lstrip()
        if not body.startswith("/"):
            return "not a command"
    if not isinstance((payload.get("installation") or {}).get("id"), int):
        return "no installation"
    return None


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise WebhookError(f"payload larger than {limit} bytes", status=413)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise WebhookError(f"payload larger than {limit} bytes", status=413)
        chunks.append(chunk)
    return b"".join(chunks)


def webhook_router(
    settings: Settings, writer: DeliveryWriter, metrics: Metrics, wake: Callable[[], None]
) -> APIRouter:
    router = APIRouter()
    secret = (
        settings.webhook_secret.get_secret_value().encode() if settings.webhook_secret else None
    )

    @router.post("/api/github/webhooks")
    async def receive(request: Request) -> JSONResponse:
        event = request.headers.get("x-github-event", "")
        try:
            if secret is None:
                raise WebhookError(
                    "webhooks are refused: DEBATE_BOT_WEBHOOK_SECRET is not set", status=503
                )
            body = await _read_body(request, settings.max_webhook_bytes)
            verify_signature(secret, body, request.headers.get("x-hub-signature-256"))
            delivery = request.headers.get("x-github-delivery", "").strip()
            if not event or not delivery or len(delivery) > 100:
                raise WebhookError("missing X-GitHub-Event or X-GitHub-Delivery header")
            try:
                text = body.decode("utf-8")
                payload = orjson.loads(body)  # ~2.5x json.loads on a 16 KB delivery
            except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
                raise WebhookError("body is not valid UTF-8 JSON") from exc
            if not isinstance(payload, dict):
                raise WebhookError("body is not a JSON object")
        except WebhookError as exc:
            metrics.deliveries.labels(event or "-", f"rejected_{exc.status}").inc()
            log.info("webhook.rejected", gh_event=event, status=exc.status, reason=exc.public)
            return _reply(exc.status, "rejected", reason=exc.public)

        reason = _ignore_reason(event, payload)
        if reason is not None:
            metrics.deliveries.labels(event, "ignored").inc()
            return _reply(202, "ignored", reason=reason)

        try:
            inserted = await writer.record(
                NewDelivery(
                    delivery,
                    event,
                    str(payload.get("action") or ""),
                    int(payload["installation"]["id"]),
                    text,
                )
            )
        except StoreError:
            metrics.deliveries.labels(event, "store_error").inc()
            return _reply(503, "rejected", reason="the delivery store is unavailable; retry")
        if not inserted:
            metrics.deliveries.labels(event, "duplicate").inc()
            return _reply(202, "duplicate")
        metrics.deliveries.labels(event, "queued").inc()
        log.debug(
            "webhook.queued",
            delivery=delivery,
            gh_event=event,
            installation=payload["installation"]["id"],
        )
        wake()
        return _reply(202, "queued")

    return router
