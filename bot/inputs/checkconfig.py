"""`debate-bot check-config [PATH]`: the repo config (`.github/debate.yml`) and
plan frontmatter checked on this machine, as the bot would read them: every
error with its key and line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ValidationError

from bot.core.errors import ConfigError
from bot.core.yamllines import located_errors
from bot.inputs.plan import PlanFrontmatter, parse_plan, split_frontmatter
from bot.inputs.repo_config import CONFIG_PATH, RepoConfig, parse_yaml_mapping

REPO_CONFIG = Path(CONFIG_PATH)
DEFAULT_PLAN = Path(".github/debate.md")


@dataclass
class Report:
    checked: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # "path: line N: key: problem"


def _validate(model: type[BaseModel], text: str | None, source: str) -> list[str]:
    try:
        data = parse_yaml_mapping(text or "", source=source)
    except ConfigError as exc:  # YAML syntax: the message names the line
        return [exc.public]
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return [f"{source}: {e}" for e in located_errors(exc, text)]
    return []


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None


def check_file(path: Path) -> list[str]:
    source = str(path)
    text = _read(path)
    if path.suffix.lower() in (".yml", ".yaml"):
        return _validate(RepoConfig, text, source)
    try:
        frontmatter, _ = split_frontmatter(text, source=source)
    except ConfigError as exc:
        return [exc.public]
    errors = _validate(PlanFrontmatter, frontmatter, source) if frontmatter is not None else []
    if not errors:  # what only the whole plan shows: personas, synthesizer, empty
        try:
            parse_plan(text, source=source)
        except ConfigError as exc:
            errors.append(exc.public)
    return errors


def check_config(path: Path) -> Report:
    """A file is checked by its kind (.yml/.yaml: repo config, else a plan); a
    folder is a checkout: its .github/debate.yml and .github/debate.md."""
    report = Report()
    if path.is_dir():
        files = [path / p for p in (REPO_CONFIG, DEFAULT_PLAN) if (path / p).is_file()]
        if not files:
            raise ConfigError(
                f"{path}: no {REPO_CONFIG} or {DEFAULT_PLAN} here; give the file's path"
            )
    elif path.exists():
        files = [path]
    else:
        raise ConfigError(f"{path}: no such file or folder")
    for file in files:
        report.checked.append(file)
        report.errors += check_file(file)
    return report
