"""The flags of a `/debate` command: the one table of them (``FLAGS``: name,
value, where it is taken, its help line, how its value is read), reading them
shell-style from a command line into ``Flags``, and refusing those an action
does not take. A new flag is a row of the table and a field of ``Flags``.
Every mistake raises ``UsageError`` whose message is short and safe to post
back to the user."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from bot.core.errors import ConfigError, UsageError
from bot.core.redact import redact_secrets
from bot.engine.agents import CLIS, is_agent, parse_agent
from bot.engine.types import MODES, Mode

_WORD = re.compile(r"\S+")


MAX_ROUNDS: Final = 10


MAX_MODELS: Final = 8


MAX_PERSONAS: Final = 8


# `provider/model`: the provider (or named endpoint) is one plain segment; the model
# may carry dots, colons and further slashes (e.g. `openrouter/meta-llama/llama-3:8b`).
_MODEL_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[A-Za-z0-9._:/-]{1,160}")


_PERSONA_NAME = re.compile(r"[A-Za-z][A-Za-z0-9 _.'-]{0,39}")


_PERSONA_SPLIT = re.compile(r"\s+vs\.?\s+|\s*,\s*", re.IGNORECASE)


_QUOTES: Final = {'"': '"', "'": "'", "“": "”", "‘": "’"}  # mobile keyboards send curly quotes


_MAX_ECHO = 40  # never echo more than this much user input back in an error


@dataclass
class Flags:
    rounds: int | None = None
    mode: Mode | None = None
    personas: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    judge: str | None = None
    vote_stalemates: bool = False
    alternating: bool = False
    open_pr: bool = False
    file_issues: bool = False
    bots: bool = False
    no_tools: bool = False
    help: bool = False
    estimate: bool = False  # `--estimate`: the same as the `estimate` keyword


def echo(text: str) -> str:
    text = text.replace("`", "'")
    return text if len(text) <= _MAX_ECHO else text[: _MAX_ECHO - 1] + "…"


def _next_token(line: str, pos: int) -> tuple[str, int, int] | None:
    """Read one shell-style token at or after ``pos``: (token, start, end) or None."""
    n = len(line)
    while pos < n and line[pos].isspace():
        pos += 1
    if pos >= n:
        return None
    start = pos
    out: list[str] = []
    while pos < n and not line[pos].isspace():
        ch = line[pos]
        if ch in _QUOTES:
            close = line.find(_QUOTES[ch], pos + 1)
            if close < 0:
                raise UsageError("unbalanced quote in the command")
            out.append(line[pos + 1 : close])
            pos = close + 1
        else:
            out.append(ch)
            pos += 1
    return "".join(out), start, pos


def is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not token[1:].isdigit()


def _known_flag_name(token: str) -> str | None:
    name = token.split("=", 1)[0]
    if name in _BY_NAME:
        return name
    return _SHORT.get(token)


def _model_ref(value: str, flag: str) -> str:
    if is_agent(value):  # agent:<cli>[/<model>] (docs/agents.md)
        try:
            parse_agent(value)
        except ConfigError:
            raise UsageError(
                f"`{flag}`: `{echo(value)}` is not an agent seat; use "
                + ", ".join(f"`agent:{c}`" for c in CLIS)
                + ", optionally with `/<model>`"
            ) from None
        return value.strip()
    if "://" in value or not _MODEL_REF.fullmatch(value):
        raise UsageError(
            f"`{flag}` takes model references like `openai/gpt-4o`, not `{echo(value)}`"
        )
    return value


def _parse_personas(value: str) -> tuple[str, ...]:
    names = tuple(p.strip() for p in _PERSONA_SPLIT.split(value.strip()) if p.strip())
    if len(names) < 2:
        raise UsageError(
            '`--personas` needs at least two names, like `--personas "Atlas vs Forge"`'
        )
    if len(names) > MAX_PERSONAS:
        raise UsageError(f"`--personas` takes at most {MAX_PERSONAS} names")
    for name in names:
        if not _PERSONA_NAME.fullmatch(name):
            raise UsageError(f"`{echo(name)}` is not a valid persona name")
    if len({n.casefold() for n in names}) != len(names):
        raise UsageError("`--personas` names must be distinct")
    return names


def _rounds(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= MAX_ROUNDS:
        raise UsageError(f"`--rounds` must be a number from 1 to {MAX_ROUNDS}")
    return int(value)


def _mode(value: str) -> Mode:
    mode = value.lower()
    if mode not in MODES:
        raise UsageError(f"`--mode` must be one of {', '.join(MODES)}")
    return mode


def _models(value: str) -> tuple[str, ...]:
    refs = tuple(v.strip() for v in value.split(",") if v.strip())
    if not refs:
        raise UsageError("`--models` needs at least one model reference")
    if len(refs) > MAX_MODELS:
        raise UsageError(f"`--models` takes at most {MAX_MODELS} models")
    return tuple(_model_ref(r, "--models") for r in refs)


def _judge(value: str) -> str:
    return _model_ref(value.strip(), "--judge")


# Where a flag may be given: the debate (and `estimate`), `review`, `arbitrate`.
Where = Literal["debate", "review", "arbitrate", "decide"]
_RUNS: Final[frozenset[Where]] = frozenset({"debate", "review", "arbitrate"})


@dataclass(frozen=True)
class Flag:
    name: str
    field: str  # the attribute of ``Flags`` it sets
    help: str  # its line in the usage text
    value: str = ""  # its value as the help shows it; "" for a switch
    read: Callable[[str], object] | None = None  # the value's parser (UsageError)
    short: str = ""
    where: frozenset[Where] = _RUNS

    def help_line(self) -> str:
        shown = f"`{self.name} {self.value}`" if self.value else f"`{self.name}`"
        return f"- {f'`{self.short}`, ' if self.short else ''}{shown} — {self.help}"


FLAGS: Final[tuple[Flag, ...]] = (
    Flag("--rounds", "rounds", f"number of rounds, 1 to {MAX_ROUNDS}", "N", _rounds),
    Flag("--mode", "mode", "the kind of run", "|".join(MODES), _mode),
    Flag(
        "--personas",
        "personas",
        "persona names from the repo config",
        '"Atlas vs Forge"',
        _parse_personas,
    ),
    Flag(
        "--models",
        "models",
        "model references like `openai/gpt-4o,anthropic/claude-sonnet-4`,\n"
        "  or agent seats like `agent:codex`",
        "m1,m2",
        _models,
    ),
    Flag("--judge", "judge", "the judge's model reference", "m", _judge),
    Flag(
        "--vote-stalemates",
        "vote_stalemates",
        "unresolved proposal points go to a voter panel",
        short="-s",
    ),
    Flag("--alternating", "alternating", "personas speak in turn instead of in parallel"),
    Flag(
        "--no-tools",
        "no_tools",
        "personas argue from the prompt alone, without reading the repository",
    ),
    Flag(
        "--open-pr",
        "open_pr",
        "(`review` of a plan only) open a pull request with the revised plan",
        where=frozenset({"review"}),
    ),
    Flag(
        "--file-issues",
        "file_issues",
        "(`review` of a folder or the repository) file one issue per agreed finding",
        where=frozenset({"review"}),
    ),
    Flag(
        "--bots",
        "bots",
        "(`arbitrate` only) every unresolved review comment left by a bot",
        where=frozenset({"arbitrate"}),
    ),
    Flag(
        "--estimate",
        "estimate",
        "reply with the plan and its estimated cost instead of running it",
        where=frozenset({"debate"}),
    ),
    # Read wherever a debate's flags are; it asks for the usage text instead.
    Flag("--help", "help", "", short="-h", where=frozenset()),
)
_BY_NAME: Final = {f.name: f for f in FLAGS}
_SHORT: Final = {f.short: f.name for f in FLAGS if f.short}


def help_lines() -> str:
    """The flags' lines of the usage text (``--help`` is the usage text itself)."""
    return "\n".join(f.help_line() for f in FLAGS if f.help)


