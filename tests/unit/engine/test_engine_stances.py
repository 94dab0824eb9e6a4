"""Stance blocks: lenient parsing and deterministic convergence."""

from __future__ import annotations

import random
from typing import cast

import pytest

from bot.engine import stances
from bot.engine.stances import (
    StanceEntry,
    holders,
    open_points,
    parse_position,
    parse_stances,
    read_persona,
    strip_stance_block,
)
from bot.engine.text import clip
from bot.engine.types import Stance


@pytest.mark.parametrize(
    ("line", "stance", "reason"),
    [
        ("POINT 1: AGREE — the cache is fine", "AGREE", "the cache is fine"),
        ("POINT 1: HOLD - still too slow", "HOLD", "still too slow"),
        ("point 1 - concede - fair", "CONCEDE", "fair"),
        ("Point 1 — Concede: they showed the benchmark", "CONCEDE", "they showed the benchmark"),
        ("POINT 1 : agree", "AGREE", ""),
        ("**POINT 1:** HOLD — bold markdown", "HOLD", "bold markdown"),
        ("- POINT 1: CONCEDE — bulleted", "CONCEDE", "bulleted"),
        ("> POINT #1: Agree – en dash", "AGREE", "en dash"),
        ("POINT 1. HOLD: dotted", "HOLD", "dotted"),
        ("POINT 1) CONCEDE", "CONCEDE", ""),
        ("  POINT 1 AGREE no separator", "AGREE", "no separator"),
        ("POINT 1: **CONCEDE** — bold stance", "CONCEDE", "bold stance"),
    ],
)
def test_stance_line_variants(line: str, stance: str, reason: str) -> None:
    got = parse_stances(f"Some argument.\n\n{line}\n", 1)[1]
    assert got.stance == stance
    assert got.reason == reason
    assert got.explicit


@pytest.mark.parametrize(
    "text",
    [
        "",
        "No stance block at all.",
        "POINT 1: MAYBE — unknown word",
        "POINT one: AGREE",
        "POINTLESS 1: AGREE",
        "POINT 99: AGREE — out of range",
        "POINT 0: CONCEDE",
        "POINT 1:",
        "\x00\x01 binary junk POINT",
        "ÜNÏCÖDE 🙂 POINT 1 AGREEMENT",
        "POINT 1: agreeable",
    ],
)
def test_unusable_block_counts_as_hold(text: str) -> None:
    got = parse_stances(text, 2)
    assert set(got) == {1, 2}
    assert all(e.stance == "HOLD" and not e.explicit for e in got.values())


def test_last_line_for_a_point_wins() -> None:
    text = (
        "In the body I said POINT 1: AGREE — early\n...\nPOINT 1: CONCEDE — final\nPOINT 2: AGREE"
    )
    got = parse_stances(text, 3)
    assert got[1].stance == "CONCEDE" and got[1].reason == "final"
    assert got[2].stance == "AGREE"
    assert got[3] == StanceEntry("HOLD")


@pytest.mark.parametrize("seed", range(40))
def test_random_text_never_crashes(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "POINT AGREE HOLD CONCEDE 0123456789:-—–*#>\n \t`_é🙂"
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
    n = rng.randint(0, 6)
    got = parse_stances(text, n)
    assert sorted(got) == list(range(1, n + 1))
    assert all(e.stance in ("AGREE", "HOLD", "CONCEDE") for e in got.values())
    parse_position(text)
    strip_stance_block(text)


def _two_passes(text: str, n: int) -> tuple[str, dict[int, StanceEntry]]:
    """The position and the stances as two separate passes over the lines read them."""
    found: dict[int, StanceEntry] = {}
    for line in text.splitlines():
        m = stances._STANCE_LINE.match(line)
        if m is not None and 1 <= int(m.group(1)) <= n:
            found[int(m.group(1))] = StanceEntry(
                cast(Stance, m.group(2).upper()), m.group(3).strip(), explicit=True
            )
    position = ""
    for line in text.splitlines():
        p = stances._POSITION_LINE.match(line)
        if p:
            position = p.group(1)
            break
        stripped = line.strip().strip("#*_> ").strip()
        if not position and stripped and not stances._STANCE_LINE.match(line):
            position = stripped
    return position, {p: found.get(p, StanceEntry("HOLD")) for p in range(1, n + 1)}


@pytest.mark.parametrize("seed", range(60))
def test_one_pass_reads_what_two_passes_read(seed: int) -> None:
    rng = random.Random(seed)
    lines = [
        "POSITION: keep REST",
        "**Position:** gRPC",
        "## Heading",
        "",
        "prose line",
        "POINT 1: HOLD — r",
        "- POINT 2: concede",
        "POINT 9: AGREE",
        "> POINT #1: Agree – late",
        "POSITION -",
    ]
    text = "\n".join(rng.choice(lines) for _ in range(rng.randint(0, 12)))
    n = rng.randint(0, 3)
    position, got = read_persona(text, n)
    assert (position, got) == _two_passes(text, n)
    assert parse_position(text, max_chars=20) == clip(position, 20)


def _ledger(*rows: str) -> dict[str, dict[int, StanceEntry]]:
    return {
        f"p{i}": {j + 1: StanceEntry(cast(Stance, s)) for j, s in enumerate(row.split())}
        for i, row in enumerate(rows)
    }


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (("HOLD", "HOLD"), (1,)),
        (("HOLD", "CONCEDE"), ()),
        (("AGREE", "AGREE"), ()),
        (("CONCEDE", "HOLD"), ()),
        (("HOLD HOLD AGREE", "HOLD CONCEDE HOLD"), (1,)),
        (("HOLD HOLD", "AGREE HOLD", "HOLD AGREE"), (1, 2)),
        (("HOLD", "CONCEDE", "AGREE"), ()),
    ],
)
def test_open_points(rows: tuple[str, ...], expected: tuple[int, ...]) -> None:
    ledger = _ledger(*rows)
    n = len(rows[0].split())
    assert open_points(ledger, range(1, n + 1)) == expected


def test_holders_in_ledger_order() -> None:
    ledger = _ledger("HOLD", "AGREE", "HOLD")
    assert holders(ledger, 1) == ("p0", "p2")


def test_position_line_and_fallback() -> None:
    assert parse_position("intro\nPOSITION: Use REST.\nmore") == "Use REST."
    assert parse_position("**Position:** gRPC wins") == "gRPC wins"
    assert parse_position("\n\n## First real line\nPOINT 1: HOLD") == "First real line"
    assert parse_position("POINT 1: HOLD — x") == ""
    assert parse_position("POSITION: " + "x " * 500, max_chars=50).endswith("…")


def test_strip_stance_block() -> None:
    assert strip_stance_block("Body text\n\nPOINT 1: HOLD — x\nPOINT 2: AGREE") == "Body text"
