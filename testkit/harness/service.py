"""End-to-end harness: `debate-bot serve` as a real subprocess, talking over
loopback HTTP to a fake GitHub and a fake model server in the test process."""

from __future__ import annotations

import copy
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.github.webhooks import sign
from testkit.fakes.github_server import FakeGitHub
from testkit.fakes.model_server import FakeModelServer

# Real GitHub payloads, copied into the repository (see tests/fixtures/SOURCES.md).
FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
CORPUS = FIXTURES / "webhooks"

APP_ID = 4242
SECRET = "whsec-test-" + uuid.uuid4().hex
REPO = "Codertocat/Hello-World"
INSTALLATION = 1


def rsa_keypair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def corpus(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((CORPUS / f"{name}.json").read_text())
    return doc


def set_path(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = doc
    for p in parents:
        node = node[p]
    node[leaf] = value


def delivery(name: str, **fields: Any) -> dict[str, Any]:
    """A corpus payload with fields replaced: delivery('x', **{'comment.body': '/debate'})."""
    doc = copy.deepcopy(corpus(name))
    for dotted, value in fields.items():
        set_path(doc, dotted.replace("__", "."), value)
    return doc


class Service:
    """One `debate-bot serve` process."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.log_path = log_path
        self.port = int(env["DEBATE_BOT_PORT"])
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, command: str = "serve") -> Service:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", command], env=self.env, stdout=log, stderr=log
        )
        if command == "worker" and "DEBATE_BOT_WORKER_PORT" in self.env:
            self.port = int(self.env["DEBATE_BOT_WORKER_PORT"])  # its probe and metrics port
            self.url = f"http://127.0.0.1:{self.port}"
        elif command == "worker":  # no HTTP to poll: give it a moment, then check it lives
            time.sleep(0.5)
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log_path.read_text()[-3000:]}")
            return self
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited: {self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("service did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.proc = None


class Harness:
    def __init__(
        self, tmp: Path, github: FakeGitHub, models: FakeModelServer, private_key: str
    ) -> None:
        self.tmp = tmp
        self.github = github
        self.models = models
        self.db_url = f"sqlite:///{tmp / 'bot.db'}"
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("DEBATE_BOT_", "OPENAI", "ANTHROPIC"))
            },
            "DEBATE_BOT_APP_ID": str(APP_ID),
            "DEBATE_BOT_PRIVATE_KEY": private_key,
            "DEBATE_BOT_WEBHOOK_SECRET": SECRET,
            "DEBATE_BOT_GITHUB_API_URL": github.api_url,
            "DEBATE_BOT_DATABASE_URL": self.db_url,
            "DEBATE_BOT_PORT": str(free_port()),
            "DEBATE_BOT_DEFAULT_MODEL": "openai/gpt-4.1-mini",
            "DEBATE_BOT_DEFAULT_MODELS": '["openai/gpt-4.1-mini","anthropic/claude-sonnet-4-5"]',
            "DEBATE_BOT_GITHUB_WRITE_INTERVAL_S": "0",
            "DEBATE_BOT_GITHUB_MAX_RETRY_WAIT_S": "2",
            "DEBATE_BOT_MODEL_MAX_RETRY_WAIT_S": "0.2",
            "DEBATE_BOT_WORKER_POLL_S": "0.1",
            "DEBATE_BOT_LEASE_S": "3",
            # The periodic passes (scheduled-review discovery, redelivery) are off
            # unless a test turns them on: they are not per-debate traffic.
            "DEBATE_BOT_SCHEDULE_POLL_S": "0",
            "DEBATE_BOT_REDELIVER_INTERVAL_S": "0",
            # A test's teardown SIGTERM drains for at most this long (Service.stop waits 10 s).
            "DEBATE_BOT_SHUTDOWN_GRACE_S": "5",
            "DEBATE_BOT_LOG_LEVEL": "INFO",
            "OPENAI_API_KEY": "sk-test-openai",
            "OPENAI_BASE_URL": models.openai_base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": models.anthropic_base_url,
        }
        self.service: Service | None = None

    def start(self, **env: str) -> Service:
        self.service = Service({**self.env, **env}, self.tmp / "service.log").start()
        return self.service

    def post(
        self,
        event: str,
        payload: dict[str, Any] | bytes,
        *,
        delivery_id: str | None = None,
        secret: str = SECRET,
    ) -> httpx.Response:
        assert self.service is not None
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(secret.encode(), body),
            "Content-Type": "application/json",
        }
        return httpx.post(self.service.url + "/api/github/webhooks", content=body, headers=headers)

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        log = (
            (self.tmp / "service.log").read_text()[-4000:]
            if (self.tmp / "service.log").exists()
            else ""
        )
        raise AssertionError(
            f"timed out waiting for {what or predicate}\n--- service log ---\n{log}"
        )

    def stop(self) -> None:
        if self.service is not None:
            self.service.stop()


def run_rows(h: Harness) -> list[dict[str, Any]]:
    """The service's runs, oldest first, read straight from its SQLite file."""
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        db.row_factory = sqlite3.Row
        return [
            dict(r)
            for r in db.execute(
                "select id, repo, issue_number, state, outcome_kind from runs order by created_at"
            )
        ]


def all_finished(h: Harness, n: int) -> bool:
    """At least ``n`` runs exist and none is still active."""
    rs = run_rows(h)
    return len(rs) >= n and all(r["state"] in ("done", "failed", "aborted") for r in rs)
