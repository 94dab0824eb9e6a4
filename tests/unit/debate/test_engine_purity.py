"""The engine's import rule (bot/debate/ruff.toml) fires, and the engine obeys it.

The rule is an allow-list: the standard library, `bot.debate` and `bot.errors`.
Ruff can only ban, so the file bans every other `bot` module and every runtime
dependency, and a test here fails when one is missing from it.

Ruff picks the closest config per file, so checking a probe named as if it lived
in bot/debate from the repository root is what `ruff check .` does in CI.
"""

from __future__ import annotations

import pytest

from testkit.harness.import_rules import ROOT, banned, gaps, imports_outside
from testkit.harness.import_rules import ruff as _ruff
from testkit.harness.import_rules import tid251 as _tid251

RULES = ROOT / "bot" / "debate" / "ruff.toml"
ALLOWED = ("bot.debate", "bot.errors")


def _banned() -> list[str]:
    return banned(RULES)


def test_the_rule_is_an_allow_list() -> None:
    """Every project module and runtime dependency outside the allow-list is
    banned (a new module must be added to bot/debate/ruff.toml), and nothing
    allowed is."""
    assert gaps(RULES, ALLOWED) == (set(), set())
    assert {"bot.action", "bot.brief"} <= set(_banned())  # the old deny-list had missed them


def test_the_engine_imports_only_what_it_is_allowed() -> None:
    assert imports_outside(ROOT / "bot" / "debate", ALLOWED) == {}


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
