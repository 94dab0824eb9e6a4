"""The engine's import rule (bot/debate/ruff.toml) fires, and the engine obeys it.

Ruff picks the closest config per file, so checking a probe named as if it lived
in bot/debate from the repository root is what `ruff check .` does in CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "bot" / "debate" / "ruff.toml"


def _banned() -> list[str]:
    config = tomllib.loads(RULES.read_text())
    return sorted(config["lint"]["flake8-tidy-imports"]["banned-api"])


def _ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "json", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _tid251(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [d["message"] for d in json.loads(proc.stdout) if d["code"] == "TID251"]


def test_the_rule_bans_settings_io_libraries_and_adapters() -> None:
    banned = _banned()
    for module in ("bot.config", "pydantic", "pydantic_settings", "httpx", "anyio"):
        assert module in banned
    for adapter in ("app", "cli", "commands", "github", "llm", "local", "service", "store"):
        assert f"bot.{adapter}" in banned
    assert "bot.worker" in banned


@pytest.mark.parametrize("probe_path", ["bot/debate/_probe.py", "bot/debate/stages/_probe.py"])
def test_each_banned_import_in_the_engine_is_an_error(probe_path: str) -> None:
    banned = _banned()
    # Submodules and member imports count: `bot.github.client` is still bot.github.
    probe = "".join(f"from {m}.sub import thing as t{i}\n" for i, m in enumerate(banned))
    probe += "import httpx\nfrom pydantic import BaseModel\n"
    probe += "from bot.errors import ProtocolError\nfrom bot.debate.types import Turn\n"
    proc = _ruff("--stdin-filename", probe_path, "-", stdin=probe)
    assert proc.returncode != 0
    messages = _tid251(proc)
    for module in banned:
        assert any(msg.startswith(f"`{module}` is banned") for msg in messages), module
    assert len(messages) == len(banned) + 2  # the allowed imports are not flagged


def test_the_rule_is_the_engines_alone() -> None:
    probe = "import httpx\nfrom bot.config import Settings\n\n__all__ = ['Settings', 'httpx']\n"
    proc = _ruff("--stdin-filename", "bot/worker/_probe.py", "-", stdin=probe)
    assert _tid251(proc) == []


def test_the_engine_obeys_the_rule() -> None:
    proc = _ruff("bot/debate")
    assert proc.returncode == 0, proc.stdout
