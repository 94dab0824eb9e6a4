from __future__ import annotations

import random
import re

import pytest

from bot.github.markers import (
    CONTINUED_NOTE,
    MARKER_KINDS,
    MAX_BODY,
    Marker,
    marker,
    parse_marker,
    split_body,
)
from bot.github.sanitize import ZWSP, code_block_lines, sanitize

# --- marker lines ----------------------------------------------------------------


def test_exact_formats() -> None:
    assert marker("round", "r-1", round=3) == "<!-- debate-bot:round run=r-1 round=3 -->"
    assert marker("verdict", "r-1") == "<!-- debate-bot:verdict run=r-1 -->"
    assert marker("status", "r-1") == "<!-- debate-bot:status run=r-1 -->"
    assert marker("aborted", "r-1") == "<!-- debate-bot:aborted run=r-1 -->"
    assert marker("proposal-link", "r-1") == "<!-- debate-bot:proposal-link run=r-1 -->"
    assert marker("verdict", "r-1", part=1) == "<!-- debate-bot:verdict run=r-1 -->"
    assert marker("round", "r", round=2, part=2) == "<!-- debate-bot:round run=r round=2 part=2 -->"
    assert marker("verdict", "01J9ZX.a_b", part=12) == (
        "<!-- debate-bot:verdict run=01J9ZX.a_b part=12 -->"
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "round", "run_id": "r"},  # round without a number
        {"kind": "verdict", "run_id": "r", "round": 1},  # number on a non-round marker
        {"kind": "round", "run_id": "r", "round": 0},
        {"kind": "verdict", "run_id": "r", "part": 0},
        {"kind": "verdict", "run_id": ""},
        {"kind": "verdict", "run_id": "a b"},
        {"kind": "verdict", "run_id": "x -->"},
        {"kind": "verdict", "run_id": "x" * 81},
        {"kind": "nope", "run_id": "r"},
    ],
)
def test_invalid_markers_raise(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        marker(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", MARKER_KINDS)
@pytest.mark.parametrize("part", [1, 2, 17])
def test_round_trip(kind: str, part: int) -> None:
    rnd = 4 if kind == "round" else None
    line = marker(kind, "run42", round=rnd, part=part)  # type: ignore[arg-type]
    parsed = parse_marker(f"{line}\nbody text\n<!-- debate-bot:verdict run=other -->")
    assert parsed == Marker(kind=kind, run_id="run42", round=rnd, part=part)  # type: ignore[arg-type]
    assert parsed is not None and parsed.line == line
    assert parse_marker(line) == parsed
    assert parse_marker(line + "\r\nx") == parsed


@pytest.mark.parametrize(
    "body",
    [
        "",
        "hello\n<!-- debate-bot:verdict run=abc -->",  # only the first line counts
        " <!-- debate-bot:verdict run=abc -->",
        "<!-- debate-bot:verdict run=abc-->",
        "<!--debate-bot:verdict run=abc -->",
        "<!-- DEBATE-BOT:verdict run=abc -->",
        "<!-- debate-bot:verdict run=abc --> trailing",
        "<!-- debate-bot:unknown run=abc -->",
        "<!-- debate-bot:round run=abc -->",
        "<!-- debate-bot:verdict run=abc round=2 -->",
        "<!-- debate-bot:verdict run=abc part=1 -->",
        "<!-- debate-bot:verdict run=abc part=0 -->",
        "<!-- debate-bot:round run=abc round=0 -->",
        "<!-- debate-bot:verdict run=abc part=2 round=1 -->",
        "&lt;!-- debate\u2011bot:verdict run=abc -->",
    ],
)
def test_parse_rejects_anything_but_our_exact_first_line(body: str) -> None:
    assert parse_marker(body) is None


# --- splitting -------------------------------------------------------------------

_MARKER_RE = re.compile(r"<!-- debate-bot:[^\n]* -->")


def strip_part(part: str, k: int) -> str:
    line, _, rest = part.partition("\n")
    assert _MARKER_RE.fullmatch(line)
    if k > 1:
        assert rest.startswith(CONTINUED_NOTE)
        rest = rest[len(CONTINUED_NOTE) :]
    return rest


def test_short_body_is_one_part() -> None:
    parts = split_body("verdict", "r1", "All good.")
    assert parts == ["<!-- debate-bot:verdict run=r1 -->\nAll good."]


def test_body_exactly_at_the_limit_is_one_part() -> None:
    line = marker("verdict", "r1")
    content = "x" * (MAX_BODY - len(line) - 1)
    parts = split_body("verdict", "r1", content)
    assert len(parts) == 1 and len(parts[0]) == MAX_BODY
    assert len(split_body("verdict", "r1", content + "x")) == 2


def test_split_on_paragraphs_with_part_markers() -> None:
    content = "\n\n".join(f"Paragraph {i}. " + "word " * 40 for i in range(60))
    parts = split_body("round", "run-7", content, round=2, limit=2000)
    assert len(parts) > 3
    for k, part in enumerate(parts, start=1):
        assert len(part) <= 2000
        m = parse_marker(part)
        assert m == Marker("round", "run-7", round=2, part=k)
        body = strip_part(part, k)
        if k < len(parts):
            assert body.endswith("\n\n")  # cut after a blank line, not mid-paragraph
        assert body.lstrip().startswith("Paragraph")
    assert "".join(strip_part(p, k) for k, p in enumerate(parts, 1)) == content


@pytest.mark.parametrize("limit", [MAX_BODY, 5000, 256])
def test_single_giant_line_without_newlines_or_spaces(limit: int) -> None:
    content = "a" * 300_000
    parts = split_body("verdict", "r", content, limit=limit)
    assert all(len(p) <= limit for p in parts)
    assert "".join(strip_part(p, k) for k, p in enumerate(parts, 1)) == content
    # Parts are nearly full: no wasted comments.
    assert len(parts) <= len(content) // (limit - 100) + 1


def test_giant_line_with_spaces_is_cut_after_whitespace() -> None:
    content = " ".join(f"w{i}" for i in range(50_000))
    parts = split_body("verdict", "r", content, limit=10_000)
    for k, p in enumerate(parts[:-1], 1):
        assert strip_part(p, k).endswith(" ")
    assert "".join(strip_part(p, k) for k, p in enumerate(parts, 1)) == content


def test_huge_mixed_input_respects_default_limit() -> None:
    r = random.Random(7)
    chunks = []
    for _ in range(800):
        kind = r.random()
        if kind < 0.5:
            chunks.append("lorem ipsum " * r.randint(1, 50))
        elif kind < 0.7:
            chunks.append("x" * r.randint(1, 9000))
        elif kind < 0.85:
            chunks.append(
                "<details><summary>turn</summary>\n\n" + "line\n" * r.randint(1, 300) + "</details>"
            )
        else:
            chunks.append("```text\n" + "code @alice\n" * r.randint(1, 400) + "```")
    content = "\n\n".join(chunks)
    assert len(content) > 1_000_000
    parts = split_body("round", "big", content, round=1)
    assert all(len(p) <= MAX_BODY for p in parts)
    assert [parse_marker(p) for p in parts] == [
        Marker("round", "big", round=1, part=k) for k in range(1, len(parts) + 1)
    ]


def _details_balanced(text: str) -> bool:
    depth = 0
    for m in re.finditer(r"<(/?)details\b[^>]*>", text):
        depth += -1 if m[1] else 1
        if depth < 0:
            return False
    return depth == 0


def test_splits_between_details_blocks_when_possible() -> None:
    blocks = [
        f"**Persona {i}** says things.\n\n<details>\n<summary>Full turn</summary>\n\n"
        + "\n".join(f"turn line {j}" for j in range(40))
        + "\n</details>\n"
        for i in range(20)
    ]
    content = "\n".join(blocks)
    parts = split_body("round", "r", content, round=1, limit=3000)
    assert len(parts) > 3
    for k, p in enumerate(parts, 1):
        body = strip_part(p, k)
        assert _details_balanced(body)
        assert "(continued)</summary>" not in body  # never had to cut inside one
    assert "".join(strip_part(p, k) for k, p in enumerate(parts, 1)) == content


def test_details_block_larger_than_a_part_is_closed_and_reopened() -> None:
    inner = "\n".join(f"line {j} " + "z" * 30 for j in range(400))
    content = (
        f"Intro.\n\n<details open>\n<summary>Full turn</summary>\n\n{inner}\n</details>\n\nEnd."
    )
    parts = split_body("verdict", "r", content, limit=2500)
    assert len(parts) > 4
    for k, p in enumerate(parts, 1):
        assert len(p) <= 2500
        body = strip_part(p, k)
        assert _details_balanced(body), body
        if 1 < k < len(parts):
            assert body.startswith("<details open>\n<summary>(continued)</summary>\n\n")
    # Removing what the splitter added gives back the content.
    rebuilt = ""
    for k, p in enumerate(parts, 1):
        body = strip_part(p, k)
        body = body.removeprefix("<details open>\n<summary>(continued)</summary>\n\n")
        body = body.removesuffix("\n</details>\n") if k < len(parts) else body
        rebuilt += body
    assert rebuilt == content


def test_code_fence_is_closed_and_reopened_so_mentions_stay_code() -> None:
    code = "\n".join(f"@decorator_{i}\ndef f{i}(): pass" for i in range(300))
    content = f"Look:\n\n```python\n{code}\n```\n\nAnd ping @alice."
    parts = split_body("verdict", "r", content, limit=2000)
    assert len(parts) > 3
    for k, p in enumerate(parts, 1):
        body = strip_part(p, k)
        if 1 < k < len(parts):
            assert body.startswith("```python\n")
        assert body.count("```") % 2 == 0
        # Code stays copy-pasteable; text outside code has no live mention.
        code_lines = code_block_lines(body)
        for i, line in enumerate(body.split("\n")):
            if i not in code_lines:
                assert not re.search(r"(?<![A-Za-z0-9_])@[A-Za-z0-9]", line), line
            elif line.startswith("@decorator"):
                assert ZWSP not in line
    assert f"@{ZWSP}alice" in parts[-1]


def test_parts_are_sanitized_and_secrets_split_nowhere() -> None:
    token = "ghp_" + "Q" * 36
    content = ("filler " * 300 + token + " ") * 20 + "<!-- debate-bot:verdict run=x -->"
    parts = split_body("verdict", "r", content, limit=1000)
    joined = "".join(parts)
    assert "QQQQQQQQ" not in joined
    assert joined.count("<!-- debate-bot:") == len(parts)  # only our own marker lines
    for p in parts:
        assert sanitize(p.partition("\n")[2]) == p.partition("\n")[2]


def test_unsanitized_mode_keeps_text() -> None:
    parts = split_body("verdict", "r", "@alice " * 400, limit=1000, sanitize_parts=False)
    assert "".join(strip_part(p, k) for k, p in enumerate(parts, 1)) == "@alice " * 400


def test_limit_too_small_is_rejected() -> None:
    with pytest.raises(ValueError):
        split_body("verdict", "r", "x", limit=100)


def test_pathological_nesting_still_fits() -> None:
    content = "<details>" * 5000 + "\n" + "y\n" * 20000 + "</details>" * 5000
    parts = split_body("verdict", "r", content, limit=4000)
    assert all(len(p) <= 4000 for p in parts)
