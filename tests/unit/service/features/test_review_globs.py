"""Design-review path globs (``design_review.paths`` in .github/debate.yml,
bot/service/features/reviews/handlers.py): which files of a labelled PR are plans to review."""

from __future__ import annotations

from typing import Any

import pytest

from bot.service.features.reviews.handlers import _changed_plans, matches

PLANS = ["docs/plans/**/*.md", "RFC-?.md"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("docs/plans/a.md", True),  # ** spans no folder
        ("docs/plans/x/y/a.md", True),  # … or many
        ("RFC-1.md", True),
        ("docs/plans/a.txt", False),
        ("docs/other/a.md", False),
        ("RFC-12.md", False),  # ? is one character
        ("sub/RFC-1.md", False),  # patterns are anchored at the repository root
        ("docs/plans.md", False),
    ],
)
def test_plan_globs(path: str, expected: bool) -> None:
    assert matches(path, PLANS) is expected


def test_star_stays_within_a_folder_and_double_star_does_not() -> None:
    assert matches("a.md", ["*"]) and not matches("a/b.md", ["*"])
    assert matches("a/b.md", ["**"])
    assert matches("a/b/c.md", ["a/**"]) and not matches("b/c.md", ["a/**"])
    assert matches("a/x/b.md", ["a/*/b.md"]) and not matches("a/x/y/b.md", ["a/*/b.md"])


def test_patterns_are_read_leniently_and_literally() -> None:
    assert matches("docs/a.md", ["  /docs/*.md  "])  # a leading slash and spaces ignored
    assert not matches("docs/a.md", ["", "   "])  # blank patterns match nothing
    assert not matches("docs/a.md", [])
    assert matches("v1.0/[draft].md", ["v1.0/[draft].md"])  # regex characters are literal
    assert not matches("v1x0/d.md", ["v1.0/*.md"])


def test_a_prs_changed_plans_are_added_or_modified_matching_files() -> None:
    files: list[dict[str, Any]] = [
        {"filename": "docs/plans/new.md", "status": "added", "sha": "1" * 40},
        {"filename": "docs/plans/old.md", "status": "modified", "sha": "2" * 40},
        {"filename": "docs/plans/gone.md", "status": "removed", "sha": "3" * 40},
        {"filename": "src/app.py", "status": "modified", "sha": "4" * 40},
        {"filename": "RFC-2.md", "status": "renamed"},
        {"status": "added"},
    ]
    assert _changed_plans(files, PLANS) == {
        "docs/plans/new.md": "1" * 40,
        "docs/plans/old.md": "2" * 40,
        "RFC-2.md": "",
    }
    assert _changed_plans(files, []) == {}
