"""`.github/debate.yml`, the repo config model, and the YAML helpers that report
errors by line (shared with plan frontmatter and eval case files)."""

from __future__ import annotations

from typing import Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.core.errors import ConfigError
from bot.core.yamllines import located_errors
from bot.engine.types import Mode, TurnOrder

Permission = Literal["read", "triage", "write", "maintain", "admin"]
# Where a repository keeps its config (its default branch; the org's `.github`
# repository as the fallback).
CONFIG_PATH: Final = ".github/debate.yml"


class PersonaConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=40)
    perspective: str = Field(default="", max_length=2000)
    model: str | None = None
    fallbacks: list[str] = Field(default_factory=list)


class Quotas(BaseModel):
    model_config = ConfigDict(extra="forbid")
    per_repo_per_day: int = Field(default=50, ge=0)
    per_user_per_day: int = Field(default=10, ge=0)


class BudgetConfig(BaseModel):
    """`budget:` in `.github/debate.yml`: lowers the operator's caps, never raises them."""

    model_config = ConfigDict(extra="forbid")
    per_run_usd: float | None = Field(default=None, gt=0)
    per_month_usd: float | None = Field(default=None, gt=0)


class ArbitrationConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    resolve_on_dismissed: bool = False
    label_on_confirmed: str | None = None
    # CONFIRMED / DISMISSED need a verified code citation, else ESCALATED (with tools).
    require_evidence: bool = True


class DesignReviewConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    paths: list[str] = Field(default_factory=list)
    # Scheduled repository reviews (bot/service/features/schedules/handlers.py): off unless set.
    schedule: Literal["weekly", "monthly"] | None = None
    scope: str | list[str] = "/"  # "/" (the repository) or folders


class RepoConfig(BaseModel):
    """`.github/debate.yml`. Holds no secret and no endpoint URL by construction."""

    model_config = ConfigDict(extra="forbid")
    command: str = "/debate"
    trigger_label: str = "debate"
    min_permission: Permission = "write"
    mode: Mode | None = None
    rounds: int = Field(default=3, ge=1, le=10)
    turn_order: TurnOrder = "parallel"
    response_scale: float = Field(default=1.5, gt=0, le=10)
    context_budget_kb: int = Field(default=100, ge=1, le=1024)
    synthesizer: str = "judge"
    personas: list[PersonaConfig] = Field(default_factory=list)
    judge: str | None = None
    # Models for auto-picked personas, in seat order (heterogeneous vendors are best).
    models: list[str] = Field(default_factory=list)
    voters: list[str] = Field(default_factory=list)
    tiers: list[list[str]] = Field(default_factory=list)
    on_unavailable: Literal["downgrade", "abort"] = "downgrade"
    quotas: Quotas = Field(default_factory=Quotas)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    max_tokens_per_run: int = Field(default=400_000, ge=1000)
    arbitration: ArbitrationConfig = Field(default_factory=ArbitrationConfig)
    design_review: DesignReviewConfig = Field(default_factory=DesignReviewConfig)
    # `debate:running` costs two extra writes per run (add, then remove): opt-in.
    running_label: bool = False
    # Personas and the judge read the repository at the pinned commit through
    # read-only tools (docs/configuration.md, `tools`); `--no-tools` turns it off per run.
    tools: bool = True

    @field_validator("mode")
    @classmethod
    def _mode_fits_a_repo_default(cls, v: Mode | None) -> Mode | None:
        if v == "arbitrate":
            raise ValueError(
                "arbitrate cannot be a default mode: use `/debate arbitrate` in a PR review thread"
            )
        return v

    @field_validator("command")
    @classmethod
    def _command_is_slash(cls, v: str) -> str:
        if not v.startswith("/") or " " in v:
            raise ValueError("command must start with '/' and contain no spaces")
        return v


def parse_yaml_mapping(text: str, *, source: str) -> dict[str, object]:
    """Parse YAML that must be a mapping; errors name the line (1-based)."""
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{source}: YAML error{where}: {problem}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys, got {type(data).__name__}")
    return data


def format_validation_error(exc: ValidationError, *, source: str, text: str | None = None) -> str:
    """Every error with its key; with the YAML ``text``, its line as well."""
    return f"{source}: " + "; ".join(located_errors(exc, text))


def load_repo_config(text: str | None, *, source: str = CONFIG_PATH) -> RepoConfig:
    if text is None:
        return RepoConfig()
    data = parse_yaml_mapping(text, source=source)
    try:
        return RepoConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source=source, text=text)) from exc
