"""The fake GitHub's state and answers (``FakeGitHub``, testkit/fakes/github_server.py):
its errors in GitHub's shapes, request records, seeded objects and fault windows,
and the request-body readers its routes share."""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import Request

MAX_BODY_CHARS = 65_536
DOCS = "https://docs.github.com/rest"
REACTIONS = {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}
PRIMARY_MESSAGE = "API rate limit exceeded for installation ID {installation}."
LOCKED_DOCS = "https://docs.github.com/articles/locking-conversations/"
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit and have been temporarily blocked from "
    "content creation. Please retry your request again later. If you reach out to GitHub "
    "Support for help, please include the request ID 0000:0000:0000000:0000000:00000000."
)
SECONDARY_DOCS = f"{DOCS}/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
# GitHub's content-creation limits per installation: (window in seconds, requests).
CONTENT_LIMITS: tuple[tuple[float, int], ...] = ((60.0, 80), (3600.0, 500))
CONTENT_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
LEGACY_PERMISSION = {
    "admin": "admin",
    "maintain": "write",
    "write": "write",
    "triage": "read",
    "read": "read",
    "none": "none",
}
PERMISSION_FLAGS = {
    "admin": ("admin", "maintain", "push", "triage", "pull"),
    "maintain": ("maintain", "push", "triage", "pull"),
    "write": ("push", "triage", "pull"),
    "triage": ("triage", "pull"),
    "read": ("pull",),
    "none": (),
}


class ApiError(Exception):
    def __init__(
        self, status: int, message: str, *, headers: dict[str, str] | None = None, **extra: Any
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body: dict[str, Any] = {"message": message, **extra}
        self.body.setdefault("documentation_url", DOCS)
        self.headers = headers or {}


def not_found(message: str = "Not Found") -> ApiError:
    return ApiError(404, message)


def too_long(resource: str) -> ApiError:
    return ApiError(
        422,
        "Validation Failed",
        errors=[
            {
                "resource": resource,
                "code": "custom",
                "field": "body",
                "message": f"body is too long (maximum is {MAX_BODY_CHARS} characters)",
            }
        ],
    )


def missing_field(resource: str, name: str) -> ApiError:
    return ApiError(
        422,
        "Validation Failed",
        errors=[{"resource": resource, "code": "missing_field", "field": name}],
    )


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sha1_hex(*parts: str | bytes) -> str:
    h = hashlib.sha1(usedforsecurity=False)
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
    return h.hexdigest()


def blob_sha(data: bytes) -> str:
    return sha1_hex(f"blob {len(data)}\0".encode(), data)


# -- state ---------------------------------------------------------------------


@dataclass
class RecordedRequest:
    method: str
    path: str
    route: str
    query: dict[str, str]
    json: Any
    status: int
    headers: dict[str, str]
    installation: int | None = None  # whose installation token it carried
    # time.monotonic() when the answer was sent: for latency benchmarks.
    at: float = field(default_factory=time.monotonic)
    # time.monotonic() when the request arrived: when a pacing benchmark says it was sent.
    received: float = field(default_factory=time.monotonic)

    @property
    def kind(self) -> str:
        return f"{self.method} {self.route}"


@dataclass
class User:
    login: str
    type: str = "User"


@dataclass
class Repo:
    full_name: str
    id: int
    installation_id: int
    default_branch: str
    private: bool
    permissions: dict[str, str] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)  # name -> head commit sha
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # sha -> tree
    labels: set[str] = field(default_factory=set)
    license: str | None = None  # SPDX id GitHub detected (`set_license`)


@dataclass
class Issue:
    repo: str
    number: int
    id: int
    title: str
    body: str | None
    user: User
    labels: list[str]
    state: str = "open"
    is_pr: bool = False
    head_ref: str | None = None
    base_ref: str | None = None
    pull_files: list[dict[str, Any]] = field(default_factory=list)
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    locked: bool = False
    gone: str | None = None  # "deleted" (410) or "transferred" (404)
    merged_at: str | None = None  # `merge_pull`


@dataclass
class Comment:
    id: int
    repo: str
    issue_number: int
    body: str
    user: User
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)


@dataclass
class ReviewComment:
    id: int
    repo: str
    pull_number: int
    body: str
    path: str
    line: int | None
    original_line: int | None
    diff_hunk: str
    commit_id: str
    original_commit_id: str
    in_reply_to_id: int | None
    user: User
    thread_id: str
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    author_association: str = "NONE"  # OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, …


@dataclass
class Thread:
    node_id: str
    repo: str
    pull_number: int
    comment_ids: list[int]
    resolved: bool = False


@dataclass
class Reaction:
    id: int
    repo: str
    subject: str  # "issue" | "issue_comment" | "review_comment"
    subject_id: int
    content: str
    user: User
    created_at: str = field(default_factory=now_iso)


