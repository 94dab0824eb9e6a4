"""The first hour's tools against a real service: `check-config`, `replay
--comment`, `runs`, and the delivery backlog gauges an operator alerts on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bot.core.errors import ConfigError
from bot.inputs.repo_config import load_repo_config
from testkit.harness.scenarios import seed_issue
from testkit.harness.service import INSTALLATION, REPO, Harness, delivery, run_rows


def cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        env={**(env or dict(os.environ)), "COLUMNS": "200"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


BAD_CONFIG = """\
rounds: 3
turn_order: parallel
roundz: 4
quotas:
  per_repo_per_day: -1
personas:
  - {name: Atlas, colour: blue}
"""


def test_check_config_names_every_error_with_its_key_and_line(tmp_path: Path) -> None:
    config = tmp_path / ".github" / "debate.yml"
    config.parent.mkdir()
    config.write_text(BAD_CONFIG)
    result = cli("check-config", str(tmp_path))
    assert result.returncode == 2, result.stdout + result.stderr
    errors = result.stderr.splitlines()
    assert any("line 3: roundz: Extra inputs are not permitted" in e for e in errors), errors
    assert any("line 5: quotas.per_repo_per_day" in e for e in errors), errors
    assert any("line 7: personas.0.colour" in e for e in errors), errors
    assert "Traceback" not in result.stderr

    config.write_text("rounds: 2\nmodels: [openai/gpt-4.1-mini, anthropic/claude-sonnet-4-5]\n")
    ok = cli("check-config", str(config))
    assert ok.returncode == 0 and "valid" in ok.stdout, ok.stderr

    config.write_text("rounds: 2\npersonas: [\n")
    syntax = cli("check-config", str(config))
    assert syntax.returncode == 2 and "line 3" in syntax.stderr


def test_check_config_reads_plan_frontmatter(tmp_path: Path) -> None:
    plan = tmp_path / "plan.md"
    plan.write_text("---\nrounds: 2\nsynthesiser: judge\n---\n# A plan\n\nShip it.\n")
    result = cli("check-config", str(plan))
    assert result.returncode == 2
    assert "line 3: synthesiser: Extra inputs are not permitted" in result.stderr
    plan.write_text("---\nrounds: 2\n---\n# A plan\n\nShip it.\n")
    assert cli("check-config", str(plan)).returncode == 0


def test_the_bots_reply_names_the_line_of_an_unknown_key() -> None:
    with pytest.raises(ConfigError) as caught:
        load_repo_config(BAD_CONFIG)
    assert "line 3: roundz" in caught.value.public
    # The setting that changed nothing is gone: naming it is a mistake with a line.
    with pytest.raises(ConfigError, match="line 1: public_transcript"):
        load_repo_config("public_transcript: summary\n")


def test_a_replayed_comment_starts_a_run_and_runs_lists_it(harness: Harness) -> None:
    service = harness.start()
    number = seed_issue(harness)
    result = cli(
        "replay", "--comment", "/debate --rounds 1", "--repo", REPO, "--issue", str(number),
        "--installation", str(INSTALLATION), "--sender", "Codertocat",
        "--url", service.url + "/api/github/webhooks", env=harness.env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("202 ") and "queued" in result.stdout
    harness.wait_for(
        lambda: any(r["state"] == "done" for r in run_rows(harness)), what="the replayed run"
    )
    listed = cli("runs", "--repo", REPO, env=harness.env)
    assert listed.returncode == 0, listed.stderr
    assert "done" in listed.stdout and f"/{REPO}/issues/{number}" in listed.stdout
    assert "$" in listed.stdout
    none = cli("runs", "--state", "failed", env=harness.env)
    assert none.returncode == 0 and "no runs match" in none.stdout


def test_a_backlog_without_a_worker_shows_in_the_gauges(harness: Harness) -> None:
    """`web` alone stores deliveries nobody processes: the pending gauge and the
    oldest one's age say so (every run gauge stays 0)."""
    service = harness.start()
    service.stop()
    service.start("web")
    before = httpx.get(service.url + "/metrics").text
    assert "debate_bot_deliveries_pending 0.0" in before
    number = seed_issue(harness)
    payload = delivery(
        "issue_comment.created.with-installation",
        **{"comment.body": "/debate", "issue.number": number, "installation.id": INSTALLATION},
    )
    assert harness.post("issue_comment", payload).status_code == 202
    text = httpx.get(service.url + "/metrics").text
    assert "debate_bot_deliveries_pending 1.0" in text
    age = next(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("debate_bot_deliveries_oldest_pending_age_seconds ")
    )
    assert age >= 0.0
