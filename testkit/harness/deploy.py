"""What deployment files may name: the CLI's commands and the settings' variables."""

from __future__ import annotations

import typer
from pydantic import AliasChoices

from bot.cli.main import app as cli_app
from bot.core.settings import Settings


def cli_commands() -> set[str]:
    group = typer.main.get_command(cli_app)
    return set(group.commands)  # type: ignore[attr-defined]


def settings_env_names() -> set[str]:
    """Variable names Settings reads (upper-cased: pydantic-settings matches env
    names case-insensitively). A field with a validation alias is read under its
    alias(es) only, without the prefix."""
    prefix = Settings.model_config.get("env_prefix", "")
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(c.upper() for c in alias.choices if isinstance(c, str))
        elif isinstance(alias, str):
            names.add(alias.upper())
        else:
            names.add(f"{prefix}{name}".upper())
    return names
