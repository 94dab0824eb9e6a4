from __future__ import annotations

import pytest

from bot.core.errors import ConfigError, UsageError
from bot.inputs.parser import (
    Command,
    ReviewCommentRef,
    parse_command,
    usage_text,
)


def parse(body: str, **kw: str) -> Command:
    cmd = parse_command(body, **kw)
    assert cmd is not None
    return cmd


# --- recognising the command --------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "",
        "debate this",
        "/debater should we?",
        "/debate-now x",
        "please /debate this",
        "> /debate quoted reply",
        "`/debate` in code",
        "/deb",
    ],
)
def test_not_a_command(body: str) -> None:
    assert parse_command(body) is None


def test_bare_command_debates_the_issue_itself() -> None:
    cmd = parse("/debate")
    assert cmd == Command(action="debate")
    assert cmd.topic == "" and cmd.issue_ref is None and cmd.subject == ""


def test_leading_whitespace_and_blank_lines_are_fine() -> None:
    assert parse("  \n\n   /debate   Should we use gRPC?").topic == "Should we use gRPC?"
    assert parse("\t/debate\tX").topic == "X"


def test_command_word_is_case_insensitive_and_configurable() -> None:
    assert parse("/Debate topic").topic == "topic"
    assert parse_command("/debate topic", command="/argue") is None
    assert parse("/argue topic", command="/argue").topic == "topic"
    assert parse_command("/arguex topic", command="/argue") is None


def test_topic_text_is_verbatim_including_quotes_and_backslashes() -> None:
    body = r"/debate What's better: C:\tools or \"quoted\" paths? It's 'unbalanced"
    assert parse(body).topic == r"What's better: C:\tools or \"quoted\" paths? It's 'unbalanced"


def test_following_lines_are_context() -> None:
    cmd = parse("/debate gRPC or REST?\r\nWe have 12 services.\n\nLatency matters.\n")
    assert cmd.topic == "gRPC or REST?"
    assert cmd.context == "We have 12 services.\n\nLatency matters."
    assert cmd.subject == "gRPC or REST?\n\nWe have 12 services.\n\nLatency matters."


def test_flags_on_first_line_apply_to_a_topic_on_following_lines() -> None:
    cmd = parse("/debate --rounds 2\nShould we shard the database?")
    assert cmd.rounds == 2 and cmd.topic == "" and cmd.subject == "Should we shard the database?"


def test_issue_reference() -> None:
    cmd = parse("/debate #42")
    assert cmd.issue_ref == 42 and cmd.topic == ""
    # Not a bare reference: it is topic text.
    cmd = parse("/debate #42 is wrong")
    assert cmd.issue_ref is None and cmd.topic == "#42 is wrong"
    with pytest.raises(UsageError):
        parse_command("/debate #0")


# --- flags -----------------------------------------------------------------------


def test_all_debate_flags() -> None:
    cmd = parse(
        '/debate --rounds 4 --mode proposal --personas "Atlas vs Forge vs Sage" '
        "--models openai/gpt-4o,anthropic/claude-sonnet-4 --judge ollama/llama3.1:8b "
        "-s --alternating Should we adopt Bazel?"
    )
    assert cmd.action == "debate"
    assert cmd.rounds == 4
    assert cmd.mode == "proposal"
    assert cmd.personas == ("Atlas", "Forge", "Sage")
    assert cmd.models == ("openai/gpt-4o", "anthropic/claude-sonnet-4")
    assert cmd.judge == "ollama/llama3.1:8b"
    assert cmd.vote_stalemates and cmd.alternating
    assert cmd.topic == "Should we adopt Bazel?"


def test_equals_form_long_vote_flag_and_curly_quotes() -> None:
    cmd = parse("/debate --rounds=3 --vote-stalemates --personas “Atlas, Forge” topic")
    assert cmd.rounds == 3 and cmd.vote_stalemates and cmd.personas == ("Atlas", "Forge")
    assert cmd.topic == "topic"


def test_trailing_flags_after_the_topic() -> None:
    cmd = parse("/debate Should we use gRPC? --rounds 2 --models openai/gpt-4o")
    assert cmd.topic == "Should we use gRPC?"
    assert cmd.rounds == 2 and cmd.models == ("openai/gpt-4o",)


def test_dashes_inside_a_topic_are_prose() -> None:
    cmd = parse("/debate Is -5 too low? Should git push --force be banned - really?")
    assert cmd.topic == "Is -5 too low? Should git push --force be banned - really?"