@dataclass(frozen=True)
class HookEvent:
    """What GitHub delivers to the app's webhook: one event, under its ``guid``."""

    guid: str
    event: str
    action: str | None
    installation_id: int | None
    body: bytes


@dataclass(frozen=True)
class HookDelivery(HookEvent):
    """One attempt to deliver an event; every attempt of an event shares its ``guid``."""

    id: int
    delivered_at: datetime
    redelivery: bool
    status_code: int  # 0: nothing answered
    status: str

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "guid": self.guid,
            "delivered_at": self.delivered_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "redelivery": self.redelivery,
            "duration": 0.01,
            "status": self.status,
            "status_code": self.status_code,
            "event": self.event,
            "action": self.action,
            "installation_id": self.installation_id,
            "repository_id": None,
            "throttled_at": None,
        }


@dataclass
class RateLimitWindow:
    """A rate limit on one installation: armed until a request it ``applies_to``
    arrives, then every request of the installation is refused until ``ends_at``."""

    installation: int
    kind: str  # "secondary" (403), "secondary429" or "primary" (403, x-ratelimit-*)
    window_s: float
    retry_after: bool
    applies_to: Callable[[str, str], bool] | None = None
    ends_at: float | None = None  # epoch seconds, once started

    def refuses(self, installation: int | None, method: str, route: str, now: float) -> bool:
        if installation != self.installation:
            return False
        if self.ends_at is None:
            if self.applies_to is not None and not self.applies_to(method, route):
                return False
            self.ends_at = now + self.window_s
            if self.kind == "primary":  # x-ratelimit-reset is whole epoch seconds
                self.ends_at = float(int(self.ends_at) + 1)
        return now < self.ends_at


@dataclass
class Faults:
    """Which calls fail, and how.

    ``script``: one entry per eligible request, in order (``None`` = pass; then
    every request passes once the script is used up). Otherwise a ``rate``
    fraction of eligible requests fails, drawn from a ``seed``ed generator.
    A kind is ``"secondary"`` (403 + ``Retry-After``), ``"secondary429"``,
    ``"primary"`` (403, ``x-ratelimit-remaining: 0`` and a reset time), ``"lost502"``
    (the request takes effect but the client gets a 502) or a 5xx status.
    """

    rate: float = 0.0
    seed: int = 0
    kinds: Sequence[str | int] = ("secondary", 500, 502, 503)
    script: Sequence[str | int | None] | None = None
    retry_after: int = 1
    applies_to: Callable[[str, str], bool] | None = None  # (method, route) -> eligible?
    _rng: random.Random = field(init=False, repr=False)
    _pos: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def pick(self, method: str, route: str) -> str | int | None:
        if self.applies_to is not None and not self.applies_to(method, route):
            return None
        if self.script is not None:
            if self._pos >= len(self.script):
                return None
            kind = self.script[self._pos]
            self._pos += 1
            return kind
        if self.rate > 0 and self._rng.random() < self.rate:
            return self._rng.choice(list(self.kinds))
        return None


# -- the fake ------------------------------------------------------------------


def _tree_entries(
    files: dict[str, bytes], recursive: bool, modes: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Git-trees entries for a commit's files: folders (``tree``) and files (``blob``),
    sorted by path like git; without ``recursive`` only the top level. ``modes``:
    paths seeded as symlinks (120000) or submodules (160000, type ``commit``)."""
    folders = {
        "/".join(path.split("/")[:i]) for path in files for i in range(1, path.count("/") + 1)
    }
    entries: list[dict[str, Any]] = [
        {"path": f, "mode": "040000", "type": "tree", "sha": sha1_hex("tree", f)} for f in folders
    ]
    entries += [
        {"path": path, "mode": "100644", "type": "blob", "sha": blob_sha(data), "size": len(data)}
        for path, data in files.items()
    ]
    for e in entries:
        mode = (modes or {}).get(str(e["path"]))
        if mode == "160000":  # a submodule: the commit it pins, no size
            e.update(mode=mode, type="commit", sha=files[str(e["path"])].decode())
            e.pop("size")
        elif mode is not None:
            e["mode"] = mode
    if not recursive:
        entries = [e for e in entries if "/" not in e["path"]]
    return sorted(entries, key=lambda e: str(e["path"]))


async def body_json(request: Request) -> Any:
    raw = await request.body()
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise ApiError(400, "Problems parsing JSON") from None


def body_text(payload: Any, resource: str, *, required: bool = True) -> str | None:
    body = payload.get("body") if isinstance(payload, dict) else None
    if body is None:
        if required:
            raise missing_field(resource, "body")
        return None
    if not isinstance(body, str):
        raise ApiError(
            422,
            "Validation Failed",
            errors=[{"resource": resource, "code": "invalid", "field": "body"}],
        )
    if len(body) > MAX_BODY_CHARS:
        raise too_long(resource)
    return body
