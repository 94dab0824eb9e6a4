"""`debate-bot run` as a real process against the loopback fake model server
(split from tests/unit/test_cli.py, which drives the same CLI in-process)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.fakes.model_server import FakeModelServer

PLAN_BODY = """\
# Migrate session storage to Redis

We plan to move user sessions from the PostgreSQL table to a Redis cluster to cut
login latency. The migration runs in three phases: dual-write for one week, then
read from Redis with a fallback to PostgreSQL, then drop the table. Rollback is a
config flag. The current code is in @docs/small.md and the runbook in @docs/big.md;
the old design note @docs/missing.md is referenced too.

## Dual write

Both stores receive every session write for a week while we compare reads.

## Cut over

Reads go to Redis with a PostgreSQL fallback, then the table is dropped.
"""

SMALL = "def load(session_id):\n    return redis.get(session_id)\n"


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
    openai_key = "test-openai-" + secrets.token_hex(8)
    anthropic_key = "test-anthropic-" + secrets.token_hex(8)
    with FakeModelServer(openai_api_key=openai_key, anthropic_api_key=anthropic_key) as fake:
        monkeypatch.setenv("OPENAI_API_KEY", openai_key)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", anthropic_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_base_url)
        monkeypatch.setenv("DEBATE_BOT_DEFAULT_MODEL", "openai/judge-model")
        yield fake


def write_docs(repo: Path) -> None:
    docs = repo / "docs"
    docs.mkdir()
    (docs / "small.md").write_text(SMALL)
    sections = [
        f"## Section {i}\n\n" + ("filler text about unrelated matters. " * 25) + "\n"
        for i in range(6)
    ]
    sections[3] = "## Redis session rollback\n\nRedis session migration rollback steps.\n\n"
    (docs / "big.md").write_text("".join(sections))


# --- the real process ---------------------------------------------------------------------


def test_subprocess_run(repo: Path, server: FakeModelServer) -> None:
    write_docs(repo)
    (repo / "plan.md").write_text(f"---\nrounds: 1\n---\n{PLAN_BODY}")
    env = dict(os.environ)  # the fixtures' settings, as a user's shell would hold them
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "run", "plan.md"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    text = (repo / lines[0]).read_text()
    assert "**Mode:** critique" in text and "[CONDENSED]" not in text
    assert "▸ synthesis" in proc.stderr
    assert server.requests

    (repo / "bad.md").write_bytes(b"\x00\x01")
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "run", "bad.md"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: bad.md: looks like a binary file")
    assert "Traceback" not in proc.stderr
