"""bot/local/prepare.py: plan, references, repo config and spec, with no console.

What eval does: ``prepare_run`` then ``bot.runner.execute`` with its own hooks.
Nothing is printed and nothing exits; a bad input is a ConfigError.
"""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest

from bot.config import Settings
from bot.errors import ConfigError
from bot.local.dry_run import Placeholders
from bot.local.prepare import STDIN, prepare_review, prepare_run
from bot.local.spec import Flags
from bot.runner import Collect, execute

SETTINGS = Settings(_env_file=None)
PROVIDERS = frozenset({"scripted"})
QUESTION = "Should the billing API use gRPC or REST?\n"


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
    prepared = prepare_run(
        checkout / "q.md",
        Flags(),
        settings=SETTINGS,
        available_providers=PROVIDERS,
        seed="s1",
        cwd=checkout,
    )
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
    spec = prepare_run(
        checkout / "q.md",
        Flags(rounds=1, judge="scripted/judge", alternating=True),
        settings=SETTINGS,
        available_providers=PROVIDERS,
        seed="s",
        cwd=checkout,
    ).spec
    assert (spec.rounds, spec.judge, spec.turn_order) == (1, "scripted/judge", "alternating")


def test_standard_input_and_its_limits(checkout: Path) -> None:
    prepared = prepare_run(
        STDIN,
        Flags(),
        settings=SETTINGS,
        available_providers=PROVIDERS,
        seed="s",
        cwd=checkout,
        stdin=io.BytesIO(QUESTION.encode()),
    )
    assert prepared.source == "<stdin>" and prepared.spec.rounds == 2  # the repo config
    with pytest.raises(ConfigError, match="over 1 MiB"):
        prepare_run(
            STDIN,
            Flags(),
            settings=SETTINGS,
            available_providers=PROVIDERS,
            seed="s",
            cwd=checkout,
            stdin=io.BytesIO(b"x" * (1024 * 1024 + 1)),
        )
    with pytest.raises(ConfigError, match="standard input"):
        prepare_run(
            STDIN, Flags(), settings=SETTINGS, available_providers=PROVIDERS, seed="s", cwd=checkout
        )


def test_the_repo_configs_mode_stands_where_the_plan_names_none(checkout: Path) -> None:
    config = checkout / ".github" / "debate.yml"
    config.write_text(config.read_text() + "mode: critique\n")
    (checkout / "d.md").write_text("---\nmode: debate\n---\n" + QUESTION)

    def mode(name: str, flags: Flags) -> str:
        return prepare_run(
            checkout / name,
            flags,
            settings=SETTINGS,
            available_providers=PROVIDERS,
            seed="s",
            cwd=checkout,
        ).spec.mode

    assert mode("q.md", Flags()) == "critique"  # the repo's default
    assert mode("d.md", Flags()) == "debate"  # the frontmatter's
    assert mode("q.md", Flags(mode="debate")) == "debate"  # the flag's


def test_config_personas_that_do_not_fit_the_mode_are_refused_before_any_call(
    checkout: Path,
) -> None:
    (checkout / ".github" / "debate.yml").write_text(
        "personas:\n  - name: A\n  - name: B\n  - name: C\nmodels: [scripted/rehearsal]\n"
    )
    with pytest.raises(ConfigError, match=r"q\.md"):
        prepare_run(
            checkout / "q.md",
            Flags(),
            settings=SETTINGS,
            available_providers=PROVIDERS,
            seed="s",
            cwd=checkout,
        )


def test_a_review_reads_the_repo_config_too(checkout: Path) -> None:
    (checkout / "README.md").write_text("# Shop\n\nOrders and payments.\n")
    prepared = prepare_review(
        checkout,
        Flags(),
        settings=SETTINGS,
        available_providers=PROVIDERS,
        seed="s",
        cwd=checkout,
    )
    spec = prepared.spec
    assert spec.mode == "critique" and spec.subject_kind == "repository"
    assert spec.rounds == 2 and spec.judge == "scripted/rehearsal"
    assert prepared.source == spec.title
