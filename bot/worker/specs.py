"""Building a DebateSpec from a command, the repo config and server settings."""

from __future__ import annotations

from dataclasses import dataclass

from bot.commands.parser import Command
from bot.config import RepoConfig, Settings
from bot.debate.types import ArbitrationContext, ContextFile, DebateSpec, Mode, PersonaSpec
from bot.errors import ConfigError

NO_MODEL = (
    "No model is configured. Set `judge` and `personas` (or `models`) in "
    "`.github/debate.yml`, or ask the operator to set DEBATE_BOT_DEFAULT_MODEL."
)


@dataclass(frozen=True)
class Subject:
    title: str
    text: str
    truncated: bool = False
    context_files: tuple[ContextFile, ...] = ()
    warnings: tuple[str, ...] = ()


def _personas(command: Command, config: RepoConfig) -> tuple[PersonaSpec, ...]:
    from bot.debate.personas import LENSES

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
    overrides: dict[str, object] | None = None,
) -> DebateSpec:
    """``overrides`` carries a plan file's frontmatter (rounds, response_scale,
    synthesizer, personas), which wins over the repo config for that run."""
    personas = _personas(command, config)
    ov = overrides or {}
    if isinstance(ov.get("personas"), tuple) and ov["personas"]:
        personas = ov["personas"]  # type: ignore[assignment]
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
    rounds = command.rounds or int(ov.get("rounds", config.rounds))  # type: ignore[call-overload]
    return DebateSpec(
        mode=mode,
        title=subject.title,
        subject=subject.text,
        subject_truncated=subject.truncated,
        personas=personas,
        judge=judge,
        rounds=rounds,
        turn_order="alternating" if command.alternating else config.turn_order,
        response_scale=float(ov.get("response_scale", config.response_scale)),  # type: ignore[arg-type]
        synthesizer=str(ov.get("synthesizer", config.synthesizer)),
        context_files=subject.context_files,
        warnings=subject.warnings,
        max_tokens=config.max_tokens_per_run,
        vote_stalemates=command.vote_stalemates,
        voters=tuple(config.voters),
        tiers=tuple(tuple(t) for t in config.tiers),
        on_unavailable=config.on_unavailable,
        available_providers=available_providers,
        arbitration=arbitration,
        seed=run_id,
        default_models=tuple(models),
    )
