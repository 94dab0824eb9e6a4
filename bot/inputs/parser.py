"""Parse `/debate …` comment commands.

Only the first line of a comment holds the command; the following lines are
extra context for the topic. Flags are tokenized shell-style (quotes group
words) but the topic itself is kept verbatim, so apostrophes and backslashes in
ordinary prose never trip the tokenizer. Every mistake raises ``UsageError``
whose message is short and safe to post back to the user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from bot.core.errors import ConfigError, UsageError
from bot.core.redact import redact_secrets
from bot.engine.agents import CLIS, is_agent, parse_agent
from bot.engine.types import MODES, Mode

Action = Literal["debate", "review", "arbitrate", "decide", "status", "cancel", "help", "estimate"]
Choice = Literal["A", "B", "both"]

MAX_ROUNDS: Final = 10
MAX_MODELS: Final = 8
MAX_PERSONAS: Final = 8

# `provider/model`: the provider (or named endpoint) is one plain segment; the model
# may carry dots, colons and further slashes (e.g. `openrouter/meta-llama/llama-3:8b`).
_MODEL_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[A-Za-z0-9._:/-]{1,160}")
_PERSONA_NAME = re.compile(r"[A-Za-z][A-Za-z0-9 _.'-]{0,39}")
_PERSONA_SPLIT = re.compile(r"\s+vs\.?\s+|\s*,\s*", re.IGNORECASE)
_ISSUE_REF = re.compile(r"#(\d{1,9})")
_REVIEW_COMMENT_URL = re.compile(
    r"https://(?P<host>[A-Za-z0-9.-]+(?::\d+)?)/(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)"
    r"/pull/(?P<pr>\d{1,9})(?:/(?:files|changes)(?:/[0-9a-f]{7,40})?)?"
    r"#(?:discussion_)?r(?P<comment>\d{1,20})"
)
_WORD = re.compile(r"\S+")
_DECIDE_POINT = re.compile(r"(?:#|p|point[-_ ]?)?(\d{1,4})", re.IGNORECASE)
_QUOTES: Final = {'"': '"', "'": "'", "“": "”", "‘": "’"}  # mobile keyboards send curly quotes
_MAX_ECHO = 40  # never echo more than this much user input back in an error

# Long flags; the value says whether the flag takes an argument.
_LONG_FLAGS: Final[dict[str, bool]] = {
    "--rounds": True,
    "--mode": True,
    "--personas": True,
    "--models": True,
    "--judge": True,
    "--vote-stalemates": False,
    "--alternating": False,
    "--open-pr": False,
    "--file-issues": False,
    "--bots": False,
    "--no-tools": False,
    "--help": False,
    "--estimate": False,
}
_SHORT_FLAGS: Final = {"-s": "--vote-stalemates", "-h": "--help"}


@dataclass(frozen=True)
class ReviewCommentRef:
    """A pull-request review comment named by its URL."""

    host: str
    owner: str
    repo: str
    pr_number: int
    comment_id: int


@dataclass(frozen=True)
class Command:
    action: Action
    topic: str = ""  # topic text from the command line itself
    context: str = ""  # the comment's following lines, verbatim (stripped)
    issue_ref: int | None = None
    path: str | None = None
    url: str | None = None
    review_comment: ReviewCommentRef | None = None
    bots: bool = False
    rounds: int | None = None
    mode: Mode | None = None
    personas: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    judge: str | None = None
    vote_stalemates: bool = False
    alternating: bool = False
    open_pr: bool = False
    file_issues: bool = False  # `review` of a folder or the repository
    no_tools: bool = False  # debate from the prompt alone, without repository tools
    decide_point: int | None = None
    decide_choice: Choice | None = None

    @property
    def subject(self) -> str:
        """Topic line and context together: what the user asked to debate."""
        return "\n\n".join(part for part in (self.topic, self.context) if part)


@dataclass
class _Flags:
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


def _echo(text: str) -> str:
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


def _is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not token[1:].isdigit()


def _known_flag_name(token: str) -> str | None:
    name = token.split("=", 1)[0]
    if name in _LONG_FLAGS:
        return name
    return _SHORT_FLAGS.get(token)


def _model_ref(value: str, flag: str) -> str:
    if is_agent(value):  # agent:<cli>[/<model>] (docs/agents.md)
        try:
            parse_agent(value)
        except ConfigError:
            raise UsageError(
                f"`{flag}`: `{_echo(value)}` is not an agent seat; use "
                + ", ".join(f"`agent:{c}`" for c in CLIS)
                + ", optionally with `/<model>`"
            ) from None
        return value.strip()
    if "://" in value or not _MODEL_REF.fullmatch(value):
        raise UsageError(
            f"`{flag}` takes model references like `openai/gpt-4o`, not `{_echo(value)}`"
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
            raise UsageError(f"`{_echo(name)}` is not a valid persona name")
    if len({n.casefold() for n in names}) != len(names):
        raise UsageError("`--personas` names must be distinct")
    return names


def _apply_flag(flags: _Flags, seen: set[str], name: str, value: str | None) -> None:
    if name in seen:
        raise UsageError(f"`{name}` is given twice")
    seen.add(name)
    if value is not None and "://" in value:
        raise UsageError(f"`{name}` cannot take a URL")
    if value is not None and redact_secrets(value) != value:
        raise UsageError(f"`{name}` cannot take a secret; keys belong in the server settings")
    if name == "--rounds":
        assert value is not None
        if not value.isdigit() or not 1 <= int(value) <= MAX_ROUNDS:
            raise UsageError(f"`--rounds` must be a number from 1 to {MAX_ROUNDS}")
        flags.rounds = int(value)
    elif name == "--mode":
        assert value is not None
        mode = value.lower()
        if mode not in MODES:
            raise UsageError(f"`--mode` must be one of {', '.join(MODES)}")
        flags.mode = mode
    elif name == "--personas":
        assert value is not None
        flags.personas = _parse_personas(value)
    elif name == "--models":
        assert value is not None
        refs = tuple(v.strip() for v in value.split(",") if v.strip())
        if not refs:
            raise UsageError("`--models` needs at least one model reference")
        if len(refs) > MAX_MODELS:
            raise UsageError(f"`--models` takes at most {MAX_MODELS} models")
        flags.models = tuple(_model_ref(r, "--models") for r in refs)
    elif name == "--judge":
        assert value is not None
        flags.judge = _model_ref(value.strip(), "--judge")
    elif name == "--vote-stalemates":
        flags.vote_stalemates = True
    elif name == "--alternating":
        flags.alternating = True
    elif name == "--open-pr":
        flags.open_pr = True
    elif name == "--file-issues":
        flags.file_issues = True
    elif name == "--bots":
        flags.bots = True
    elif name == "--no-tools":
        flags.no_tools = True
    elif name == "--help":
        flags.help = True
    elif name == "--estimate":
        flags.estimate = True


def _read_flag(line: str, token: str, end: int, flags: _Flags, seen: set[str]) -> int:
    """Consume one flag starting with ``token``; return the position after it."""
    name = _known_flag_name(token)
    if name is None:
        raise UsageError(f"unknown flag `{_echo(token)}`")
    takes_value = _LONG_FLAGS[name]
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


def _trailing_flags_start(line: str, pos: int) -> int:
    """Where flags typed after free text begin (a known long flag), or len(line)."""
    while (tok := _next_token_lenient(line, pos)) is not None:
        token, start, end = tok
        if token.startswith("--") and _known_flag_name(token) is not None:
            return start
        pos = end
    return len(line)


def _next_token_lenient(line: str, pos: int) -> tuple[str, int, int] | None:
    """Whitespace-delimited token, ignoring quotes (used to scan prose)."""
    m = _WORD.search(line, pos)
    return (m.group(), m.start(), m.end()) if m else None


def _read_flags_until_word(line: str, pos: int, flags: _Flags, seen: set[str]) -> int:
    """Read leading flags; return the start of the first non-flag token (or len)."""
    while (word := _next_token_lenient(line, pos)) is not None:
        if not _is_flag(word[0]):
            return word[1]  # prose starts here; it is never shell-tokenized
        tok = _next_token(line, pos)
        assert tok is not None
        pos = _read_flag(line, tok[0], tok[2], flags, seen)
    return len(line)


def _read_all_flags(line: str, pos: int, flags: _Flags, seen: set[str]) -> list[str]:
    """Read flags anywhere from ``pos`` on; return the positional tokens in order."""
    positional: list[str] = []
    while (tok := _next_token(line, pos)) is not None:
        token, _, end = tok
        if _is_flag(token):
            pos = _read_flag(line, token, end, flags, seen)
        else:
            positional.append(token)
            pos = end
    return positional


def _split_first_line(body: str) -> tuple[str, str]:
    text = body.lstrip()
    first, _, rest = text.partition("\n")
    return first.rstrip("\r").strip(), rest.strip()


def _match_command(line: str, command: str) -> str | None:
    """The text after the command word, or None when the line is not this command."""
    if line[: len(command)].lower() != command.lower():
        return None
    after = line[len(command) :]
    if after and not after[0].isspace():
        return None  # `/debater` is a different word
    return after


def _clean_path(raw: str) -> str:
    path = raw.strip()
    if path.startswith("@"):
        path = path[1:]
    while path.startswith("./"):
        path = path[2:]
    if (
        not path
        or len(path) > 400
        or "://" in path
        or path.startswith(("/", "\\", "~"))
        or any(part in ("..", "") for part in path.split("/"))
        or any(ord(c) < 32 or c in "\\\x7f" for c in path)
    ):
        raise UsageError(f"`{_echo(raw)}` is not a repository file path like `docs/plan.md`")
    return path


def _reject(flags: _Flags, seen: set[str], allowed: set[str], action: str) -> None:
    extra = sorted(seen - allowed)
    if extra:
        raise UsageError(f"`{extra[0]}` cannot be used with `{action}`")


_COMMON_FLAGS: Final = {
    "--rounds",
    "--mode",
    "--personas",
    "--models",
    "--judge",
    "--vote-stalemates",
    "--alternating",
    "--no-tools",
}


def _build(
    action: Action,
    flags: _Flags,
    *,
    mode: Mode | None = None,
    topic: str = "",
    context: str = "",
    issue_ref: int | None = None,
    path: str | None = None,
    url: str | None = None,
    review_comment: ReviewCommentRef | None = None,
) -> Command:
    """A Command carrying the flags plus the action's own fields."""
    return Command(
        action=action,
        topic=topic,
        context=context,
        issue_ref=issue_ref,
        path=path,
        url=url,
        review_comment=review_comment,
        bots=flags.bots,
        rounds=flags.rounds,
        mode=mode or flags.mode,
        personas=flags.personas,
        models=flags.models,
        judge=flags.judge,
        vote_stalemates=flags.vote_stalemates,
        alternating=flags.alternating,
        open_pr=flags.open_pr,
        file_issues=flags.file_issues,
        no_tools=flags.no_tools,
    )


