"""Fixtures of the local CLI's tests (in-process and as a subprocess): a
checkout as the current directory, and the fake model server as its providers."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.fakes.model_server import FakeModelServer


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty repository as the current directory, with no model settings."""
    # Fast retries; Retry-After "0" from the fake server is honoured as is.
    monkeypatch.setenv("DEBATE_BOT_MODEL_MAX_RETRY_WAIT_S", "0.05")
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    return tmp_path


@pytest.fixture
def server(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    """The fake model server behind both providers' variables, with fresh keys."""
    openai_key = "test-openai-" + secrets.token_hex(8)
    anthropic_key = "test-anthropic-" + secrets.token_hex(8)
    with FakeModelServer(openai_api_key=openai_key, anthropic_api_key=anthropic_key) as fake:
        monkeypatch.setenv("OPENAI_API_KEY", openai_key)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", anthropic_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_base_url)
        monkeypatch.setenv("DEBATE_BOT_DEFAULT_MODEL", "openai/judge-model")
        yield fake
