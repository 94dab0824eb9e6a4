"""What the CLI prints through rich comes out as written: square brackets are not
markup (`[eval]`, a URL's `[user:password@]`), `:name:` is not an emoji code
(bot/cli/terminal.py, the one place a Console is made)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.table import Table
from rich.text import Text

from bot.cli.eval import plot
from bot.cli.eval.main import run_eval
from bot.cli.terminal import make_console
from bot.core.settings import Settings

MESSAGES = [
    "no picture: install the eval extra (pip install 'debate-bot[eval]')",
    "DEBATE_BOT_WEBHOOK_PROXY_URL: https://[user:password@]smee.io/CHANNEL",
    "[bold]not bold[/bold] [red]x[/] \\[escaped] [link=https://example.com]y[/link]",
    "points 1:100:2 and :warning: stay text",
]


def printed(*what: object, width: int = 200) -> str:
    out = io.StringIO()
    console = make_console(file=out, width=width)
    for w in what:
        console.print(w)
    return out.getvalue()


@pytest.mark.parametrize("message", MESSAGES)
def test_a_message_prints_as_written(message: str) -> None:
    assert printed(message) == message + "\n"


@pytest.mark.parametrize("message", MESSAGES)
def test_a_table_cell_prints_as_written(message: str) -> None:
    table = Table("cell")
    table.add_row(message)
    assert message in printed(table)


def test_styles_still_apply_as_text() -> None:
    out = io.StringIO()
    console = make_console(file=out, width=80)
    console.print(Text("✓", style="green"), "done [eval]", style="bold")
    assert out.getvalue() == "✓ done [eval]\n"  # not a terminal: no colour codes


def test_the_stderr_console_writes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    make_console(stderr=True).print("pip install 'debate-bot[eval]'")
    captured = capsys.readouterr()
    assert captured.out == "" and "'debate-bot[eval]'" in captured.err


def test_eval_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(plot, "accuracy_cost_png", lambda figs, path: None)  # no matplotlib
    case = {
        "id": "c-1",
        "kind": "arbitrate",
        "comment": "`value` may be None here.",
        "path": "src/m.py",
        "line": 1,
        "diff_hunk": "@@ -1,1 +1,1 @@\n+y = value.attr",
        "files": {"src/m.py": "y = value.attr\n"},
        "expected": "CONFIRMED",
    }
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(case) + "\n")
    code = run_eval(
        [cases],
        ["one=single:scripted/oracle:1"],
        out=tmp_path / "out",
        budget_usd=None,
        concurrency=1,
        settings=Settings(_env_file=None),
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "no picture: install the eval extra (pip install 'debate-bot[eval]')" in err
    assert "debate-bot[eval]" in (tmp_path / "out" / "report.md").read_text()


def test_the_cli_makes_every_console_in_one_place() -> None:
    cli = Path(__file__).resolve().parents[3] / "bot" / "cli"
    makers = [
        str(path.relative_to(cli))
        for path in sorted(cli.rglob("*.py"))
        if "Console(" in path.read_text() and path.name != "terminal.py"
    ]
    assert makers == [], "make consoles with bot.cli.terminal.make_console"