def _parse_review(line: str, pos: int, context: str, flags: _Flags, seen: set[str]) -> Command:
    """`review <file>` reviews a plan; `review <folder>/` a folder; `review` alone
    (or `review /`) the whole repository."""
    positional = _read_all_flags(line, pos, flags, seen)
    _reject(flags, seen, _COMMON_FLAGS | {"--open-pr", "--file-issues"}, "review")
    if len(positional) > 1:
        raise UsageError(
            "`review` takes at most one path: a plan like `review docs/plans/auth.md`, "
            "a folder like `review src/billing/`, or none for the whole repository"
        )
    if flags.mode not in (None, "critique"):
        raise UsageError("`review` always runs in `critique` mode")
    raw = positional[0] if positional else "/"
    if raw.strip() in ("/", ".", "./"):
        path = ""
    elif raw.rstrip().endswith("/"):
        path = _clean_path(raw.rstrip().rstrip("/")) + "/"
    else:
        path = _clean_path(raw)
    if path.endswith("/") or not path:
        if flags.open_pr:
            raise UsageError(
                "`--open-pr` applies to plan files, not to folder or repository reviews"
            )
    elif flags.file_issues:
        raise UsageError("`--file-issues` applies to folder and repository reviews, not to plans")
    return _build("review", flags, mode="critique", path=path, context=context)


