"""`debate-bot doctor` over real HTTP against the fake GitHub and fake model server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit.harness.service import Harness, rsa_keypair


def doctor(
    env: dict[str, str], cwd: Path, columns: str | None = "200"
) -> subprocess.CompletedProcess[str]:
    """Piped, as wide as ``columns`` (None: unset, so rich's 80)."""
    env = {k: v for k, v in env.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "bot", "doctor"],
        env={**env, "COLUMNS": columns} if columns is not None else env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def rows(output: str) -> dict[str, str]:
    """check name -> its whole table row."""
    found = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) >= 3 and cells[0] in {"✓", "✗"}:
            found[cells[1]] = line
    return found


def migrate(env: dict[str, str], cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "bot", "migrate"], env=env, cwd=cwd, check=True)


def test_a_healthy_deployment_passes(harness: Harness, tmp_path: Path) -> None:
    migrate(harness.env, tmp_path)
    result = doctor(harness.env, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = rows(result.stdout)
    for name in (
        "DEBATE_BOT_APP_ID",
        "DEBATE_BOT_PRIVATE_KEY(_FILE)",
        "DEBATE_BOT_WEBHOOK_SECRET",
        "private key parses",
        "GitHub accepts the app",
        "app permissions",
        "app events",
        "installations",
        "database",
        "schema",
        "model openai/gpt-4.1-mini",
        "model anthropic/claude-sonnet-4-5",
    ):
        assert "✓" in checks[name], (name, result.stdout)
    # Secrets are never printed, only whether they are set.
    assert harness.env["DEBATE_BOT_WEBHOOK_SECRET"] not in result.stdout
    assert "BEGIN" not in result.stdout


def test_each_fault_is_named_with_its_fix(harness: Harness, tmp_path: Path) -> None:
    harness.github.app_permissions["issues"] = "read"
    harness.github.app_events.remove("pull_request_review_comment")
    env = {**harness.env, "ANTHROPIC_API_KEY": ""}  # no key: that model cannot answer
    env.pop("ANTHROPIC_API_KEY")
    result = doctor(env, tmp_path)  # and the database was never migrated
    assert result.returncode == 1
    checks = rows(result.stdout)
    assert "✗" in checks["app permissions"] and "issues: write (has read)" in result.stdout
    assert "✗" in checks["app events"] and "pull_request_review_comment" in result.stdout
    assert "✗" in checks["schema"] and "debate-bot migrate" in checks["schema"]
    assert "✗" in checks["model anthropic/claude-sonnet-4-5"]
    assert "✓" in checks["model openai/gpt-4.1-mini"]


def test_a_key_github_does_not_know_is_refused(harness: Harness, tmp_path: Path) -> None:
    other, _ = rsa_keypair()
    result = doctor({**harness.env, "DEBATE_BOT_PRIVATE_KEY": other}, tmp_path)
    assert result.returncode == 1
    checks = rows(result.stdout)
    assert "✓" in checks["private key parses"]
    assert "✗" in checks["GitHub accepts the app"]
    assert "Traceback" not in result.stdout + result.stderr


def test_missing_settings_say_what_to_set(harness: Harness, tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in harness.env.items()
        if k not in {"DEBATE_BOT_APP_ID", "DEBATE_BOT_WEBHOOK_SECRET"}
    }
    result = doctor(env, tmp_path)
    assert result.returncode == 1
    checks = rows(result.stdout)
    assert "✗" in checks["DEBATE_BOT_APP_ID"] and "set DEBATE_BOT_APP_ID" in result.stdout
    assert "✗" in checks["DEBATE_BOT_WEBHOOK_SECRET"]
    assert "GitHub accepts the app" not in checks  # nothing to ask GitHub with


def test_an_unreadable_key_file_is_a_failed_check(harness: Harness, tmp_path: Path) -> None:
    env = {k: v for k, v in harness.env.items() if k != "DEBATE_BOT_PRIVATE_KEY"}
    env["DEBATE_BOT_PRIVATE_KEY_FILE"] = str(tmp_path / "missing.pem")
    result = doctor(env, tmp_path)
    assert result.returncode == 1, result.stderr
    checks = rows(result.stdout)
    assert (
        "✗" in checks["DEBATE_BOT_PRIVATE_KEY(_FILE)"]
        and "cannot read" in checks["DEBATE_BOT_PRIVATE_KEY(_FILE)"]
    )
    assert "set DEBATE_BOT_PRIVATE_KEY_FILE" in checks["DEBATE_BOT_PRIVATE_KEY(_FILE)"]
    assert "GitHub accepts the app" not in checks


def test_refused_connections_are_named(harness: Harness, tmp_path: Path) -> None:
    """A model server and a PostgreSQL that refuse: doctor says "connection
    refused" with the driver's words, the password masked."""
    from testkit.harness.service import free_port

    closed = free_port()
    env = {
        **harness.env,
        "OPENAI_BASE_URL": f"http://127.0.0.1:{closed}/v1",
        "DEBATE_BOT_DEFAULT_MODELS": '["openai/gpt-4.1-mini"]',
        "DEBATE_BOT_DATABASE_URL": f"postgresql://bot:hunter2pw@127.0.0.1:{closed}/bot",
    }
    result = doctor(env, tmp_path)
    assert result.returncode == 1
    checks = rows(result.stdout)
    model = checks["model openai/gpt-4.1-mini"]
    assert "✗" in model and "connection refused" in model.lower(), result.stdout
    assert "✗" in checks["database"]
    # The table may wrap a long cell onto more lines: the driver's words are there.
    assert "connection refused" in " ".join(result.stdout.split()).lower()
    assert "hunter2pw" not in result.stdout + result.stderr


NAMES = ("DEBATE_BOT_APP_ID", "DEBATE_BOT_PRIVATE_KEY(_FILE)", "DEBATE_BOT_WEBHOOK_SECRET")


def checks_said(output: str) -> dict[str, tuple[str, str]]:
    """check name -> (result, fix), each joined back from its wrapped lines, from
    either layout: the table, or the stack (a check, its result and fix indented)."""
    said: dict[str, list[list[str]]] = {}
    name = ""
    for line in output.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            if len(cells) != 4:
                continue
            if cells[0] in {"✓", "✗"}:
                name = cells[1]
                said[name] = [[], []]
            if name:
                for part, cell in zip(said[name], cells[2:], strict=True):
                    part.append(cell)
        elif line[:2] in {"✓ ", "✗ "}:
            name = line[2:]
            said[name] = [[], []]
        elif name and line.startswith("    "):
            text = line.strip()
            if text.startswith("fix: "):
                said[name][1].append(text.removeprefix("fix: "))
            else:
                said[name][1 if said[name][1] else 0].append(text)
    return {
        n: (" ".join(" ".join(r).split()), " ".join(" ".join(f).split()))
        for n, (r, f) in said.items()
    }


def test_no_app_at_80_columns_names_every_setting_whole(harness: Harness, tmp_path: Path) -> None:
    """An 80-column terminal or a pipe: each name on one line, each fix whole
    (wrapped between words, never cut with an ellipsis); no app: run setup."""
    env = {
        k: v
        for k, v in harness.env.items()
        if k
        not in {
            "DEBATE_BOT_APP_ID",
            "DEBATE_BOT_PRIVATE_KEY",
            "DEBATE_BOT_PRIVATE_KEY_FILE",
            "DEBATE_BOT_WEBHOOK_SECRET",
        }
    }
    for columns in ("80", None):
        result = doctor(env, tmp_path, columns)
        assert result.returncode == 1, result.stdout + result.stderr
        out = result.stdout
        assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80, out
        said = checks_said(out)
        for name in NAMES:
            assert said[name] == (
                "not set",
                "no app yet: run `debate-bot setup` (it registers the app and writes .env)",
            ), (name, out)
        assert said["schema"][1] == "run `debate-bot migrate`"  # never migrated
        assert "model openai/gpt-4.1-mini" in said


def test_a_long_fix_at_80_columns_is_whole(harness: Harness, tmp_path: Path) -> None:
    env = {k: v for k, v in harness.env.items() if k != "DEBATE_BOT_PRIVATE_KEY"}
    env["DEBATE_BOT_PRIVATE_KEY_FILE"] = str(tmp_path / "missing.pem")
    result = doctor(env, tmp_path, "80")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "…" not in result.stdout
    result_text, fix = checks_said(result.stdout)["DEBATE_BOT_PRIVATE_KEY(_FILE)"]
    assert "cannot read" in result_text
    assert fix == (
        "set DEBATE_BOT_PRIVATE_KEY_FILE (or DEBATE_BOT_PRIVATE_KEY) in .env or the environment"
    )


def test_a_healthy_deployment_at_80_columns_shows_every_name(
    harness: Harness, tmp_path: Path
) -> None:
    migrate(harness.env, tmp_path)
    result = doctor(harness.env, tmp_path, "80")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "…" not in result.stdout
    said = checks_said(result.stdout)
    for name in (*NAMES, "GitHub accepts the app", "model anthropic/claude-sonnet-4-5"):
        assert name in said, (name, result.stdout)
