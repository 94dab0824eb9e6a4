"""bot/cli/local/prepare.py: plan, references, repo config and spec, with no console.

What eval does: ``prepare_run`` then ``bot.run.execute`` with its own hooks.
Nothing is printed and nothing exits; a bad input is a ConfigError.
"""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest

from bot.cli.local.dry_run import Placeholders
from bot.cli.local.prepare import STDIN, Prepared, prepare_review, prepare_run
from bot.cli.local.spec import Flags
from bot.core.errors import ConfigError
from bot.core.settings import Settings
from bot.run.execute import Collect, execute

SETTINGS = Settings(_env_file=None)
PROVIDERS = frozenset({"scripted"})
QUESTION = "Should the billing API use gRPC or REST?\n"


def _prepare(
    checkout: Path, file: Path, flags: Flags | None = None, stdin: bytes | None = None
) -> Prepared:
    return prepare_run(
        file,
        flags or Flags(),
        settings=SETTINGS,
        available_providers=PROVIDERS,
        seed="s1",
        cwd=checkout,
        stdin=None if stdin is None else io.BytesIO(stdin),
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "debate.yml").write_text(
        "rounds: 2\njudge: scripted/rehearsal\nmodels: [scripted/rehearsal]\n"
        "max_tokens_per_run: 5000\non_unavailable: abort\n"
    )
    (tmp_path / "q.md").write_text(QUESTION)
    return tmp_path


def test_prepare_then_execute_without_a_console(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prepared = _prepare(checkout, checkout / "q.md")
    spec = prepared.spec
    assert prepared.source == "q.md" and prepared.output_dir == Path("debates")
    assert (spec.rounds, spec.judge, spec.default_models) == (
        2,
        "scripted/rehearsal",
        ("scripted/rehearsal",),
    )
    assert (spec.max_tokens, spec.on_unavailable, spec.seed) == (5000, "abort", "s1")
    hooks = Collect()
    outcome = anyio.run(lambda: execute(spec, (), models=Placeholders(), hooks=hooks))
    assert outcome.kind == "verdict" and hooks.turns
    assert capsys.readouterr() == ("", "")  # no console: the shell around it prints


def test_flags_win_over_the_repo_config(checkout: Path) -> None:
    flags = Flags(rounds=1, judge="scripted/judge", alternating=True)
    spec = _prepare(checkout, checkout / "q.md", flags).spec
    assert (spec.rounds, spec.judge, spec.turn_order) == (1, "scripted/judge", "alternating")


def test_standard_input_and_its_limits(checkout: Path) -> None:
    prepared = _prepare(checkout, STDIN, stdin=QUESTION.encode())
    assert prepared.source == "<stdin>" and prepared.spec.rounds == 2  # the repo config
    with pytest.raises(ConfigError, match="over 1 MiB"):
        _prepare(checkout, STDIN, stdin=b"x" * (1024 * 1024 + 1))
    with pytest.raises(ConfigError, match="standard input"):
        _prepare(checkout, STDIN)


def test_the_repo_configs_mode_stands_where_the_plan_names_none(checkout: Path) -> None:
    config = checkout / ".github" / "debate.yml"
    config.write_text(config.read_text() + "mode: critique\n")
    (checkout / "d.md").write_text("---\nmode: debate\n---\n" + QUESTION)

    assert _prepare(checkout, checkout / "q.md").spec.mode == "critique"  # the repo's default
    assert _prepare(checkout, checkout / "d.md").spec.mode == "debate"  # the frontmatter's
    flag = _prepare(checkout, checkout / "q.md", Flags(mode="debate"))
    assert flag.spec.mode == "debate"  # the flag's


def test_config_personas_that_do_not_fit_the_mode_are_refused_before_any_call(
    checkout: Path,
) -> None:
    (checkout / ".github" / "debate.yml").write_text(
        "personas:\n  - name: A\n  - name: B\n  - name: C\nmodels: [scripted/rehearsal]\n"
    )
    with pytest.raises(ConfigError, match=r"q\.md"):
        _prepare(checkout, checkout / "q.md")


def test_a_review_reads_the_repo_config_too(checkout: Path) -> None:
    (checkout / "README.md").write_text("# Shop\n\nOrders and payments.\n")
    prepared = prepare_review(
        checkout,
        Flags(),
        settings=SETTINGS,
        available_providers=PROVIDERS,
        seed="s1",
        cwd=checkout,
    )
    spec = prepared.spec
    assert spec.mode == "critique" and spec.subject_kind == "repository"
    assert spec.rounds == 2 and spec.judge == "scripted/rehearsal"
    assert prepared.source == spec.title
