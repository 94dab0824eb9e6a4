"""Plan input: frontmatter and ``@path`` references (all pure).

The caller reads files; these functions only parse text. Errors are
``ConfigError`` with a message for the person who wrote the plan (YAML errors
name the line of the file). What to embed and how much (the subject cap, the
context budget) is ``bot.inputs.text``, which needs no settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.core.errors import ConfigError
from bot.engine.protocol import choose_mode
from bot.engine.types import Mode, is_reserved_name
from bot.inputs.repo_config import PersonaConfig, format_validation_error, parse_yaml_mapping

__all__ = [
    "Plan",
    "PlanFrontmatter",
    "check_personas",
    "choose_mode",  # re-exported: callers parse a plan and pick its mode together
    "find_refs",
    "parse_plan",
    "split_frontmatter",
]


class PlanFrontmatter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rounds: int = Field(default=3, ge=1, le=10)
    response_scale: float = Field(default=1.5, gt=0, le=10)
    context_budget_kb: int = Field(default=100, ge=0, le=1024)
    synthesizer: str = "judge"
    output_dir: str | None = None
    mode: Mode | None = None
    personas: list[PersonaConfig] = Field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    source: str
    title: str
    body: str  # the markdown after the frontmatter
    mode: Mode
    rounds: int = 3
    response_scale: float = 1.5
    context_budget_kb: int = 100
    synthesizer: str = "judge"
    output_dir: str | None = None
    personas: tuple[PersonaConfig, ...] = ()
    refs: tuple[str, ...] = ()  # raw @path references, in order
    frontmatter_keys: tuple[str, ...] = ()  # keys the file set (they override the repo config)


def split_frontmatter(text: str, *, source: str) -> tuple[str | None, str]:
    """(frontmatter YAML padded so its line numbers are the file's, body)."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            return "\n" + "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise ConfigError(f"{source}: the frontmatter opened on line 1 is never closed with '---'")


def parse_plan(text: str, *, source: str, mode: Mode | None = None) -> Plan:
    """Parse a plan file; ``mode`` (a CLI flag) wins over the frontmatter's
    ``mode``, which wins over the 50-word rule."""
    if "\x00" in text:
        raise ConfigError(f"{source}: looks like a binary file, not markdown")
    fm_text, body = split_frontmatter(text, source=source)
    data = parse_yaml_mapping(fm_text, source=source) if fm_text is not None else {}
    try:
        fm = PlanFrontmatter.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source=source, text=fm_text)) from exc
    if not body.strip():
        raise ConfigError(f"{source}: the plan is empty (nothing after the frontmatter)")
    resolved: Mode = mode or fm.mode or choose_mode(body)
    check_personas(fm.personas, resolved, source=source)
    synth = (
        "judge"
        if fm.synthesizer.strip().lower() in ("judge", "host", "")
        else fm.synthesizer.strip()
    )
    if synth != "judge" and fm.personas and synth not in {p.name for p in fm.personas}:
        raise ConfigError(
            f"{source}: synthesizer must be 'judge' or one of the persona names, got {synth!r}"
        )
    return Plan(
        source=source,
        title=plan_title(body, source),
        body=body,
        mode=resolved,
        rounds=fm.rounds,
        response_scale=fm.response_scale,
        context_budget_kb=fm.context_budget_kb,
        synthesizer=synth,
        output_dir=fm.output_dir,
        personas=tuple(fm.personas),
        refs=tuple(find_refs(body)),
        frontmatter_keys=tuple(sorted(data)),
    )


def check_personas(
    personas: list[PersonaConfig] | tuple[PersonaConfig, ...], mode: Mode, *, source: str
) -> None:
    n = len(personas)
    if n == 0:
        return  # auto-picked
    if mode == "proposal" and n < 2:
        raise ConfigError(f"{source}: personas: proposal mode needs 2 or more personas, got {n}")
    if mode != "proposal" and n != 2:
        raise ConfigError(f"{source}: personas: {mode} mode needs exactly 2 personas, got {n}")
    names = [p.name.strip().casefold() for p in personas]
    if len(set(names)) != n:
        raise ConfigError(f"{source}: personas: names must be unique")
    bad = [p.name for p in personas if is_reserved_name(p.name.strip())]
    if bad:
        raise ConfigError(f"{source}: personas: the name {bad[0]!r} is reserved")


def plan_title(body: str, source: str) -> str:
    for line in body.splitlines():
        m = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if m:
            return m.group(1)[:120]
    first = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
    return (first[:117] + "…") if len(first) > 120 else (first or source)


# --- @path references -------------------------------------------------------

_REF = re.compile(r"(?:(?<=\s)|^)@([^\s`'\"<>()\[\]{},;|]+)", re.M)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def find_refs(text: str) -> list[str]:
    """``@path`` references: ``@`` after whitespace or at line start, followed
    by a path containing ``/`` or ``.``; none inside fenced code blocks."""
    refs: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if (
                m
                and m.group(1)[0] == fence[0]
                and len(m.group(1)) >= len(fence)
                and not line.strip()[len(m.group(1)) :].strip()
            ):
                fence = None
            continue
        for r in _REF.finditer(line):
            path = r.group(1).rstrip(".,:;!?")
            if ("/" in path or "." in path) and path.strip("./") and path not in refs:
                refs.append(path)
    return refs
