"""`debate-bot doctor`'s output (bot/cli/doctor.py ``show``): at any width, piped or
not, every check's name and fix is printed whole, never cut with an ellipsis; and
a deployment with no app is told to run `debate-bot setup`."""

from __future__ import annotations

import io

import pytest
from pydantic import SecretStr

from bot.cli.checks import Check
from bot.cli.doctor import _settings_checks, show
from bot.cli.terminal import make_console
from bot.core.settings import Settings

KEY_FIX = "set DEBATE_BOT_PRIVATE_KEY_FILE (or DEBATE_BOT_PRIVATE_KEY) in .env or the environment"
CHECKS = [
    Check("DEBATE_BOT_APP_ID", True, "4242"),
    Check("DEBATE_BOT_PRIVATE_KEY(_FILE)", False, "not set", KEY_FIX),
    Check(
        "DEBATE_BOT_WEBHOOK_SECRET",
        False,
        "not set",
        "set DEBATE_BOT_WEBHOOK_SECRET in .env or the environment",
    ),
    Check(
        "app permissions",
        False,
        "missing issues: write (has read); pull_requests: write (has none)",
        "grant them in the app's settings (Permissions & events), then accept them per install",
    ),
    Check(
        "database",
        False,
        "cannot connect to postgresql://bot:***@db.internal.example:5432/bot (connection refused)",
        "check DEBATE_BOT_DATABASE_URL and the server",
    ),
    Check("proxy", False, "DEBATE_BOT_WEBHOOK_PROXY_URL: https://[user:password@]smee.io/CHANNEL"),
    Check("schema", False, "at nothing, code needs 0007_ledger", "run `debate-bot migrate`"),
    Check("model anthropic/claude-sonnet-4-5", True, "answered in 412 ms"),
]


def shown(width: int, checks: list[Check] = CHECKS) -> str:
    out = io.StringIO()  # not a terminal: as when piped
    show(checks, make_console(file=out, width=width))
    return out.getvalue()


@pytest.mark.parametrize("width", [60, 72, 80, 100, 120, 160, 200])
def test_every_word_is_whole_and_nothing_is_cut(width: int) -> None:
    out = shown(width)
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= width
    words = set(out.replace("│", " ").split())
    for c in CHECKS:
        for word in f"{c.name} {c.detail} {c.fix}".split():
            assert word in words, (width, word, out)


@pytest.mark.parametrize("width", [60, 72, 80, 100, 120, 160, 200])
def test_a_name_is_on_one_line(width: int) -> None:
    lines = shown(width).splitlines()
    for c in CHECKS:
        assert any(c.name in line for line in lines), (width, c.name)


def test_at_80_columns_the_checks_stack() -> None:
    out = shown(80)
    assert "│" not in out
    lines = out.splitlines()
    assert "✗ DEBATE_BOT_PRIVATE_KEY(_FILE)" in lines
    at = lines.index("✗ DEBATE_BOT_PRIVATE_KEY(_FILE)")
    assert lines[at + 1] == "    not set"
    said = " ".join(" ".join(lines[at + 2 : at + 4]).split())
    assert said.startswith(f"fix: {KEY_FIX}")
    assert "✓ DEBATE_BOT_APP_ID" in lines and "    4242" in lines
    assert "    DEBATE_BOT_WEBHOOK_PROXY_URL: https://[user:password@]smee.io/CHANNEL" in lines


def test_a_wide_console_gets_the_table() -> None:
    out = shown(200)
    rows = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if len(cells) >= 3 and cells[0] in {"✓", "✗"}:  # an empty fix: 3
            rows[cells[1]] = cells
    assert set(rows) == {c.name for c in CHECKS}
    assert rows["schema"][3] == "run `debate-bot migrate`"
    assert rows["proxy"][2] == (
        "DEBATE_BOT_WEBHOOK_PROXY_URL: https://[user:password@]smee.io/CHANNEL"
    )


def test_all_passing_checks_fit_a_table_at_80_columns() -> None:
    passing = [Check(c.name, True, "ok") for c in CHECKS]
    out = shown(80, passing)
    assert "│ ✓ │ model anthropic/claude-sonnet-4-5 │ ok" in out


def _settings(**values: object) -> Settings:
    base: dict[str, object] = {"app_id": None, "private_key": None, "webhook_secret": None}
    return Settings(_env_file=None, **{**base, **values})  # type: ignore[arg-type]


def test_no_app_at_all_says_run_setup() -> None:
    checks = _settings_checks(_settings(), None, "")
    assert [c.name for c in checks] == [
        "DEBATE_BOT_APP_ID",
        "DEBATE_BOT_PRIVATE_KEY(_FILE)",
        "DEBATE_BOT_WEBHOOK_SECRET",
    ]
    for c in checks:
        assert not c.ok and "run `debate-bot setup`" in c.fix, c


def test_one_missing_setting_names_the_variable() -> None:
    checks = _settings_checks(_settings(webhook_secret=SecretStr("s")), "PEM", "")
    by_name = {c.name: c for c in checks}
    app_id = by_name["DEBATE_BOT_APP_ID"]
    assert app_id.fix.startswith("set DEBATE_BOT_APP_ID in .env or the environment")
    assert "run `debate-bot setup`" in app_id.fix  # a new app: setup registers one
    checks = _settings_checks(_settings(app_id=1, webhook_secret=SecretStr("s")), None, "")
    key = {c.name: c for c in checks}["DEBATE_BOT_PRIVATE_KEY(_FILE)"]
    assert key.fix == KEY_FIX
