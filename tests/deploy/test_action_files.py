"""action.yml and the documented example workflow: valid by GitHub's published
schemas, and saying what the docs promise."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "tests" / "fixtures" / "github-action-workflow.yml"
ACTION = ROOT / "action.yml"
CHECK = [sys.executable, "-m", "check_jsonschema"]


def validate(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CHECK, "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("schema", "path"),
    [("vendor.github-workflows", WORKFLOW), ("vendor.github-actions", ACTION)],
)
def test_valid_by_githubs_schemas(schema: str, path: Path) -> None:
    result = validate(schema, path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_rejects_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on: ubuntu-latest", "runs-on: 3"))
    assert validate("vendor.github-workflows", broken).returncode != 0


def test_the_docs_show_exactly_the_tested_workflow() -> None:
    doc = (ROOT / "docs" / "github-action.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    assert blocks == [WORKFLOW.read_text()]


def test_the_workflow_asks_for_only_what_the_bot_needs() -> None:
    wf = yaml.safe_load(WORKFLOW.read_text())
    triggers = wf[True]  # YAML 1.1 reads the key `on` as a boolean
    # Every trigger the docs promise: comments on issues and PRs, `/debate
    # arbitrate` in a review thread, the label on issues and on PRs.
    assert triggers == {
        "issue_comment": {"types": ["created"]},
        "pull_request_review_comment": {"types": ["created"]},
        "issues": {"types": ["labeled"]},
        "pull_request": {"types": ["labeled", "synchronize"]},
    }
    assert wf["permissions"] == {"contents": "read", "issues": "write", "pull-requests": "write"}
    job = wf["jobs"]["debate"]
    # Per issue or PR, on the job (after its `if`), never cancelling a waiting debate.
    assert "concurrency" not in wf
    group = job["concurrency"]["group"]
    assert "github.event.issue.number" in group and "github.event.pull_request.number" in group
    assert job["concurrency"]["cancel-in-progress"] is False
    assert "startsWith(github.event.comment.body, '/debate')" in job["if"]
    assert "pull_request_review_comment" in job["if"]
    [step] = job["steps"]
    assert all("secrets." in v for k, v in step["with"].items() if k.endswith("api-key"))


def test_the_action_installs_the_locked_runtime_and_runs_the_action_command() -> None:
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    script = "\n".join(step.get("run", "") for step in action["runs"]["steps"])
    assert "requirements-runtime.lock" in script and "--no-deps" in script
    # The locked install is cached, keyed by the lock file's hash and Python.
    [cache] = [
        s for s in action["runs"]["steps"] if str(s.get("uses", "")).startswith("actions/cache@")
    ]
    assert "debate-bot-venv" in cache["with"]["path"]
    assert "inputs.python-version" in cache["with"]["key"] and "lock" in cache["with"]["key"]
    assert script.rstrip().endswith('debate-bot" action')
    for name in action["inputs"]:  # every input reaches the bot
        assert f"inputs.{name}" in ACTION.read_text()


def _agents_step() -> str:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    name = "Install the agent CLIs and bubblewrap"
    (step,) = [s for s in action["runs"]["steps"] if s.get("name") == name]
    assert step["if"] == "inputs.agents != ''"  # nothing installed unless asked
    return str(step["run"])


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ("codex", {"@openai/codex"}),
        ("claude-code, gemini", {"@anthropic-ai/claude-code", "@google/gemini-cli"}),
    ],
)
def test_the_action_installs_the_asked_agents_at_their_pins(
    tmp_path: Path, asked: str, expected: set[str]
) -> None:
    run = _agents_step()
    script = run.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    pins = ROOT / "deploy" / "agents" / "package.json"
    done = subprocess.run(
        [sys.executable, "-c", script, str(pins), asked],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    deps = json.loads(done.stdout)["dependencies"]
    pinned = json.loads(pins.read_text())["dependencies"]
    assert set(deps) == expected and all(deps[k] == pinned[k] for k in deps)


def test_the_action_refuses_an_unknown_agent() -> None:
    script = _agents_step().split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    pins = ROOT / "deploy" / "agents" / "package.json"
    done = subprocess.run(
        [sys.executable, "-c", script, str(pins), "cursor"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "unknown CLI cursor" in done.stderr
