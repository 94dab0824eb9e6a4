"""`debate-bot run` with agent seats: the checkout's tracked files are the
workspace (an untracked secret never is), and without a sandbox the run is
refused with one line before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.fakes.agent_upstream import AgentScript, FakeAgentUpstream
from testkit.harness.agents import UPSTREAM_KEY, agent_bins

MARKER = "otter-5150-heron"
SECRET = "sk-live-untracked-0000"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "marker.txt").write_text(f"{MARKER}\n")
    (root / "q.md").write_text("What does marker.txt hold?\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "marker.txt", "q.md"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    (root / "secret.txt").write_text(SECRET)  # untracked: never in the workspace
    return root


@pytest.fixture
def upstream() -> Iterator[FakeAgentUpstream]:
    script = AgentScript(files=("marker.txt", "secret.txt"))
    with FakeAgentUpstream(script=script, api_key=UPSTREAM_KEY) as fake:
        yield fake


def _run(root: Path, upstream: FakeAgentUpstream, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DEBATE_BOT_", "OPENAI_", "ANTHROPIC_"))}  # fmt: skip
    env.update(
        OPENAI_API_KEY=UPSTREAM_KEY,
        OPENAI_BASE_URL=f"{upstream.url}/v1",
        DEBATE_BOT_AGENT_CODEX_BIN=agent_bins()["codex"],
        DEBATE_BOT_AGENT_CODEX_MODEL="gpt-5",
        COLUMNS="200",
        **extra,
    )
    return subprocess.run(
        [sys.executable, "-m", "bot", "run", "q.md", "--model", "agent:codex", "--rounds", "1"],
        cwd=root, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def test_a_local_run_seats_an_agent_on_the_tracked_files(
    checkout: Path, upstream: FakeAgentUpstream
) -> None:
    done = _run(checkout, upstream)
    assert done.returncode == 0, done.stderr[-2000:]
    transcript = (checkout / done.stdout.strip().splitlines()[-1]).read_text()
    assert MARKER in transcript and "agent:codex" in transcript
    assert SECRET not in transcript  # untracked: not in the workspace
    assert SECRET not in str([r.body for r in upstream.requests])


def test_without_a_sandbox_the_run_is_refused_in_one_line(
    checkout: Path, upstream: FakeAgentUpstream
) -> None:
    done = _run(checkout, upstream, DEBATE_BOT_AGENT_BWRAP="/nonexistent/bwrap")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "bubblewrap" in line and "Traceback" not in done.stderr
    assert upstream.requests == []  # no model was asked anything
