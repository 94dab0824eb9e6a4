"""The run layer's import rule (bot/runner/ruff.toml) fires, and bot/runner obeys it.

An allow-list: the standard library, `bot.debate`, `bot.llm`, `bot.aio`,
`bot.errors` and `bot.runner` itself. Ruff can only ban, so the file bans every
other `bot` module and every runtime dependency (anyio included: concurrency
goes through `bot.aio`); a test here fails when one is missing from it.
"""

from __future__ import annotations

import pytest

from testkit.harness.import_rules import ROOT, banned, gaps, imports_outside, ruff, tid251

RULES = ROOT / "bot" / "runner" / "ruff.toml"
ALLOWED = ("bot.debate", "bot.llm", "bot.aio", "bot.errors", "bot.runner")


def test_the_rule_is_an_allow_list() -> None:
    assert gaps(RULES, ALLOWED) == (set(), set())
    rules = set(banned(RULES))
    for shell in ("bot.worker", "bot.local", "bot.store", "bot.github", "bot.config", "anyio"):
        assert shell in rules


@pytest.mark.parametrize("probe_path", ["bot/runner/_probe.py", "bot/runner/sub/_probe.py"])
def test_each_banned_import_in_the_run_layer_is_an_error(probe_path: str) -> None:
    rules = banned(RULES)
    probe = "".join(f"from {m}.sub import thing as t{i}\n" for i, m in enumerate(rules))
    probe += "import anyio\nfrom bot.store import RunStore\n"
    # Allowed: not flagged.
    probe += "import asyncio\nfrom bot.aio import each\nfrom bot.debate.types import Turn\n"
    probe += "from bot.errors import ProtocolError\nfrom bot.llm.router import ModelRouter\n"
    probe += "from bot.runner.execute import execute\n"
    proc = ruff("--stdin-filename", probe_path, "-", stdin=probe)
    assert proc.returncode != 0
    messages = tid251(proc)
    for module in rules:
        assert any(msg.startswith(f"`{module}` is banned") for msg in messages), module
    assert len(messages) == len(rules) + 2


def test_the_rule_is_the_run_layers_alone() -> None:
    probe = "import anyio\nfrom bot.store import RunStore\n\n__all__ = ['RunStore', 'anyio']\n"
    proc = ruff("--stdin-filename", "bot/local/_probe.py", "-", stdin=probe)
    assert tid251(proc) == []


def test_the_run_layer_obeys_the_rule() -> None:
    proc = ruff("bot/runner")
    assert proc.returncode == 0, proc.stdout
    assert imports_outside(ROOT / "bot" / "runner", ALLOWED) == {}
