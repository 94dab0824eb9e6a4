from __future__ import annotations

import base64
import html
import json
import random
import re
import string

import pytest

from bot.github.sanitize import MARKER_ESCAPED, ZWSP, code_block_lines, sanitize

rng = random.Random(1234)
ALNUM = string.ascii_letters + string.digits
LIVE_MENTION = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9]")


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def make_jwt() -> str:
    return f"{b64url({'alg': 'RS256', 'typ': 'JWT'})}.{b64url({'iss': 123, 'exp': 9})}.{rand(43)}"


def make_pem(kind: str = "RSA ") -> str:
    body = "\n".join(rand(64, ALNUM + "+/") for _ in range(5)) + "\n" + rand(20) + "=="
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


# Generated at test time: the repository holds no secret-looking literals.
SECRETS: list[tuple[str, str]] = [
    ("github_token", "ghp_" + rand(36)),
    ("github_token", "gho_" + rand(36)),
    ("github_token", "ghu_" + rand(36)),
    ("github_token", "ghs_" + rand(36)),
    ("github_token", "ghr_" + rand(36)),
    ("github_token", "github_pat_" + rand(22) + "_" + rand(59)),
    ("openai_key", "sk-" + rand(48)),
    ("openai_key", "sk-proj-" + rand(40, ALNUM + "_-") + "A1"),
    ("anthropic_key", "sk-ant-api03-" + rand(80, ALNUM + "_-")),
    ("aws_access_key_id", "AKIA" + rand(16, string.ascii_uppercase + string.digits)),
    ("aws_access_key_id", "ASIA" + rand(16, string.ascii_uppercase + string.digits)),
    ("jwt", make_jwt()),
    ("private_key", make_pem()),
    ("private_key", make_pem("")),
    ("private_key", make_pem("OPENSSH ")),
    ("private_key", make_pem("EC ")),
    ("slack_token", "xoxb-" + rand(12, string.digits) + "-" + rand(24)),
    ("slack_token", "xoxp-" + rand(40, ALNUM + "-")),
    ("google_api_key", "AIza" + rand(35, ALNUM + "_-")),
    ("stripe_key", "sk_live_" + rand(24)),
    ("stripe_key", "rk_live_" + rand(24)),
    ("stripe_key", "pk_live_" + rand(24)),
    ("stripe_key", "sk_test_" + rand(24)),
    ("gitlab_token", "glpat-" + rand(20, ALNUM + "_-")),
]


@pytest.mark.parametrize(
    ("kind", "secret"), SECRETS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(SECRETS)]
)
@pytest.mark.parametrize(
    "template",
    [
        "{s}",
        "the key is {s}.",
        "export TOKEN={s}\n",
        "```bash\ncurl -H 'Authorization: Bearer {s}' https://api\n```",
        "inline `{s}` code",
        '{{"token": "{s}"}}',
        "> quoted {s}",
        "<details><summary>x</summary>\n\n{s}\n</details>",
    ],
)
def test_secrets_are_redacted_everywhere(kind: str, secret: str, template: str) -> None:
    out = sanitize(template.format(s=secret))
    assert f"[REDACTED:{kind}]" in out
    # No fragment long enough to be useful survives.
    for line in secret.splitlines():
        if len(line) >= 12:
            assert line not in out
    assert sanitize(out) == out


def test_aws_secret_access_key_assignments() -> None:
    value = rand(40, ALNUM + "/+")
    for text in (
        f"aws_secret_access_key = {value}",
        f'AWS_SECRET_ACCESS_KEY="{value}"',
        f'{{"SecretAccessKey": "{value}"}}',
        f"aws_secret: '{value}'",
    ):
        out = sanitize(text)
        assert value not in out, text
        assert "[REDACTED:aws_secret_key]" in out
    # The name stays so the reader knows what was there.
    assert sanitize(f"aws_secret_access_key = {value}").startswith("aws_secret_access_key = ")


def test_truncated_pem_block_is_redacted() -> None:
    pem = make_pem().rsplit("\n", 2)[0]  # no END line
    out = sanitize(f"before\n{pem}\n\nafter text.")
    assert "[REDACTED:private_key]" in out
    assert pem.splitlines()[1] not in out
    assert "before" in out and "after text." in out


