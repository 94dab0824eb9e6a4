"""Parse `/debate …` comment commands.

Only the first line of a comment holds the command; the following lines are
extra context for the topic. Flags are tokenized shell-style (quotes group
words) but the topic itself is kept verbatim, so apostrophes and backslashes in
ordinary prose never trip the tokenizer. Every mistake raises ``UsageError``
whose message is short and safe to post back to the user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Final, Literal

from bot.core.errors import UsageError
from bot.engine.types import Mode
from bot.inputs.flags import (
    Flags,
    echo,
    help_lines,
    is_flag,
    next_token_lenient,
    read_all_flags,
    read_flags_until_word,
    reject,
    trailing_flags_start,
)

Action = Literal["debate", "review", "arbitrate", "decide", "status", "cancel", "help", "estimate"]
Choice = Literal["A", "B", "both"]


_ISSUE_REF = re.compile(r"#(\d{1,9})")
_REVIEW_COMMENT_URL = re.compile(
    r"https://(?P<host>[A-Za-z0-9.-]+(?::\d+)?)/(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)"
    r"/pull/(?P<pr>\d{1,9})(?:/(?:files|changes)(?:/[0-9a-f]{7,40})?)?"
    r"#(?:discussion_)?r(?P<comment>\d{1,20})"
)
_DECIDE_POINT = re.compile(r"(?:#|p|point[-_ ]?)?(\d{1,4})", re.IGNORECASE)


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
        raise UsageError(f"`{echo(raw)}` is not a repository file path like `docs/plan.md`")
    return path


# The flags a Command carries (`--help` and `--estimate` choose the action instead).
_CARRIED: Final = tuple(f.name for f in fields(Flags) if f.name in Command.__dataclass_fields__)


def _build(action: Action, flags: Flags, *, mode: Mode | None = None, **own: Any) -> Command:
    """A Command carrying the flags plus the action's own fields (``own``)."""
    carried = {name: getattr(flags, name) for name in _CARRIED}
    return Command(action=action, **{**carried, "mode": mode or flags.mode, **own})


def _parse_review(line: str, pos: int, context: str, flags: Flags, seen: set[str]) -> Command:
    """`review <file>` reviews a plan; `review <folder>/` a folder; `review` alone
    (or `review /`) the whole repository."""
    positional = read_all_flags(line, pos, flags, seen)
    reject(flags, seen, "review", "review")
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


def _parse_arbitrate(line: str, pos: int, context: str, flags: Flags, seen: set[str]) -> Command:
    positional = read_all_flags(line, pos, flags, seen)
    reject(flags, seen, "arbitrate", "arbitrate")
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


def _parse_decide(line: str, pos: int, flags: Flags, seen: set[str]) -> Command:
    positional = read_all_flags(line, pos, flags, seen)
    reject(flags, seen, "decide", "decide")
    if len(positional) != 2:
        raise UsageError("usage: `decide <point> <A|B|both>`, like `decide 2 A`")
    point_m = _DECIDE_POINT.fullmatch(positional[0])
    if point_m is None or int(point_m[1]) < 1:
        raise UsageError(f"`{echo(positional[0])}` is not a point number")
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


def _parse_debate(line: str, pos: int, context: str, flags: Flags, seen: set[str]) -> Command:
    topic_start = read_flags_until_word(line, pos, flags, seen)
    topic_end = trailing_flags_start(line, topic_start)
    trailing = read_all_flags(line, topic_end, flags, seen)
    if trailing:  # words after trailing flags are ambiguous: flag values or topic?
        raise UsageError("put flags before the topic, or all of them at its end")
    if flags.help:
        return Command(action="help")
    reject(flags, seen, "debate", "a debate")
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
    flags, seen = Flags(), set[str]()
    pos = read_flags_until_word(line, len(command), flags, seen)
    first = next_token_lenient(line, pos)
    word = first[0].lower() if first else ""
    after_word = first[2] if first else pos
    if word in ("status", "cancel", "help"):
        extra = line[after_word:].strip()
        if not extra:
            if seen - {"--help"}:
                raise UsageError(f"`{word}` takes no flags")
            return Command(action=word)  # type: ignore[arg-type]  # one of the literals
        if is_flag(extra.split()[0]):
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
{help_lines()}
"""
