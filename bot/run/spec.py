"""Building a DebateSpec from a command, the repo config and server settings."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.errors import ConfigError, ProtocolError
from bot.core.settings import Settings
from bot.engine.personas import LENSES
from bot.engine.protocol import next_step
from bot.engine.types import (
    ArbitrationContext,
    ContextFile,
    DebateSpec,
    Mode,
    PersonaSpec,
    RepoRef,
    SubjectKind,
)
from bot.inputs.parser import Command
from bot.inputs.repo_config import RepoConfig

NO_MODEL = (
    "No model is configured. Set `judge` and `personas` (or `models`) in "
    "`.github/debate.yml`, or ask the operator to set DEBATE_BOT_DEFAULT_MODEL."
)


@dataclass(frozen=True)
class Overrides:
    """A plan file's frontmatter: wins over the repo config for that run."""

    rounds: int | None = None
    response_scale: float | None = None
    synthesizer: str | None = None
    personas: tuple[PersonaSpec, ...] = ()


@dataclass(frozen=True)
class Subject:
    title: str
    text: str
    truncated: bool = False
    context_files: tuple[ContextFile, ...] = ()
    warnings: tuple[str, ...] = ()
    kind: SubjectKind = "plan"


def _personas(command: Command, config: RepoConfig) -> tuple[PersonaSpec, ...]:
    configured = {p.name.lower(): p for p in config.personas}
    if command.personas:
        chosen = []
        for name in command.personas:
            p = configured.get(name.lower())
            if p is not None:
                chosen.append(PersonaSpec(p.name, p.perspective, p.model or "", tuple(p.fallbacks)))
            else:
                lens = next((v for k, v in LENSES.items() if k.lower() == name.lower()), None)
                chosen.append(PersonaSpec(name, lens or f"{name}'s honest view", ""))
        return tuple(chosen)
    return tuple(
        PersonaSpec(p.name, p.perspective, p.model or "", tuple(p.fallbacks))
        for p in config.personas
    )


def _seating(
    command: Command, config: RepoConfig, settings: Settings, ov: Overrides
) -> tuple[tuple[PersonaSpec, ...], list[str], str]:
    """The personas, the models for auto-picked seats and the judge: the command's
    over the plan's over the repo config's over the operator's."""
    personas = ov.personas or _personas(command, config)
    models = list(command.models) or list(config.models) or list(settings.default_models)
    if command.models and personas:
        personas = tuple(
            PersonaSpec(p.name, p.perspective, models[i % len(models)], p.fallbacks)
            for i, p in enumerate(personas)
        )
    judge = command.judge or config.judge or settings.default_model or (models[0] if models else "")
    if not models and settings.default_model:
        models = [settings.default_model]
    if not judge and not any(p.model for p in personas):
        raise ConfigError(NO_MODEL)
    return personas, models, judge


def build_spec(
    *,
    command: Command,
    config: RepoConfig,
    settings: Settings,
    mode: Mode,
    subject: Subject,
    available_providers: frozenset[str],
    run_id: str,
    arbitration: ArbitrationContext | None = None,
    overrides: Overrides | None = None,
    repo_ref: RepoRef | None = None,
    tools_available: bool = False,
) -> DebateSpec:
    """Raises ConfigError (a message for the user) when no model is configured or
    the personas don't fit the mode, before any run exists."""
    ov = overrides or Overrides()
    personas, models, judge = _seating(command, config, settings, ov)
    spec = DebateSpec(
        mode=mode,
        title=subject.title,
        subject=subject.text,
        subject_truncated=subject.truncated,
        personas=personas,
        judge=judge,
        rounds=command.rounds or ov.rounds or config.rounds,
        turn_order="alternating" if command.alternating else config.turn_order,
        response_scale=ov.response_scale or config.response_scale,
        synthesizer=ov.synthesizer or config.synthesizer,
        context_files=subject.context_files,
        warnings=subject.warnings,
        subject_kind=subject.kind,
        max_tokens=config.max_tokens_per_run,
        vote_stalemates=command.vote_stalemates,
        voters=tuple(config.voters),
        tiers=tuple(tuple(t) for t in config.tiers),
        on_unavailable=config.on_unavailable,
        available_providers=available_providers,
        arbitration=arbitration,
        seed=run_id,
        default_models=tuple(models),
        repo_ref=repo_ref,
        # Tools need the shell's snapshot of the pinned commit (tools_available).
        tools=tools_available and config.tools and not command.no_tools,
        require_evidence=config.arbitration.require_evidence,
    )
    try:
        next_step(spec, ())  # the engine's own checks (persona count, names, rounds)
    except ProtocolError as exc:
        raise ConfigError(f"{exc}.") from exc
    return spec
