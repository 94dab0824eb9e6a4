"""Arbitration staleness (bot/github/staleness.py): whether a review comment is
still about the lines it was made on, from REST fields and two file versions."""

from __future__ import annotations

from typing import Any

import pytest

from bot.github.staleness import OUTDATED, Span, commented_span, span_reason

HEAD = "f" * 40
OLD = "a1b2c3d" + "0" * 33


def comment(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "path": "src/app.py",
        "line": 3,
        "original_line": 3,
        "side": "RIGHT",
        "original_commit_id": OLD,
    }
    return {**base, **fields}


def test_githubs_own_outdated_mark_decides_first() -> None:
    assert commented_span(comment(line=None), HEAD) == OUTDATED
    assert commented_span(comment(position=None), HEAD) == OUTDATED
    assert commented_span(comment(position=7), HEAD) == Span("src/app.py", OLD, 3, 3)


@pytest.mark.parametrize(
    "fields",
    [
        {"original_commit_id": HEAD},  # made on the head itself
        {"side": "LEFT"},  # the old side is never compared
        {"original_commit_id": None, "commit_id": None},  # no commit to compare with
        {"path": ""},
        {"original_line": "3", "line": "3"},  # not a line number
    ],
)
def test_fresh_without_reading_a_file(fields: dict[str, Any]) -> None:
    assert commented_span(comment(**fields), HEAD) is None


def test_the_span_runs_from_the_start_line_and_falls_back_to_the_current_fields() -> None:
    multi = comment(original_start_line=2, original_line=4)
    assert commented_span(multi, HEAD) == Span("src/app.py", OLD, 2, 4)
    current = comment(original_line=None, original_commit_id=None, commit_id=OLD, start_line=1)
    assert commented_span(current, HEAD) == Span("src/app.py", OLD, 1, 3)


BEFORE = "one\ntwo\nthree\nfour\n"


def test_lines_that_moved_are_unchanged_and_lines_edited_are_stale() -> None:
    span = Span("src/app.py", OLD, 2, 3)
    assert span_reason(span, BEFORE, "zero\none\ntwo\nthree\nfour\n") is None
    assert span_reason(span, BEFORE, "one\ntwo\nTHREE\nfour\n") == (
        "lines 2–3 changed after the comment was made (on a1b2c3d)"
    )
    single = Span("src/app.py", OLD, 3, 3)
    assert span_reason(single, BEFORE, "three-ish\n") == (
        "line 3 changed after the comment was made (on a1b2c3d)"
    )


def test_lines_must_stay_whole_and_contiguous() -> None:
    span = Span("src/app.py", OLD, 2, 3)
    assert span_reason(span, BEFORE, "two\nx\nthree\n") is not None  # split apart
    assert span_reason(span, BEFORE, "two\nthree and more\n") is not None  # a prefix only


def test_a_file_gone_at_the_head_is_stale_and_lines_past_the_end_are_not_judged() -> None:
    assert span_reason(Span("src/app.py", OLD, 2, 2), BEFORE, None) == (
        "`src/app.py` no longer exists at the PR head"
    )
    beyond = Span("src/app.py", OLD, 9, 10)
    assert beyond.lines(BEFORE) == []
    assert span_reason(beyond, BEFORE, None) is None