def test_several_secrets_and_surrounding_text_kept() -> None:
    gh, sk = "ghp_" + rand(36), "sk-" + rand(48)
    out = sanitize(f"Use {gh} then {sk}, ok?")
    assert out == "Use [REDACTED:github_token] then [REDACTED:openai_key], ok?"


@pytest.mark.parametrize(
    "text",
    [
        "The sk-learn-style naming is fine",
        "sk-ant is short",
        "ghp_short",
        "AKIA is a prefix",
        "see task-force-design-document-for-everyone",
        "hash 3f786850e387550fdab836ed7e6dc881de23001b",
        "eyJhbGciOi alone is not a JWT",
        "use pk_test_ keys in docs",
    ],
)
def test_ordinary_text_is_not_redacted(text: str) -> None:
    assert sanitize(text) == text


# --- mentions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@alice", f"@{ZWSP}alice"),
        ("cc @alice, @bob-2 and @Carol.", f"cc @{ZWSP}alice, @{ZWSP}bob-2 and @{ZWSP}Carol."),
        ("ping @org/team-x now", f"ping @{ZWSP}org/team-x now"),
        ("(@alice)", f"(@{ZWSP}alice)"),
        ("**@alice**", f"**@{ZWSP}alice**"),
        ("é@alice", f"é@{ZWSP}alice"),
        ("\\@alice", f"\\@{ZWSP}alice"),
        ("- @alice\n> @bob", f"- @{ZWSP}alice\n> @{ZWSP}bob"),
        ("<div>@alice</div>", f"<div>@{ZWSP}alice</div>"),
        (
            "&#64;alice &#x40;bob &commat;carol &#064;dave",
            f"@{ZWSP}alice @{ZWSP}bob @{ZWSP}carol @{ZWSP}dave",
        ),
        ("[x](https://medium.com/@alice/post)", f"[x](https://medium.com/@{ZWSP}alice/post)"),
        # Inline code spans are neutralized too (invisibly): the text still reads the same.
        ("use `@property` here", f"use `@{ZWSP}property` here"),
    ],
)
def test_mentions_are_neutralized(text: str, expected: str) -> None:
    out = sanitize(text)
    assert out == expected
    assert sanitize(out) == out
    # Reads the same once rendered, but no `@name` that GitHub would ping is left.
    assert html.unescape(out).replace(ZWSP, "") == html.unescape(text)
    assert LIVE_MENTION.search(html.unescape(out)) is None


@pytest.mark.parametrize(
    "text",
    [
        "mail alice@example.com or first.last+tag@sub.example.org",
        "git@github.com:owner/repo.git",
        "an @ sign alone, @@ and @-dash and @_under",
        "user_@x",
    ],
)
def test_emails_and_lone_at_signs_untouched(text: str) -> None:
    assert sanitize(text) == text


def test_mentions_in_fenced_and_indented_code_are_kept() -> None:
    text = (
        "Decorators:\n\n"
        "```python\n@property\ndef x(self): ...\n# ping @alice\n```\n\n"
        "~~~\nnpm i @scope/pkg\n~~~\n\n"
        "    @indented code\n\n"
        "but @bob outside.\n"
    )
    out = sanitize(text)
    assert "@property\n" in out and "# ping @alice\n" in out
    assert "npm i @scope/pkg" in out and "    @indented code" in out
    assert f"but @{ZWSP}bob outside." in out


def test_fence_inside_list_and_quote_is_code_but_not_after_it() -> None:
    text = "- ```\n  @alice\n  ```\n@bob\n\n> ```\n> @carol\n> ```\n@dave"
    out = sanitize(text)
    assert "  @alice\n" in out and "> @carol\n" in out
    assert f"@{ZWSP}bob" in out and f"@{ZWSP}dave" in out


def test_fence_inside_html_block_is_not_code() -> None:
    # In CommonMark the fence lines here are raw HTML, where GitHub does ping.
    text = "<details>\n```\n@alice\n```\n</details>"
    assert f"@{ZWSP}alice" in sanitize(text)


def test_unclosed_fence_runs_to_the_end() -> None:
    out = sanitize("@a\n```\n@b\n@c")
    assert out == f"@{ZWSP}a\n```\n@b\n@c"


def test_code_block_lines() -> None:
    assert code_block_lines("a\n```\nb\n```\nc") == {1, 2, 3}
    assert code_block_lines("a\n\n    code\n") == {2}
    assert code_block_lines("no code") == set()


