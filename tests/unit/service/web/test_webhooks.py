from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from bot.core.errors import PayloadError, WebhookError
from bot.github.events import (
    InstallationEvent,
    IssueCommentEvent,
    IssuesEvent,
    PingEvent,
    PullRequestEvent,
    PullRequestReviewCommentEvent,
    parse_event,
)
from bot.github.webhooks import sign, verify_signature
from bot.service.features.declared import DELIVERY_FILTER
from bot.service.web.webhook import rejection_status
from testkit.harness.service import FIXTURES

CORPUS = FIXTURES
MANIFEST: list[dict[str, Any]] = json.loads((CORPUS / "manifest.json").read_text())["webhooks"]


# --- signatures ------------------------------------------------------------------


@pytest.fixture
def secret() -> bytes:
    return secrets.token_bytes(32)


def test_sign_matches_githubs_algorithm(secret: bytes) -> None:
    body = b'{"zen": "Design for failure."}'
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    assert sign(secret, body) == expected


def test_known_vector() -> None:
    # The example from GitHub's "Validating webhook deliveries" documentation.
    assert (
        sign(b"It's a Secret to Everybody", b"Hello, World!")
        == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    )


def test_valid_signature_passes(secret: bytes) -> None:
    body = secrets.token_bytes(500)
    verify_signature(secret, body, sign(secret, body))
    upper_hex = "sha256=" + sign(secret, body)[len("sha256=") :].upper()
    verify_signature(secret, body, f"  {upper_hex} ")


@pytest.mark.parametrize(
    "header_for",
    [
        lambda s, b: None,
        lambda s, b: "",
        lambda s, b: sign(s, b)[len("sha256=") :],  # no prefix
        lambda s, b: "sha1=" + hmac.new(s, b, hashlib.sha1).hexdigest(),  # never SHA-1
        lambda s, b: "SHA256=" + sign(s, b)[len("sha256=") :],
        lambda s, b: "sha256=" + "zz" * 32,  # not hex
        lambda s, b: "sha256=" + "ab" * 31,  # too short
        lambda s, b: sign(s, b) + "00",  # too long
        lambda s, b: sign(s, b + b" "),  # another body
        lambda s, b: sign(s + b"x", b),  # another secret
        lambda s, b: "sha256=" + "é" * 64,  # non-ASCII
    ],
)
def test_bad_signatures_are_401(secret: bytes, header_for: Any) -> None:
    body = b'{"action": "created"}'
    with pytest.raises(WebhookError) as exc_info:
        verify_signature(secret, body, header_for(secret, body))
    assert exc_info.value.http_status == 401


def test_empty_secret_never_verifies() -> None:
    body = b"{}"
    with pytest.raises(WebhookError) as exc_info:
        verify_signature(b"", body, sign(b"", body))
    assert exc_info.value.http_status == 401


def test_error_text_never_contains_the_secret_or_digest(secret: bytes) -> None:
    body = b"{}"
    good = sign(secret, body)
    with pytest.raises(WebhookError) as exc_info:
        verify_signature(secret, body + b" ", good)
    assert good[7:] not in str(exc_info.value)
    assert secret.hex() not in str(exc_info.value)


# --- events: the corpus ----------------------------------------------------------

_TYPES: dict[str, type[object]] = {
    "issue_comment": IssueCommentEvent,
    "issues": IssuesEvent,
    "pull_request": PullRequestEvent,
    "pull_request_review_comment": PullRequestReviewCommentEvent,
    "installation": InstallationEvent,
    "ping": PingEvent,
}


def test_corpus_is_complete() -> None:
    on_disk = {p.name for p in (CORPUS / "webhooks").glob("*.json")}
    assert on_disk == {Path(e["file"]).name for e in MANIFEST}
    assert len(on_disk) >= 20


@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: Path(e["file"]).name)
def test_every_corpus_delivery_parses(entry: dict[str, Any]) -> None:
    name = entry["x_github_event"]
    event = parse_event(name, (CORPUS / entry["file"]).read_bytes())
    assert event is not None
    assert type(event) is _TYPES[name]
    assert event.action == entry["action"]
    assert event.installation_id == entry["installation_id"]
    if "sender" in entry:
        assert event.sender is not None
        assert event.sender.login == entry["sender"]
        assert event.sender.type == entry["sender_type"]
        assert event.sender_is_bot == (entry["sender_type"] == "Bot")
    else:
        assert event.sender is None
    if "repository" in entry:
        assert event.repository is not None
        assert event.repository.full_name == entry["repository"]
        owner, name_ = entry["repository"].split("/")
        assert (event.repository.owner.login, event.repository.name) == (owner, name_)
    if "comment_id" in entry:
        assert isinstance(event, IssueCommentEvent | PullRequestReviewCommentEvent)
        assert event.comment.id == entry["comment_id"]
        assert event.comment.body.startswith(entry["comment_body_prefix"])
    if "issue_is_pull_request" in entry:
        assert isinstance(event, IssueCommentEvent | IssuesEvent)
        assert event.issue.is_pull_request == entry["issue_is_pull_request"]
        assert event.issue.number == entry["issue_number"]
    if "pull_request_number" in entry:
        assert isinstance(event, PullRequestEvent | PullRequestReviewCommentEvent)
        assert event.pull_request.number == entry["pull_request_number"]
    if "label" in entry:
        assert isinstance(event, IssuesEvent | PullRequestEvent)
        assert event.label is not None and event.label.name == entry["label"]
    if name == "ping":
        assert isinstance(event, PingEvent)
        assert event.hook is not None
        assert event.hook.type == entry["hook_type"]
        assert event.hook.app_id == entry["hook_app_id"]


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / "webhooks" / name).read_text())
    return data


