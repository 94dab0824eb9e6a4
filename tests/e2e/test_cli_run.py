"""`debate-bot run` as a real process against the loopback fake model server
(split from tests/unit/test_cli.py, which drives the same CLI in-process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from testkit.fakes.model_server import FakeModelServer
from testkit.harness.cli import repo as repo
from testkit.harness.cli import server as server

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


def bot_run(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`debate-bot run ARGS` as a process in ``repo`` with ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "bot", "run", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_subprocess_run(repo: Path, server: FakeModelServer) -> None:
    write_docs(repo)
    (repo / "plan.md").write_text(f"---\nrounds: 1\n---\n{PLAN_BODY}")
    env = dict(os.environ)  # the fixtures' settings, as a user's shell would hold them
    proc = bot_run(repo, env, "plan.md")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    text = (repo / lines[0]).read_text()
    assert "**Mode:** critique" in text and "[CONDENSED]" not in text
    assert "▸ synthesis" in proc.stderr
    assert server.requests

    (repo / "bad.md").write_bytes(b"\x00\x01")
    proc = bot_run(repo, env, "bad.md")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: bad.md: looks like a binary file")
    assert "Traceback" not in proc.stderr


def test_a_dry_run_needs_no_key_and_no_model(repo: Path) -> None:
    """With no provider key and no model configured, a dry run plans with the
    stand-in model and its price, bounded by what the checkout holds."""
    (repo / "q.md").write_text("# Should we use gRPC or REST for the billing API?\n")
    (repo / "src").mkdir()
    (repo / "src" / "api.py").write_text("def handler(request):\n    return route(request)\n" * 20)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_", "DEBATE_BOT_"))
    }
    proc = bot_run(repo, env, "q.md", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Warning: no model is configured: planned with openai/gpt-4.1-mini" in out
    m = re.search(r"Estimated cost: ~\$([0-9.]+), up to \$([0-9.]+)", out)
    assert m is not None and 0 < float(m[1]) <= float(m[2]), out
    assert "its first round $" in out and "the prior" in out
    assert "the repository holds" in out  # tool reads bounded by the checkout
    assert "No price is known" not in out
    # A model with no price: planned all the same, and said so.
    proc = bot_run(repo, env, "q.md", "--dry-run", "--model", "local/llama")
    assert proc.returncode == 0, proc.stderr
    assert "No price is known for local/llama: counted as $0 here" in proc.stdout
