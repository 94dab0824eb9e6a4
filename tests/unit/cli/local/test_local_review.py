"""`debate-bot review [PATH]`: a design review of a checkout on disk, end to end."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git checkout with docs, code, a vendored folder and an ignored file."""
    root = tmp_path / "shop"
    (root / "src" / "orders").mkdir(parents=True)
    (root / "node_modules" / "pad").mkdir(parents=True)
    (root / "README.md").write_text("# Shop\n\nOrders and payments; boundaries matter.\n")
    (root / "src" / "orders" / "core.py").write_text('"""Orders own the order lifecycle."""\n')
    (root / "node_modules" / "pad" / "index.js").write_text("VENDORED = 1\n")
    (root / "credentials.txt").write_text("IGNORED-BY-GIT\n")
    (root / ".gitignore").write_text("credentials.txt\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(tmp_path)
    return root


def review(*args: str) -> Result:
    return CliRunner().invoke(app, ["review", *args, "--model", "scripted/rehearsal"])


def transcript(result: Result) -> str:
    path = Path(result.stdout.strip().splitlines()[-1])
    return path.read_text(encoding="utf-8")


def test_reviewing_a_checkout_writes_a_design_review(checkout: Path) -> None:
    result = review(str(checkout), "--rounds", "1")
    assert result.exit_code == 0, result.output
    text = transcript(result)
    assert "## Design review of the repository shop" in text and "### Findings" in text
    assert "`README.md` (" in text  # the README went to the panel as context
    assert "IGNORED-BY-GIT" not in text and "credentials.txt" not in text  # .gitignore holds
    assert "VENDORED" not in text and "left out" in text


def test_reviewing_a_folder(checkout: Path) -> None:
    result = review(str(checkout / "src"), "--rounds", "1")
    assert result.exit_code == 0, result.output
    text = transcript(result)
    assert "folder `src/`" in text and "`src/orders/core.py` (" in text


def test_a_file_or_an_empty_folder_is_a_usage_error(checkout: Path, tmp_path: Path) -> None:
    as_file = review(str(checkout / "README.md"))
    assert as_file.exit_code == 2 and "not a folder" in as_file.output
    missing = review(str(checkout / "no-such-dir"))
    assert missing.exit_code == 2 and "no such folder" in missing.output
    (tmp_path / "empty").mkdir()
    empty = review(str(tmp_path / "empty"))
    assert empty.exit_code == 2 and "empty" in empty.output
    assert "Traceback" not in empty.output


def test_the_checkouts_repo_config_is_honoured(checkout: Path) -> None:
    (checkout / ".github").mkdir()
    (checkout / ".github" / "debate.yml").write_text(
        "rounds: 1\npersonas:\n  - name: Ledger\n    perspective: cost\n"
        "  - name: Pilot\n    perspective: speed\n"
    )
    result = review(str(checkout), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "rounds: up to 1" in result.stdout
    assert "Personas: Ledger (scripted/rehearsal), Pilot (scripted/rehearsal)" in result.stdout


def test_a_folder_outside_the_current_checkout(
    checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "README.md").write_text("# Other\n\nA folder that is no checkout.\n")
    monkeypatch.chdir(checkout)  # inside a checkout, reviewing a folder outside it
    result = review(str(other), "--rounds", "1")
    assert result.exit_code == 0, result.output
    assert "`README.md` (" in transcript(result)
