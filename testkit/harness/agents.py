"""The real agent CLIs for the end-to-end tests: where .ci/run installed them
(TEST_AGENT_CLIS, an npm prefix of deploy/agents/package.json), a host
that seats them in bubblewrap, and a small git repository to read."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import pytest

from bot.engine.agents import Cli
from bot.models.agents.gateway import Upstream
from bot.models.agents.host import AgentHost
from bot.models.agents.sandbox import Limits
from bot.repo.local import open_checkout
from bot.repo.snapshot import Snapshot

BINS: Final[dict[Cli, str]] = {
    "claude-code": "node_modules/@anthropic-ai/claude-code-linux-x64/claude",
    "codex": "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
    "gemini": "node_modules/@google/gemini-cli/bundle/gemini.js",
}
MODELS: Final[dict[Cli, str]] = {
    "claude-code": "claude-sonnet-4-5",
    "codex": "gpt-5",
    "gemini": "gemini-2.5-pro",
}
UPSTREAM_KEY: Final = "sk-upstream-real-key-for-tests"
HTML_URL: Final = "https://github.com/acme/widgets"


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(reason)
    pytest.skip(reason + "; .ci/run installs them (set CI=true to make this a failure)")


def agent_bins() -> dict[Cli, str]:
    """The CLIs' executables; a skip (a failure in CI) when they are not installed."""
    root = os.environ.get("TEST_AGENT_CLIS")
    if not root:
        _missing("TEST_AGENT_CLIS is not set")
    if shutil.which("bwrap") is None:
        _missing("bubblewrap (bwrap) is not installed")
    found = {cli: str(Path(root or "") / rel) for cli, rel in BINS.items()}
    absent = [cli for cli, path in found.items() if not os.access(path, os.X_OK)]
    if absent:
        pytest.fail(f"TEST_AGENT_CLIS={root} lacks {', '.join(absent)}")
    return found


def agent_host(
    tmp_path: Path,
    *,
    sandbox: str = "bwrap",
    limits: Limits | None = None,
    max_calls: int = 12,
    concurrency: int = 4,
) -> AgentHost:
    root = tmp_path / "agents"
    root.mkdir(exist_ok=True)
    return AgentHost(
        sandbox_kind=sandbox,
        bwrap_setting=None,
        bins=agent_bins(),
        models=MODELS,
        limits=limits or Limits(wall_s=120, first_event_s=60, idle_s=60),
        concurrency=concurrency,
        max_calls=max_calls,
        root=root,
        environ={"PATH": "/usr/local/bin:/usr/bin:/bin"},
    )


def upstreams(url: str) -> dict[str, Upstream]:
    return {p: Upstream(p, url, UPSTREAM_KEY) for p in ("anthropic", "openai", "gemini")}


def git_repo(tmp_path: Path, files: Mapping[str, str]) -> Snapshot:
    """A committed repository of ``files``, read as a checkout (``git ls-files``)."""
    repo = tmp_path / "repo"
    for path, text in files.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "files"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"],
        check=True, capture_output=True, text=True, env=env,
    ).stdout.strip()  # fmt: skip
    return open_checkout(repo, repo="acme/widgets", commit=sha, html_url=HTML_URL)


def processes_mentioning(needle: str) -> list[str]:
    """Command lines of live processes that contain ``needle`` (leftover agents)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in line:
            found.append(line)
    return found
