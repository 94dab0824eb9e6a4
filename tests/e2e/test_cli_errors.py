"""Every command, driven through a table of ordinary setup mistakes: each answer
is one line naming the cause (the driver's or the OS's words), exit 2, no
traceback, no secret (README "Running it"; issue: a maintainer's first hour)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testkit.harness.service import free_port

PASSWORD = "s3cret-pw-4711"


@dataclass(frozen=True)
class Mistake:
    name: str
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    says: tuple[str, ...] = ()  # each must appear in the one line (lowercased)
    code: int = 2


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _mistakes(busy: int, closed: int) -> list[Mistake]:
    pg = {"DEBATE_BOT_DATABASE_URL": f"postgresql://bot:{PASSWORD}@127.0.0.1:{closed}/bot"}
    missing_dir = {"DEBATE_BOT_DATABASE_URL": "sqlite:///./no-such-folder/bot.db"}
    app = {"DEBATE_BOT_APP_ID": "1"}
    port_says = ("address already in use", "--port")
    db_says = ("connection refused", "debate_bot_database_url")
    folder_says = ("no-such-folder", "does not exist")
    return [
        Mistake("serve on a busy port", ("serve", "--port", str(busy)), says=port_says),
        Mistake("web on a busy port", ("web",), {"DEBATE_BOT_PORT": str(busy)}, port_says),
        Mistake(
            "serve on no port", ("serve", "--port", "99999"), says=("debate_bot_port", "65535")
        ),
        Mistake(
            "worker on a busy port",
            ("worker", "--port", str(busy)),
            {**app, "DEBATE_BOT_PRIVATE_KEY": "x"},
            port_says,
        ),
        Mistake(
            "setup on a busy port",
            ("setup", "--port", str(busy), "--public-url", "https://bot.example"),
            says=port_says,
        ),
        Mistake(
            "serve on an unknown host",
            ("serve", "--host", "no-such-host.invalid"),
            says=("--host",),
        ),
        Mistake("migrate, PostgreSQL down", ("migrate",), pg, db_says),
        Mistake("runs, PostgreSQL down", ("runs",), pg, db_says),
        Mistake("migrate, SQLite folder missing", ("migrate",), missing_dir, folder_says),
        Mistake(
            "serve, SQLite folder missing",
            ("serve", "--port", str(closed)),
            missing_dir,
            folder_says,
        ),
        Mistake("runs, no database yet", ("runs",), says=("no database",)),
        Mistake(
            "serve, app id not a number",
            ("serve",),
            {"DEBATE_BOT_APP_ID": "abc"},
            ("debate_bot_app_id", "integer"),
        ),
        Mistake(
            "migrate, bad setting", ("migrate",), {"DEBATE_BOT_PORT": "many"}, ("debate_bot_port",)
        ),
        Mistake(
            "run, bad setting",
            ("run", "x.md"),
            {"DEBATE_BOT_ENDPOINTS": "{"},
            ("debate_bot_endpoints",),
        ),
        Mistake(
            "worker, key file missing",
            ("worker",),
            {**app, "DEBATE_BOT_PRIVATE_KEY_FILE": "missing.pem"},
            ("debate_bot_private_key_file", "no such file"),
        ),
        Mistake(
            "worker, key not PEM", ("worker",), {**app, "DEBATE_BOT_PRIVATE_KEY": "nope"}, ("pem",)
        ),
        Mistake("run, no such file", ("run", "missing.md", "--dry-run"), says=("missing.md",)),
        Mistake(
            "replay, no such file",
            ("replay", "missing.json", "--event", "ping"),
            {"DEBATE_BOT_WEBHOOK_SECRET": "x"},
            ("missing.json", "no such file"),
        ),
        Mistake(
            "replay, no secret",
            (
                "replay",
                "--comment",
                "/debate",
                "--repo",
                "o/r",
                "--issue",
                "1",
                "--installation",
                "1",
            ),
            says=("debate_bot_webhook_secret",),
        ),
        Mistake(
            "replay --comment, bad repo",
            (
                "replay",
                "--comment",
                "/debate",
                "--repo",
                "nope",
                "--issue",
                "1",
                "--installation",
                "1",
            ),
            {"DEBATE_BOT_WEBHOOK_SECRET": "x"},
            ("owner/name",),
        ),
        Mistake(
            "check-config, no such file",
            ("check-config", "missing.yml"),
            says=("missing.yml", "no such file"),
        ),
        Mistake(
            "setup, loopback URL for github.com",
            ("setup", "--port", str(closed), "--public-url", "http://127.0.0.1:3000"),
            says=("not reachable from github.com", "--webhook-proxy-url"),
        ),
        Mistake(
            "setup, no URL for github.com", ("setup", "--port", str(closed)), says=("--public-url",)
        ),
        Mistake("action outside Actions", ("action",), says=("github_",)),
        Mistake(
            "doctor, bad setting",
            ("doctor",),
            {"DEBATE_BOT_WORKER_PORT": "0"},
            ("debate_bot_worker_port",),
        ),
    ]


def _clean_env(tmp: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DEBATE_BOT_", "OPENAI", "ANTHROPIC", "GITHUB_"))
    }
    return {**env, "DEBATE_BOT_LOG_LEVEL": "INFO", "COLUMNS": "200"}


def _ids() -> list[str]:
    return [m.name for m in _mistakes(1, 2)]


@pytest.mark.parametrize("index", range(len(_ids())), ids=_ids())
def test_a_mistake_is_one_line_with_its_cause(index: int, busy_port: int, tmp_path: Path) -> None:
    mistake = _mistakes(busy_port, free_port())[index]
    result = subprocess.run(
        [sys.executable, "-m", "bot", *mistake.args],
        cwd=tmp_path,
        env={**_clean_env(tmp_path), **mistake.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out = result.stdout + result.stderr
    assert "Traceback" not in out, out
    assert PASSWORD not in out
    assert result.returncode == mistake.code, out
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: "), out
    for words in mistake.says:
        assert words in errors[0].lower(), (words, errors[0])
    assert "ready" not in result.stdout.lower()


def test_an_unknown_failure_is_still_one_line(tmp_path: Path) -> None:
    """A bug of ours: one line with its class and how to see more (exit 1)."""
    cwd = tmp_path / "here"
    cwd.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", "from bot.cli.main import main; import sys; "
         "sys.argv = ['debate-bot', 'check-config', '.']; "
         "import bot.inputs.checkconfig as c; c.check_config = lambda p: 1 / 0; main()"],
        cwd=cwd, env=_clean_env(tmp_path), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert "Traceback" not in out
    assert result.returncode == 1, out
    [line] = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert "ZeroDivisionError" in line and "DEBATE_BOT_LOG_LEVEL=DEBUG" in line


def test_a_review_of_a_missing_folder_is_named(tmp_path: Path) -> None:
    # A folder outside the checkout is reviewed as it is (tests/unit/local/test_local_review.py).
    inner = tmp_path / "checkout"
    (inner / ".git").mkdir(parents=True)
    result = subprocess.run(
        [sys.executable, "-m", "bot", "review", "../other", "--dry-run"],
        cwd=inner, env=_clean_env(tmp_path), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert "Traceback" not in out and result.returncode == 2, out
    [line] = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert "../other" in line
