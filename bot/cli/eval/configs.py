"""What an eval compares: configurations, named on the command line or in a YAML file.

    single:MODEL                      one model answers the case directly
    vote:N:MODEL                      the majority of N independent answers
    debate:MODEL[,MODEL...][;rounds=R][;tools=on|off][;judge=MODEL]
                                      the service's debate; personas take the
                                      models in turn, the judge the first unless named

``--config NAME=SPEC`` names one (a bare SPEC is named after itself);
``--config FILE.yml`` reads a mapping of ``NAME: SPEC`` lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bot.core.errors import ConfigError
from bot.engine.agents import is_agent, parse_agent
from bot.inputs.repo_config import parse_yaml_mapping

Kind = Literal["single", "vote", "debate"]
MAX_VOTES = 25
MAX_ROUNDS = 10
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,59}$")
SPEC_HELP = (
    "single:MODEL | vote:N:MODEL | debate:MODEL[,MODEL...][;rounds=R][;tools=on|off][;judge=MODEL]"
)


@dataclass(frozen=True)
class EvalConfig:
    name: str
    kind: Kind
    models: tuple[str, ...]
    samples: int = 1  # vote: N
    rounds: int | None = None  # debate: None = the repo config's default
    tools: bool | None = None  # debate: None = not asked for
    judge: str | None = None  # debate: None = the first model

    def canonical(self) -> str:
        """The spec, normalized: with the case, what the result cache is keyed by."""
        if self.kind == "single":
            return f"single:{self.models[0]}"
        if self.kind == "vote":
            return f"vote:{self.samples}:{self.models[0]}"
        out = "debate:" + ",".join(self.models)
        if self.rounds is not None:
            out += f";rounds={self.rounds}"
        if self.tools is not None:
            out += f";tools={'on' if self.tools else 'off'}"
        if self.judge is not None:
            out += f";judge={self.judge}"
        return out

    def all_models(self) -> tuple[str, ...]:
        return self.models + ((self.judge,) if self.judge else ())


def _model(ref: str, spec: str) -> str:
    ref = ref.strip()
    if is_agent(ref):  # agent:<cli>[/<model>] (docs/agents.md)
        try:
            parse_agent(ref)
        except ConfigError as exc:
            raise ConfigError(f"configuration {spec!r}: {exc.public}") from None
        return ref
    provider, sep, name = ref.partition("/")
    if not sep or not provider or not name or any(c.isspace() for c in ref):
        raise ConfigError(
            f"configuration {spec!r}: {ref!r} is not a model reference like "
            "openai/gpt-4.1-mini; expected " + SPEC_HELP
        )
    return ref


def _int(value: str, what: str, spec: str, hi: int) -> int:
    if not value.isdigit() or not 1 <= int(value) <= hi:
        raise ConfigError(f"configuration {spec!r}: {what} must be a whole number from 1 to {hi}")
    return int(value)


def parse_spec(name: str, spec: str) -> EvalConfig:
    """One SPEC; ConfigError naming the mistake and the expected form."""
    kind, sep, rest = spec.strip().partition(":")
    if not sep or kind not in ("single", "vote", "debate"):
        raise ConfigError(f"configuration {spec!r}: expected {SPEC_HELP}")
    if kind == "single":
        return EvalConfig(name, "single", (_model(rest, spec),))
    if kind == "vote":
        n, sep, model = rest.partition(":")
        if not sep:
            raise ConfigError(f"configuration {spec!r}: expected vote:N:MODEL")
        return EvalConfig(
            name, "vote", (_model(model, spec),), samples=_int(n, "N", spec, MAX_VOTES)
        )
    models_part, *options = rest.split(";")
    models = tuple(_model(m, spec) for m in models_part.split(","))
    rounds: int | None = None
    tools: bool | None = None
    judge: str | None = None
    for opt in options:
        key, sep, value = opt.partition("=")
        key, value = key.strip(), value.strip()
        if key == "rounds" and sep:
            rounds = _int(value, "rounds", spec, MAX_ROUNDS)
        elif key == "tools" and value in ("on", "off"):
            tools = value == "on"
        elif key == "judge" and sep:
            judge = _model(value, spec)
        else:
            raise ConfigError(
                f"configuration {spec!r}: unknown option {opt!r}; "
                "options are rounds=R, tools=on|off and judge=MODEL"
            )
    return EvalConfig(name, "debate", models, rounds=rounds, tools=tools, judge=judge)


def parse_config(arg: str) -> list[EvalConfig]:
    """``NAME=SPEC``, a bare ``SPEC``, or a YAML file of them."""
    if arg.endswith((".yml", ".yaml")) and "=" not in arg:
        return load_config_file(Path(arg))
    name, sep, spec = arg.partition("=")
    if not sep or ":" in name:  # a bare spec: its '=' belongs to an option
        name, spec = arg, arg
    name = name.strip()
    if not _NAME.match(name) and name != spec:
        raise ConfigError(
            f"configuration name {name!r}: use letters, digits and . _ + - (at most 60)"
        )
    return [parse_spec(name, spec)]


def load_config_file(path: Path) -> list[EvalConfig]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({type(exc).__name__})") from exc
    data = parse_yaml_mapping(text, source=str(path))
    out = []
    for name, spec in data.items():
        if not isinstance(spec, str):
            raise ConfigError(f"{path}: {name}: the value must be a SPEC string ({SPEC_HELP})")
        if not _NAME.match(str(name)):
            raise ConfigError(f"{path}: configuration name {name!r}: use letters, digits, . _ + -")
        out.append(parse_spec(str(name), spec))
    if not out:
        raise ConfigError(f"{path}: no configurations in this file")
    return out


def check_unique(configs: list[EvalConfig]) -> list[EvalConfig]:
    seen: set[str] = set()
    for c in configs:
        if c.name in seen:
            raise ConfigError(f"configuration name {c.name!r} is used twice; name each once")
        seen.add(c.name)
    return configs
