"""The DebateSpec of a local run: command-line flags over the plan's frontmatter
over the server settings, and a check that every model can actually be reached.

Model precedence (documented in the README's `debate-bot run` section):
- personas: ``--model`` for every persona, else each persona's frontmatter
  ``model``, else ``DEBATE_BOT_DEFAULT_MODELS`` seat by seat, else
  ``DEBATE_BOT_DEFAULT_MODEL``;
- judge: ``--judge``, else ``DEBATE_BOT_DEFAULT_MODEL``, else ``--model``, else
  the first persona's model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from bot.commands.plan import Plan
from bot.config import RepoConfig, Settings
from bot.debate.routing import base_models, judge_models
from bot.debate.types import ContextFile, DebateSpec, Mode, PersonaSpec
from bot.errors import ConfigError
from bot.llm.router import ModelRouter

NO_MODEL = (
    "no model is configured. Set DEBATE_BOT_DEFAULT_MODEL (e.g. openai/gpt-4.1-mini) or pass "
    "--model, together with the provider's key: OPENAI_API_KEY (or OPENAI_BASE_URL for a local "
    "OpenAI-compatible server) or ANTHROPIC_API_KEY. For an offline rehearsal without any key, "
    "pass --model scripted/rehearsal."
)

_CREDENTIALS = {
    "openai": "set OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server)",
    "anthropic": "set ANTHROPIC_API_KEY",
    "ollama": "set OPENAI_BASE_URL to the Ollama server (e.g. http://127.0.0.1:11434/v1)",
}


@dataclass(frozen=True)
class Overrides:
    """The command-line flags that win over the frontmatter."""

    rounds: int | None = None
    mode: Mode | None = None
    model: str | None = None
    judge: str | None = None
    alternating: bool = False
    no_tools: bool = False


def parse_mode(value: str | None) -> Mode | None:
    if value is None:
        return None
    modes: tuple[Mode, ...] = get_args(Mode)
    for mode in modes:
        if value.strip().lower() == mode:
            return mode
    raise ConfigError(f"--mode must be one of {', '.join(modes)}; got {value!r}")


def build_spec(
    plan: Plan,
    *,
    subject: str,
    subject_truncated: bool,
    context_files: tuple[ContextFile, ...],
    warnings: tuple[str, ...],
    overrides: Overrides,
    settings: Settings,
    available_providers: frozenset[str],
    seed: str,
    tools_available: bool = False,
) -> DebateSpec:
    model = (overrides.model or "").strip() or None
    personas = tuple(
        PersonaSpec(p.name, p.perspective, model or p.model or "", tuple(p.fallbacks))
        for p in plan.personas
    )
    default_models: tuple[str, ...] = (
        (model,)
        if model
        else tuple(settings.default_models)
        or ((settings.default_model,) if settings.default_model else ())
    )
    judge = (overrides.judge or "").strip() or settings.default_model or model or ""
    if not judge and not default_models and not any(p.model for p in personas):
        raise ConfigError(NO_MODEL)
    if subject_truncated:
        warnings = (*warnings, "the plan was longer than the subject limit and was truncated")
    return DebateSpec(
        mode=plan.mode,
        title=plan.title,
        subject=subject,
        subject_truncated=subject_truncated,
        personas=personas,
        judge=judge,
        rounds=overrides.rounds or plan.rounds,
        turn_order="alternating" if overrides.alternating else "parallel",
        response_scale=plan.response_scale,
        synthesizer=plan.synthesizer,
        context_files=context_files,
        warnings=warnings,
        # The service's default per-run token cap guards a local bill just the same.
        max_tokens=RepoConfig().max_tokens_per_run,
        available_providers=available_providers,
        seed=seed,
        default_models=default_models,
        # Tools need a reader of the working tree (tools_available).
        tools=tools_available and not overrides.no_tools,
    )


def check_models(spec: DebateSpec, router: ModelRouter) -> tuple[str, ...]:
    """Raise ConfigError for a malformed reference or a primary model whose
    provider has no credentials; return notes on unreachable fallbacks."""
    seats = max(2, len(spec.personas))
    roles: list[tuple[str, tuple[str, ...], str]] = []
    for i in range(seats):
        name = spec.personas[i].name if i < len(spec.personas) else f"auto-picked persona {i + 1}"
        roles.append((f"persona {name!r}", base_models(spec, i), "--model"))
    roles.append(("the judge", judge_models(spec), "--judge"))
    available = router.available_providers()
    notes: list[str] = []
    for role, refs, flag in roles:
        for position, ref in enumerate(refs):
            prov, _ = router.resolve(ref)
            if prov in available:
                continue
            hint = _CREDENTIALS.get(prov, f"configure the {prov!r} provider")
            if position == 0:
                raise ConfigError(
                    f"{role} uses {ref!r}, but provider {prov!r} has no credentials: {hint}, "
                    f"or choose another model with {flag}."
                )
            notes.append(f"fallback {ref!r} of {role} is skipped: {hint} to use it")
    return tuple(dict.fromkeys(notes))