def test_model_refs_with_nested_slashes() -> None:
    cmd = parse("/debate --models openrouter/meta-llama/llama-3.1-70b,local/qwen2.5:7b x")
    assert cmd.models == ("openrouter/meta-llama/llama-3.1-70b", "local/qwen2.5:7b")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("/debate --rounds 0 x", "1 to 10"),
        ("/debate --rounds 11 x", "1 to 10"),
        ("/debate --rounds two x", "1 to 10"),
        ("/debate --rounds", "needs a value"),
        ("/debate --rounds --alternating x", "needs a value"),
        ("/debate --mode shouting x", "--mode"),
        ("/debate --mode arbitrate x", "arbitrate"),
        ("/debate --personas Atlas x", "two names"),
        ('/debate --personas "Atlas vs atlas" x', "distinct"),
        ('/debate --personas "Atlas vs <b>" x', "persona name"),
        ("/debate --models gpt-4o x", "openai/gpt-4o"),
        ("/debate --models https://evil.example/v1 x", "URL"),
        ("/debate --judge http://169.254.169.254/latest x", "URL"),
        ("/debate --judge openai/gpt-4o?key=sk-x x", "model references"),
        ("/debate --models , x", "at least one"),
        ("/debate --frobnicate x", "unknown flag"),
        ("/debate -x topic", "unknown flag"),
        ("/debate --rounds 2 --rounds 3 x", "twice"),
        ("/debate --alternating=yes x", "takes no value"),
        ('/debate --personas "Atlas vs Forge x', "unbalanced quote"),
        ("/debate --open-pr x", "cannot be used"),
        ("/debate --bots x", "cannot be used"),
        ("/debate topic --rounds 2 more words", "flags before the topic"),
        ("/debate status --rounds 2", "takes no flags"),
    ],
)
def test_usage_errors(body: str, fragment: str) -> None:
    with pytest.raises(UsageError) as exc_info:
        parse_command(body)
    assert fragment in str(exc_info.value)
    assert isinstance(exc_info.value, ConfigError)
    assert exc_info.value.public == str(exc_info.value)  # safe to post as is


def test_flags_never_carry_secrets() -> None:
    key = "sk-proj-" + "Ab3" * 12
    for body in (f"/debate --models openai/{key} x", f"/debate --judge openai/{key} x"):
        with pytest.raises(UsageError) as exc_info:
            parse_command(body)
        assert "secret" in str(exc_info.value)
        assert key not in str(exc_info.value)


def test_usage_errors_never_echo_long_input() -> None:
    with pytest.raises(UsageError) as exc_info:
        parse_command("/debate --" + "a" * 5000 + " x")
    assert len(str(exc_info.value)) < 120


# --- subcommands -----------------------------------------------------------------


@pytest.mark.parametrize("word", ["status", "cancel", "help", "STATUS"])
def test_simple_subcommands(word: str) -> None:
    assert parse(f"/debate {word}").action == word.lower()


def test_flags_before_the_keyword() -> None:
    cmd = parse("/debate --rounds 2 review docs/x.md --open-pr")
    assert cmd.action == "review" and cmd.rounds == 2 and cmd.open_pr
    cmd = parse("/debate --models openai/a,anthropic/b arbitrate --bots")
    assert cmd.action == "arbitrate" and cmd.bots and cmd.models == ("openai/a", "anthropic/b")
    with pytest.raises(UsageError):
        parse_command("/debate --rounds 2 status")
    with pytest.raises(UsageError):
        parse_command("/debate --rounds 2 decide 1 A")
    with pytest.raises(UsageError):
        parse_command("/debate --rounds 2 review x.md --rounds 3")


def test_help_flag() -> None:
    assert parse("/debate --help").action == "help"
    assert parse("/debate -h").action == "help"


def test_keyword_followed_by_prose_is_a_topic() -> None:
    cmd = parse("/debate cancel culture in open source")
    assert cmd.action == "debate" and cmd.topic == "cancel culture in open source"


def test_review() -> None:
    cmd = parse("/debate review docs/plans/auth.md --rounds 2 --open-pr")
    assert cmd.action == "review" and cmd.path == "docs/plans/auth.md"
    assert cmd.mode == "critique" and cmd.rounds == 2 and cmd.open_pr
    assert parse("/debate review --rounds 1 ./docs/x.md").path == "docs/x.md"
    assert parse("/debate review @docs/x.md").path == "docs/x.md"
    assert parse('/debate review "docs/my plan.md"').path == "docs/my plan.md"