def _apply_flag(flags: Flags, seen: set[str], name: str, value: str | None) -> None:
    if name in seen:
        raise UsageError(f"`{name}` is given twice")
    seen.add(name)
    if value is not None and "://" in value:
        raise UsageError(f"`{name}` cannot take a URL")
    if value is not None and redact_secrets(value) != value:
        raise UsageError(f"`{name}` cannot take a secret; keys belong in the server settings")
    flag = _BY_NAME[name]
    if flag.read is None:
        setattr(flags, flag.field, True)
    else:
        assert value is not None  # _read_flag asks for one
        setattr(flags, flag.field, flag.read(value))


def _read_flag(line: str, token: str, end: int, flags: Flags, seen: set[str]) -> int:
    """Consume one flag starting with ``token``; return the position after it."""
    name = _known_flag_name(token)
    if name is None:
        raise UsageError(f"unknown flag `{echo(token)}`")
    takes_value = _BY_NAME[name].read is not None
    value: str | None = None
    if "=" in token and token.startswith("--"):
        if not takes_value:
            raise UsageError(f"`{name}` takes no value")
        value = token.split("=", 1)[1]
    elif takes_value:
        nxt = _next_token(line, end)
        if nxt is None or _known_flag_name(nxt[0]) is not None:
            raise UsageError(f"`{name}` needs a value")
        value, _, end = nxt
    _apply_flag(flags, seen, name, value)
    return end


def trailing_flags_start(line: str, pos: int) -> int:
    """Where flags typed after free text begin (a known long flag), or len(line)."""
    while (tok := next_token_lenient(line, pos)) is not None:
        token, start, end = tok
        if token.startswith("--") and _known_flag_name(token) is not None:
            return start
        pos = end
    return len(line)


def next_token_lenient(line: str, pos: int) -> tuple[str, int, int] | None:
    """Whitespace-delimited token, ignoring quotes (used to scan prose)."""
    m = _WORD.search(line, pos)
    return (m.group(), m.start(), m.end()) if m else None


def read_flags_until_word(line: str, pos: int, flags: Flags, seen: set[str]) -> int:
    """Read leading flags; return the start of the first non-flag token (or len)."""
    while (word := next_token_lenient(line, pos)) is not None:
        if not is_flag(word[0]):
            return word[1]  # prose starts here; it is never shell-tokenized
        tok = _next_token(line, pos)
        assert tok is not None
        pos = _read_flag(line, tok[0], tok[2], flags, seen)
    return len(line)


def read_all_flags(line: str, pos: int, flags: Flags, seen: set[str]) -> list[str]:
    """Read flags anywhere from ``pos`` on; return the positional tokens in order."""
    positional: list[str] = []
    while (tok := _next_token(line, pos)) is not None:
        token, _, end = tok
        if is_flag(token):
            pos = _read_flag(line, token, end, flags, seen)
        else:
            positional.append(token)
            pos = end
    return positional


def reject(flags: Flags, seen: set[str], where: Where, action: str) -> None:
    """Refuse the first flag given that ``where`` does not take."""
    extra = sorted(n for n in seen if where not in _BY_NAME[n].where)
    if extra:
        raise UsageError(f"`{extra[0]}` cannot be used with `{action}`")