def test_review_comment_fields() -> None:
    event = parse_event(
        "pull_request_review_comment",
        (CORPUS / "webhooks/pull_request_review_comment.created.json").read_bytes(),
    )
    assert isinstance(event, PullRequestReviewCommentEvent)
    c = event.comment
    assert c.path == "README.md"
    assert c.line == 265 and c.original_line == 265
    assert c.diff_hunk is not None and c.diff_hunk.startswith("@@")
    assert c.commit_id == "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
    assert c.original_commit_id is not None and c.pull_request_review_id == 237895671
    assert c.in_reply_to_id is None
    assert c.created_at is not None and c.created_at.year == 2019
    pr = event.pull_request
    assert pr.head.sha == "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
    assert pr.head.ref == "changes" and pr.base.ref == "master"
    assert pr.head.repo is not None and pr.head.repo.full_name == "Codertocat/Hello-World"


def test_null_bodies_become_empty_strings() -> None:
    event = parse_event(
        "issues", (CORPUS / "webhooks/issues.opened.with-empty-body.json").read_bytes()
    )
    assert isinstance(event, IssuesEvent)
    assert event.issue.body == ""
    assert event.repository.default_branch == "master"


def test_pr_issue_comment_and_labels() -> None:
    data = _load("issue_comment.created.pull-request.json")
    event = parse_event("issue_comment", json.dumps(data).encode())
    assert isinstance(event, IssueCommentEvent)
    assert event.issue.is_pull_request
    data["issue"]["labels"] = [{"name": "debate", "id": 1, "color": "fff", "new_field": 1}]
    event = parse_event("issue_comment", json.dumps(data).encode())
    assert isinstance(event, IssueCommentEvent)
    assert event.issue.label_names == ("debate",)


def test_installation_created_at_may_be_epoch_or_iso() -> None:
    # Both forms exist in the corpus; neither may break parsing.
    for name in ("installation.created.json", "installation.created.app-delivery.json"):
        assert isinstance(
            parse_event("installation", (CORPUS / "webhooks" / name).read_bytes()),
            InstallationEvent,
        )


def test_bot_login_suffix_counts_as_bot_even_if_type_is_user() -> None:
    data = _load("issue_comment.created.json")
    data["sender"]["login"] = "renovate[bot]"
    event = parse_event("issue_comment", json.dumps(data).encode())
    assert event is not None and event.sender_is_bot


def test_deleted_fork_head_repo_is_optional() -> None:
    data = _load("pull_request.labeled.json")
    data["pull_request"]["head"]["repo"] = None
    event = parse_event("pull_request", json.dumps(data).encode())
    assert isinstance(event, PullRequestEvent) and event.pull_request.head.repo is None


# --- events: ignored and malformed -----------------------------------------------


@pytest.mark.parametrize("name", ["push", "check_run", "workflow_run", "star", ""])
def test_ignored_events_return_none_without_parsing(name: str) -> None:
    assert name not in DELIVERY_FILTER.event_names
    assert parse_event(name, b"not even json") is None


@pytest.mark.parametrize("body", [b"", b"{", b"[1, 2]", b'"text"', b"\xff\xfe", b"null"])
def test_malformed_json_is_400(body: bytes) -> None:
    with pytest.raises(PayloadError) as exc_info:
        parse_event("issue_comment", body)
    assert rejection_status(exc_info.value) == 400


@pytest.mark.parametrize(
    ("event", "file", "path"),
    [
        ("issue_comment", "issue_comment.created.json", ("comment",)),
        ("issue_comment", "issue_comment.created.json", ("comment", "id")),
        ("issue_comment", "issue_comment.created.json", ("issue", "number")),
        ("issue_comment", "issue_comment.created.json", ("repository",)),
        ("issue_comment", "issue_comment.created.json", ("sender",)),
        ("issues", "issues.labeled.json", ("issue",)),
        ("pull_request", "pull_request.labeled.json", ("pull_request", "head")),
        (
            "pull_request_review_comment",
            "pull_request_review_comment.created.json",
            ("comment", "id"),
        ),
        ("installation", "installation.created.json", ("installation",)),
    ],
)
def test_missing_needed_fields_are_400(event: str, file: str, path: tuple[str, ...]) -> None:
    data = _load(file)
    target = data
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    with pytest.raises(PayloadError) as exc_info:
        parse_event(event, json.dumps(data).encode())
    assert rejection_status(exc_info.value) == 400
    assert ".".join(path) in str(exc_info.value)


def test_wrong_types_are_400_and_do_not_echo_values() -> None:
    data = _load("issue_comment.created.json")
    data["comment"]["id"] = "ghp_" + "x" * 36
    with pytest.raises(PayloadError) as exc_info:
        parse_event("issue_comment", json.dumps(data).encode())
    assert rejection_status(exc_info.value) == 400
    assert "ghp_" not in str(exc_info.value)
