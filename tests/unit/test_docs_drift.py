"""The docs' tables against the code they describe, so neither drifts: each test
derives its list from the code (Settings fields, the Typer app, the metrics
registry, the migrations folder, the schema), so a new setting, command,
metric, migration or table only needs its row in the docs."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main
from pydantic import BaseModel

from bot.cli.main import app
from bot.core.explain import settings_variable
from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.engine.personas import LENSES
from bot.inputs.plan import PlanFrontmatter
from bot.inputs.repo_config import RepoConfig
from bot.store.schema import metadata

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
NAME = re.compile(r"`([^`]+)`")


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a markdown heading line) up to the next heading
    of the same or a higher level."""
    text = path.read_text()
    start = text.index(heading + "\n")
    level = heading.split(" ", 1)[0]
    rest = text[start + len(heading) + 1 :]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", rest, re.M)]
    return rest[: ends[0]] if ends else rest


def first_cells(text: str, header: str) -> list[str]:
    """The first cells of the table whose header row starts with ``| header |``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    cells = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells.append(line.split("|")[1].strip())
    return cells


def names(cells: list[str]) -> set[str]:
    return {name for cell in cells for name in NAME.findall(cell)}


def test_every_setting_is_documented_and_every_documented_one_exists() -> None:
    text = section(DOCS / "configuration.md", "## Server settings")
    documented = names(first_cells(text, "variable"))
    variables: set[str] = set()
    for field in Settings.model_fields:
        variables.add(settings_variable(field))
        variables.add(f"DEBATE_BOT_{field.upper()}")  # the prefixed spelling works too
        assert settings_variable(field) in documented, f"{settings_variable(field)} undocumented"
    assert documented <= variables, f"documented but no setting: {documented - variables}"


def _keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys = set()
    for field, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            keys |= _keys(kind, f"{prefix}{field}.")
        else:
            keys.add(prefix + field)
    return keys


def test_repo_config_and_frontmatter_keys_match_their_tables() -> None:
    repo = section(DOCS / "configuration.md", "## Repo config: `.github/debate.yml`")
    assert names(first_cells(repo, "key")) == _keys(RepoConfig)
    plan = section(DOCS / "configuration.md", "## Plan frontmatter")
    assert names(first_cells(plan, "key")) == _keys(PlanFrontmatter)


def test_the_built_in_personas_are_documented() -> None:
    text = section(DOCS / "configuration.md", "### Built-in personas")
    assert names(first_cells(text, "persona")) == set(LENSES)


def test_the_readme_cli_block_lists_every_command() -> None:
    commands = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("```\ndebate-bot serve") :]
    block = block[: block.index("```", 4)]
    listed = set(re.findall(r"^debate-bot ([a-z][a-z-]*)", block, re.M))
    assert listed == commands, listed ^ commands


def _exported() -> dict[str, str]:
    """Every metric family a service registers, with the name it is scraped by."""
    metrics = Metrics()
    metrics.watch_runs(lambda: {"queued": 1}, lambda: dict.fromkeys(
        ("oldest_queued_age_seconds", "expired_leases", "resumed_active"), 0.0))  # fmt: skip
    metrics.watch_deliveries(lambda: {"pending": 0.0, "oldest_pending_age_seconds": 0.0})
    metrics.watch_rate_limits(lambda: {1: 5000})
    found = {}
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        found[name] = family.type
    return found


def _source_text() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "bot").rglob("*.py"))


def test_the_metrics_table_matches_the_registry() -> None:
    text = section(DOCS / "operations.md", "## Metrics")
    documented = names(first_cells(text, "metric"))
    exported = _exported()
    assert set(exported) <= documented, f"exported, undocumented: {set(exported) - documented}"
    # A documented metric this test's registry lacks must still be registered
    # somewhere in the code (another watcher): never a name nothing exports.
    source = _source_text()
    for name in documented - set(exported):
        assert name.removesuffix("_total") in source, f"{name}: documented, not in the code"


def test_every_alert_names_a_metric_the_code_exports() -> None:
    text = section(DOCS / "operations.md", "## Metrics")
    alerts = text[text.index("Worth alerting on:") :]
    mentioned = set(re.findall(r"debate_bot_[a-z_]+", alerts))
    assert mentioned, "the alert table names no metric"
    documented = names(first_cells(text, "metric"))
    for name in mentioned:
        base = re.sub(r"_(count|bucket|sum)$", "", name)
        assert base in documented, f"alert on {name}: no such metric in the table"
    # The backlog alert can fire: its gauges are exported.
    assert "debate_bot_deliveries_oldest_pending_age_seconds" in mentioned
    assert "debate_bot_deliveries_oldest_pending_age_seconds" in _exported()


def test_every_migration_is_listed() -> None:
    text = section(DOCS / "operations.md", "## Upgrading and migrating")
    listed = set(NAME.findall(text))
    for script in sorted((ROOT / "bot" / "store" / "migrations" / "versions").glob("[0-9]*.py")):
        assert script.stem in listed, f"{script.stem} missing from docs/operations.md"


def test_the_backup_table_lists_every_table() -> None:
    text = section(DOCS / "operations.md", "## Backups")
    documented = names(first_cells(text, "table"))
    assert documented == {*metadata.tables, "alembic_version"}