def _parse_arbitrate(line: str, pos: int, context: str, flags: _Flags, seen: set[str]) -> Command:
    positional = _read_all_flags(line, pos, flags, seen)
    _reject(flags, seen, _COMMON_FLAGS | {"--bots"}, "arbitrate")
    if flags.mode not in (None, "arbitrate"):
        raise UsageError("`arbitrate` always runs in `arbitrate` mode")
    if len(positional) > 1:
        raise UsageError("`arbitrate` takes at most one review-comment URL")
    url: str | None = None
    ref: ReviewCommentRef | None = None
    if positional:
        url = positional[0].strip("<>")
        m = _REVIEW_COMMENT_URL.fullmatch(url)
        if m is None:
            raise UsageError(
                "`arbitrate` takes a review-comment URL like "
                "`https://github.com/owner/repo/pull/5#discussion_r123`"
            )
        ref = ReviewCommentRef(
            host=m["host"].lower(),
            owner=m["owner"],
            repo=m["repo"],
            pr_number=int(m["pr"]),
            comment_id=int(m["comment"]),
        )
        if flags.bots:
            raise UsageError("`arbitrate` takes either a comment URL or `--bots`, not both")
    return _build(
        "arbitrate",
        flags,
        mode="arbitrate",
        url=url,
        review_comment=ref,
        context=context,
    )


def _parse_decide(line: str, pos: int, flags: _Flags, seen: set[str]) -> Command:
    positional = _read_all_flags(line, pos, flags, seen)
    _reject(flags, seen, set(), "decide")
    if len(positional) != 2:
        raise UsageError("usage: `decide <point> <A|B|both>`, like `decide 2 A`")
    point_m = _DECIDE_POINT.fullmatch(positional[0])
    if point_m is None or int(point_m[1]) < 1:
        raise UsageError(f"`{_echo(positional[0])}` is not a point number")
    raw_choice = positional[1].strip().lower()
    choice: Choice
    if raw_choice == "a":
        choice = "A"
    elif raw_choice == "b":
        choice = "B"
    elif raw_choice == "both":
        choice = "both"
    else:
        raise UsageError("the choice must be `A`, `B` or `both`")
    return Command(action="decide", decide_point=int(point_m[1]), decide_choice=choice)


