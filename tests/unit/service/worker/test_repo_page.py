"""Permalinks start from the repository's page as GitHub sends it: a
data-residency host serves its API at api.NAME.ghe.com and its pages at
NAME.ghe.com, which no derivation from the API URL gets right."""

from __future__ import annotations

import json
from pathlib import Path

from bot.github.events import IssueCommentEvent
from bot.service.worker.context import Origin

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "webhooks"


def _event(html_url: str | None) -> IssueCommentEvent:
    payload = json.loads((FIXTURE / "issue_comment.created.with-installation.json").read_text())
    if html_url is None:
        payload["repository"].pop("html_url", None)
    else:
        payload["repository"]["html_url"] = html_url
    return IssueCommentEvent.model_validate(payload)


def test_the_page_github_sent_wins_over_the_api_url() -> None:
    origin = Origin.of_issue(_event("https://octo.ghe.com/Codertocat/Hello-World"), "d1")
    page = origin.repo_page("https://api.octo.ghe.com")
    assert page == "https://octo.ghe.com/Codertocat/Hello-World"


def test_the_real_delivery_carries_its_page() -> None:
    payload = json.loads((FIXTURE / "issue_comment.created.with-installation.json").read_text())
    origin = Origin.of_issue(IssueCommentEvent.model_validate(payload), "d1")
    assert origin.html_url == "https://github.com/Codertocat/Hello-World"


def test_without_a_page_it_is_derived_as_before() -> None:
    origin = Origin.of_issue(_event(None), "d1")
    page = origin.repo_page("https://ghes.example/api/v3")
    assert page == "https://ghes.example/Codertocat/Hello-World"