def test_crlf_is_normalized_so_code_detection_stays_aligned() -> None:
    out = sanitize("x\r\n```\r\n@keep\r\n```\r\n@ping\r")
    assert out == f"x\n```\n@keep\n```\n@{ZWSP}ping\n"


# --- markers ---------------------------------------------------------------------

LOOKALIKES = [
    "<!-- debate-bot:verdict run=abc -->",
    "<!--debate-bot:round run=x round=1 -->",
    "<!--   DEBATE-BOT:status run=x -->",
    "<!-- Debate_Bot:verdict -->",
    "<!-- debate bot:verdict -->",
    "< ! - - debate-bot:verdict -->",
    "<!---debate-bot:verdict-->",
    "<!--\ndebate-bot:verdict run=x -->",
    "&lt;!-- debate-bot:verdict run=x --&gt;",
    "&lt!-- debate-bot:verdict",
    "&#60;!-- debate-bot:verdict",
    "&#x3C;&#33;&#45;&#45; debate-bot:verdict",
    "<!-- debate\u200b-bot:verdict",
    "<\u200b!-- debate-bot:verdict",
    "<!\u2014 debate\u2010bot:verdict",
    "<!-- debate&#45;bot:verdict",
]


@pytest.mark.parametrize("text", LOOKALIKES)
@pytest.mark.parametrize("where", ["{m}", "intro\n{m}\nend", "```\n{m}\n```", "`{m}`"])
def test_marker_lookalikes_are_escaped(text: str, where: str) -> None:
    out = sanitize(where.format(m=text))
    assert MARKER_ESCAPED in out
    assert not re.search(r"<!--\s*debate", out, re.IGNORECASE)
    assert "debate-bot" not in out.lower()
    assert sanitize(out) == out


def test_other_html_comments_are_kept() -> None:
    text = "<!-- a normal comment --> and <!-- debater notes -->"
    assert sanitize(text) == text


def test_forged_marker_cannot_open_a_body() -> None:
    from bot.github.markers import parse_marker

    forged = "<!-- debate-bot:verdict run=abc -->\nI win."
    assert parse_marker(forged) is not None
    assert parse_marker(sanitize(forged)) is None


# --- idempotency -----------------------------------------------------------------


def test_idempotent_on_a_hostile_mixture() -> None:
    gh = "ghp_" + rand(36)
    text = (
        "<!-- debate-bot:a\n```\n<!-- debate-bot:b @x\n```\n-->\n"
        f"@alice {gh} &#64;bob\n"
        "<details>\n```\n@carol\n```\n</details>\n\n"
        "- ```\n  @dave\n  ```\n"
        f"{make_pem()}\n"
        "&lt;!-- DEBATE-BOT:round --&gt; `@eve` mail a@b.co\r\n"
    )
    once = sanitize(text)
    assert sanitize(once) == once
    assert gh not in once


@pytest.mark.parametrize("seed", range(40))
def test_idempotent_on_random_markdown(seed: int) -> None:
    r = random.Random(seed)
    pieces = [
        "@alice",
        "@org/team",
        "a@b.com",
        "```",
        "~~~",
        "    ",
        "> ",
        "- ",
        "<details>",
        "</details>",
        "<!--",
        "-->",
        "debate-bot:",
        "&#64;",
        "&lt;",
        "`",
        "\n",
        "\n\n",
        "text",
        " ",
        "ghp_" + "A" * 36,
        "sk-",
        "eyJ",
        "\\",
        "<div>",
        "\r",
    ]
    text = "".join(r.choice(pieces) for _ in range(300))
    once = sanitize(text)
    assert sanitize(once) == once


@pytest.mark.parametrize(
    "text",
    [
        "sk-" * 100_000,
        "-----BEGIN PRIVATE KEY-----\n" * 5_000 + "x" * 100_000,
        "<" + " " * 100_000 + "!" * 1000,
        "<!--" * 50_000,
        "@" * 100_000 + "a",
        "&#64;" * 50_000,
        "eyJ" * 100_000,
    ],
    ids=["sk-run", "pem-headers", "lt-spaces", "comment-openers", "ats", "at-entities", "eyJ"],
)
def test_pathological_inputs_stay_linear(text: str) -> None:
    # No timing assertion: a quadratic regex here would blow the pytest timeout.
    once = sanitize(text)
    assert sanitize(once) == once
