"""Citations: parsing, checking against the pinned commit, repair, links (pure)."""

from __future__ import annotations

from bot.engine.citations import (
    check_citations,
    link_citations,
    parse_citations,
    permalink,
    tally,
)
from bot.engine.types import CitationCheck, Evidence, Turn, TurnKey

SHA = "a" * 40
URL = "https://github.com/octo/repo"
FILES = {
    "app/views.py": [
        "import os",
        "",
        "",
        "def view(user):",
        "    assert user is not None",
        "    return user.name",
    ],
    "docs/guide.md": ["# Guide", "", "Run `make`."],
}


def check(text: str, html_url: str = URL) -> list[CitationCheck]:
    return list(check_citations(text, FILES.get, html_url=html_url, sha=SHA))


def test_parse_forms() -> None:
    text = (
        'See `app/views.py:L5` "assert user is not None", app/views.py:L4-L6, '
        "docs/guide.md:L3 — `Run` and Makefile:L2. Not citations: Note:L4, e.g.:L3, ../x.py:L1"
    )
    got = [(c.cited, c.start, c.end, c.quote) for c in parse_citations(text)]
    assert got == [
        ("app/views.py:L5", 5, 5, "assert user is not None"),
        ("app/views.py:L4-L6", 4, 6, ""),
        ("docs/guide.md:L3", 3, 3, "Run"),
        ("Makefile:L2", 2, 2, ""),
    ]


def test_verified_citations_become_permalinks() -> None:
    (c,) = check('`app/views.py:L4-L6` "def view(user):"')
    assert c.status == "verified"
    assert c.url == f"{URL}/blob/{SHA}/app/views.py#L4-L6"


def test_markdown_needs_plain_before_the_anchor() -> None:
    (c,) = check("docs/guide.md:L3")
    assert c.url == f"{URL}/blob/{SHA}/docs/guide.md?plain=1#L3"


def test_ghes_permalinks() -> None:
    (c,) = check("app/views.py:L5", html_url="https://ghe.example.com/octo/repo/")
    assert c.url == f"https://ghe.example.com/octo/repo/blob/{SHA}/app/views.py#L5"
    assert permalink(URL, SHA, "a b/c.py", 1, 1).endswith("/a%20b/c.py#L1")


def test_unverifiable_citations_say_why() -> None:
    missing, past = check("nope/x.py:L1 and app/views.py:L40")
    assert missing.status == past.status == "unverified"
    assert "no such file" in missing.reason
    assert "past the end" in past.reason and "6 lines" in past.reason


def test_a_quote_a_few_lines_away_is_repaired() -> None:
    (c,) = check('app/views.py:L2 "assert user is not None"')
    assert c.status == "repaired" and (c.fixed_start, c.fixed_end) == (5, 5)
    assert c.url.endswith("#L5")
    linked = link_citations('app/views.py:L2 "assert user is not None"', [c])
    assert linked.startswith(f"[app/views.py:L5]({URL}/blob/{SHA}/app/views.py#L5) (repaired")


def test_a_quote_far_away_or_nowhere_is_unverified() -> None:
    (c,) = check('app/views.py:L1 "this line is not in the file"')
    assert c.status == "unverified" and "quoted line" in c.reason


def test_a_misnumbered_citation_past_the_end_is_repaired_by_its_quote() -> None:
    (c,) = check('app/views.py:L9 "return user.name"')
    assert c.status == "repaired" and c.fixed_start == 6


def test_link_marks_unverified_and_leaves_unchecked_alone() -> None:
    text = "A app/views.py:L5 B nope.py:L1 C other.py:L2"
    checks = check("app/views.py:L5 nope.py:L1")
    out = link_citations(text, checks)
    assert f"[app/views.py:L5]({URL}/blob/{SHA}/app/views.py#L5)" in out
    assert "nope.py:L1 (unverified)" in out
    assert out.endswith("C other.py:L2")
    assert link_citations(out, checks).count(f"]({URL}") == 1  # a link is not linked again


def test_tally_counts_evidence() -> None:
    checks = tuple(check('app/views.py:L5 nope.py:L1 app/views.py:L2 "return user.name"'))
    ev = Evidence(tool_calls=3, files_read=("app/views.py",), bytes_read=120, citations=checks)
    t1 = Turn(TurnKey("opening", 1, "A"), "x", "m", evidence=ev)
    t2 = Turn(TurnKey("opening", 1, "B"), "x", "m", evidence=Evidence(static_reason="refused"))
    t = tally([t1, t2, Turn(TurnKey("opening", 1, "C"), "x", "m")])
    assert (t.tool_calls, t.files_read, t.bytes_read) == (3, 1, 120)
    assert (t.verified, t.repaired, t.unverified, t.static_turns) == (1, 1, 1, 1)