def _parse_debate(line: str, pos: int, context: str, flags: _Flags, seen: set[str]) -> Command:
    topic_start = _read_flags_until_word(line, pos, flags, seen)
    topic_end = _trailing_flags_start(line, topic_start)
    trailing = _read_all_flags(line, topic_end, flags, seen)
    if trailing:  # words after trailing flags are ambiguous: flag values or topic?
        raise UsageError("put flags before the topic, or all of them at its end")
    if flags.help:
        return Command(action="help")
    _reject(flags, seen, _COMMON_FLAGS | {"--estimate"}, "a debate")
    if flags.mode == "arbitrate":
        raise UsageError("use `arbitrate` in a pull-request review thread to arbitrate a comment")
    topic = line[topic_start:topic_end].strip()
    issue_ref: int | None = None
    if m := _ISSUE_REF.fullmatch(topic):
        issue_ref, topic = int(m[1]), ""
        if issue_ref < 1:
            raise UsageError("issue numbers start at 1")
    action: Action = "estimate" if flags.estimate else "debate"
    return _build(action, flags, topic=topic, context=context, issue_ref=issue_ref)


def parse_command(body: str, *, command: str = "/debate") -> Command | None:
    """Parse a comment body; None when it is not addressed to ``command``."""
    line, context = _split_first_line(body)
    if _match_command(line, command) is None:
        return None
    # Flags may come before the keyword too: `/debate --rounds 2 review x.md`.
    flags, seen = _Flags(), set[str]()
    pos = _read_flags_until_word(line, len(command), flags, seen)
    first = _next_token_lenient(line, pos)
    word = first[0].lower() if first else ""
    after_word = first[2] if first else pos
    if word in ("status", "cancel", "help"):
        extra = line[after_word:].strip()
        if not extra:
            if seen - {"--help"}:
                raise UsageError(f"`{word}` takes no flags")
            return Command(action=word)  # type: ignore[arg-type]  # one of the literals
        if _is_flag(extra.split()[0]):
            raise UsageError(f"`{word}` takes no flags")
        # `/debate cancel culture …`: words after the keyword make it a topic.
        return _parse_debate(line, pos, context, flags, seen)
    if word == "review":
        return _parse_review(line, after_word, context, flags, seen)
    if word == "arbitrate":
        return _parse_arbitrate(line, after_word, context, flags, seen)
    if word == "decide":
        return _parse_decide(line, after_word, flags, seen)
    if word == "estimate":
        # The plan and cost of the debate the same flags would start; nothing runs.
        flags.estimate = True
        return _parse_debate(line, after_word, context, flags, seen)
    return _parse_debate(line, pos, context, flags, seen)


def usage_text(command: str = "/debate") -> str:
    """Markdown help, posted for `help` and after a usage error."""
    c = command
    return f"""**debate-bot commands**

| command | what it does |
| --- | --- |
| `{c} [flags] [topic]` | debate this issue, or a topic typed after it (filed as a new issue) |
| `{c} [flags] #<issue>` | debate another issue of this repository |
| `{c} review <path> [flags]` | design review of a repository file (a plan) |
| `{c} review [<folder>/] [flags]` | design review of the whole repository, or of one folder |
| `{c} arbitrate [<review-comment-url>] [--bots]` | is a PR review comment a false positive? |
| `{c} decide <point> <A\\|B\\|both>` | answer an open proposal stalemate |
| `{c} status` / `cancel` / `help` | show the run, stop it, show this help |
| `{c} estimate [flags] [topic]` | that debate's plan and estimated cost; runs nothing |

Flags:
- `--rounds N` — number of rounds, 1 to {MAX_ROUNDS}
- `--mode debate|critique|arbitrate|proposal` — the kind of run
- `--personas "Atlas vs Forge"` — persona names from the repo config
- `--models m1,m2` — model references like `openai/gpt-4o,anthropic/claude-sonnet-4`,
  or agent seats like `agent:codex`
- `--judge m` — the judge's model reference
- `-s`, `--vote-stalemates` — unresolved proposal points go to a voter panel
- `--alternating` — personas speak in turn instead of in parallel
- `--no-tools` — personas argue from the prompt alone, without reading the repository
- `--open-pr` — (`review` of a plan only) open a pull request with the revised plan
- `--file-issues` — (`review` of a folder or the repository) file one issue per agreed finding
- `--bots` — (`arbitrate` only) every unresolved review comment left by a bot
- `--estimate` — reply with the plan and its estimated cost instead of running it
"""
