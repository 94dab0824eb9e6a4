"""The webhook route over real HTTP (uvicorn on loopback), without a worker."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from pydantic import SecretStr

from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.github.webhooks import sign
from bot.service.features.declared import DELIVERY_FILTER
from bot.service.web.main import create_app, front_page
from bot.store import RunStore
from testkit.fakes import serving
from testkit.harness.service import delivery

SECRET = "route-secret-" + uuid.uuid4().hex


def serve(app: object) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", lifespan="off")  # type: ignore[arg-type]
    server = serving.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def route(tmp_path: Path) -> Iterator[tuple[str, RunStore]]:
    store = RunStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    settings = Settings(webhook_secret=SecretStr(SECRET), max_webhook_bytes=64 * 1024)
    server, thread, url = serve(create_app(settings, store, Metrics(), deliveries=DELIVERY_FILTER))
    yield url, store
    server.should_exit = True
    thread.join(timeout=10)
    store.dispose()


def post(url: str, event: str, body: bytes, *, secret: str = SECRET, **headers: str):
    h = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": headers.pop("delivery", str(uuid.uuid4())),
        "X-Hub-Signature-256": sign(secret.encode(), body),
        **headers,
    }
    return httpx.post(url + "/api/github/webhooks", content=body, headers=h)


def command_payload(**fields: object) -> bytes:
    doc = delivery(
        "issue_comment.created.with-installation", **{"comment.body": "/debate", **fields}
    )
    return json.dumps(doc).encode()


def test_signature_and_headers(route) -> None:
    url, _ = route
    body = command_payload()
    assert post(url, "issue_comment", body, secret="wrong").status_code == 401
    unsigned = httpx.post(
        url + "/api/github/webhooks",
        content=body,
        headers={"X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": "x"},
    )
    assert unsigned.status_code == 401
    assert post(url, "issue_comment", body).json()["status"] == "queued"
    r = httpx.post(
        url + "/api/github/webhooks",
        content=body,
        headers={
            "X-GitHub-Event": "issue_comment",
            "X-Hub-Signature-256": sign(SECRET.encode(), body),
        },
    )
    assert r.status_code == 400 and "X-GitHub-Delivery" in r.json()["reason"]


def test_malformed_bodies_get_400_with_a_reason(route) -> None:
    url, store = route
    assert post(url, "issue_comment", b"{nope").status_code == 400
    assert post(url, "issue_comment", b"[1, 2]").json()["reason"] == "body is not a JSON object"
    assert post(url, "issue_comment", '{"x": "\xff"}'.encode("latin-1")).status_code == 400
    doc = json.loads(command_payload())
    del doc["issue"]
    r = post(url, "issue_comment", json.dumps(doc).encode())
    assert r.status_code == 400 and "issue" in r.json()["reason"]
    odd = json.loads(command_payload())
    odd["comment"] = "not an object"
    assert post(url, "issue_comment", json.dumps(odd).encode()).json()["status"] == "ignored"
    assert store.delivery_counts_by_state()["pending"] == 0


def test_oversized_body_is_413_before_reading(route) -> None:
    url, _ = route
    r = post(url, "issue_comment", b"{" + b" " * (70 * 1024) + b"}")
    assert r.status_code == 413


def test_duplicates_and_ignored_events(route) -> None:
    url, store = route
    body = command_payload()
    assert post(url, "issue_comment", body, delivery="same").json()["status"] == "queued"
    assert post(url, "issue_comment", body, delivery="same").json()["status"] == "duplicate"
    plain = command_payload(**{"comment.body": "thanks!"})
    assert post(url, "issue_comment", plain).json() == {
        "status": "ignored",
        "reason": "not a command",
    }
    ping = json.dumps(delivery("ping")).encode()
    assert post(url, "ping", ping).json()["status"] == "ignored"
    assert store.delivery_counts_by_state()["pending"] == 1


def test_rejected_headers_cannot_grow_metrics(route) -> None:
    url, _ = route
    for i in range(20):
        post(url, f"made-up-{i}", b"{}", secret="wrong")
    metrics = httpx.get(url + "/metrics").text
    assert "made-up" not in metrics
    assert 'debate_bot_deliveries_total{event="other",result="rejected_401"} 20.0' in metrics


def test_no_secret_refuses_webhooks_but_serves_health(tmp_path: Path) -> None:
    store = RunStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    server, thread, url = serve(
        create_app(Settings(), store, Metrics(), deliveries=DELIVERY_FILTER)
    )
    try:
        r = post(url, "issue_comment", command_payload())
        assert r.status_code == 503 and "DEBATE_BOT_WEBHOOK_SECRET" in r.json()["reason"]
        assert httpx.get(url + "/healthz").status_code == 200
        assert httpx.get(url + "/readyz").json() == {"status": "ready"}
        front = httpx.get(url + "/")
        assert front.status_code == 200
        assert "No GitHub App is configured" in front.text and "debate-bot setup" in front.text
        for name in ("DEBATE_BOT_WEBHOOK_SECRET", "DEBATE_BOT_APP_ID", "DEBATE_BOT_PRIVATE_KEY"):
            assert name in front.text
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        store.dispose()


def test_front_page_names_what_is_missing_never_values(route) -> None:
    url, _ = route
    text = httpx.get(url + "/").text
    assert "DEBATE_BOT_APP_ID" in text and "DEBATE_BOT_WEBHOOK_SECRET" not in text
    assert SECRET not in text


def test_front_page_of_a_configured_app_is_one_line() -> None:
    settings = Settings(
        webhook_secret=SecretStr(SECRET), app_id=7, private_key=SecretStr("-----BEGIN…")
    )
    text = front_page(settings)
    assert text.startswith("debate-bot ") and "/api/github/webhooks" in text
    assert "missing" not in text and SECRET not in text