def test_review_of_the_repository_or_a_folder() -> None:
    whole = parse("/debate review --rounds 2 --file-issues")
    assert whole.action == "review" and whole.path == "" and whole.file_issues
    assert parse("/debate review /").path == "" and parse("/debate review .").path == ""
    folder = parse("/debate review ./src/billing/")
    assert folder.path == "src/billing/" and not folder.file_issues
    assert not parse("/debate review docs/plan.md").file_issues


@pytest.mark.parametrize(
    "body",
    [
        "/debate review a.md b.md",
        "/debate review src/ docs/",
        "/debate review ../",
        "/debate review --open-pr",
        "/debate review src/ --open-pr",
        "/debate review docs/plan.md --file-issues",
        "/debate review ../secrets.md",
        "/debate review /etc/passwd",
        "/debate review docs//x.md",
        "/debate review https://example.com/x.md",
        "/debate review x.md --bots",
        "/debate review x.md --mode debate",
    ],
)
def test_review_usage_errors(body: str) -> None:
    with pytest.raises(UsageError):
        parse_command(body)


def test_arbitrate_in_thread() -> None:
    cmd = parse("/debate arbitrate")
    assert cmd.action == "arbitrate" and cmd.mode == "arbitrate"
    assert cmd.url is None and cmd.review_comment is None and not cmd.bots


@pytest.mark.parametrize(
    ("url", "ref"),
    [
        (
            "https://github.com/o/r/pull/5#discussion_r123",
            ReviewCommentRef("github.com", "o", "r", 5, 123),
        ),
        (
            "https://github.com/octo-org/hello.world/pull/17/files#r9876543210",
            ReviewCommentRef("github.com", "octo-org", "hello.world", 17, 9876543210),
        ),
        (
            "<https://GHE.example.com/team/svc/pull/2/changes#discussion_r7>",
            ReviewCommentRef("ghe.example.com", "team", "svc", 2, 7),
        ),
    ],
)
def test_arbitrate_url(url: str, ref: ReviewCommentRef) -> None:
    cmd = parse(f"/debate arbitrate {url} --models openai/gpt-4o,anthropic/claude-sonnet-4")
    assert cmd.review_comment == ref
    assert cmd.url == url.strip("<>")
    assert cmd.models == ("openai/gpt-4o", "anthropic/claude-sonnet-4")


def test_arbitrate_bots() -> None:
    cmd = parse("/debate arbitrate --bots --rounds 2")
    assert cmd.bots and cmd.rounds == 2 and cmd.review_comment is None


@pytest.mark.parametrize(
    "body",
    [
        "/debate arbitrate https://github.com/o/r/issues/5#issuecomment-1",
        "/debate arbitrate http://github.com/o/r/pull/5#discussion_r1",
        "/debate arbitrate https://github.com/o/r/pull/5",
        "/debate arbitrate https://github.com/o/r/pull/5#discussion_r1 --bots",
        "/debate arbitrate a b",
        "/debate arbitrate --open-pr",
        "/debate arbitrate --mode debate",
    ],
)
def test_arbitrate_usage_errors(body: str) -> None:
    with pytest.raises(UsageError):
        parse_command(body)


@pytest.mark.parametrize(
    ("body", "point", "choice"),
    [
        ("/debate decide 2 A", 2, "A"),
        ("/debate decide #3 b", 3, "B"),
        ("/debate decide P1 Both", 1, "both"),
    ],
)
def test_decide(body: str, point: int, choice: str) -> None:
    cmd = parse(body)
    assert (cmd.action, cmd.decide_point, cmd.decide_choice) == ("decide", point, choice)


@pytest.mark.parametrize(
    "body",
    [
        "/debate decide",
        "/debate decide 2",
        "/debate decide two A",
        "/debate decide 2 C",
        "/debate decide 0 A",
        "/debate decide 2 A extra",
        "/debate decide 2 A --rounds 2",
    ],
)
def test_decide_usage_errors(body: str) -> None:
    with pytest.raises(UsageError):
        parse_command(body)


def test_command_is_immutable() -> None:
    cmd = parse("/debate x")
    with pytest.raises(AttributeError):
        cmd.topic = "y"  # type: ignore[misc]


def test_usage_text_uses_the_configured_command() -> None:
    text = usage_text("/argue")
    assert "`/argue review <path> [flags]`" in text
    assert "/debate" not in text
    for flag in (
        "--rounds",
        "--mode",
        "--personas",
        "--models",
        "--judge",
        "-s",
        "--vote-stalemates",
        "--alternating",
        "--open-pr",
        "--bots",
    ):
        assert flag in text
