"""A fake GitHub (REST + the GraphQL the bot uses) served over real loopback HTTP.

``FakeGitHub`` runs a FastAPI app under uvicorn in a background thread on
127.0.0.1 (a free port). It enforces what GitHub enforces for the routes the
bot calls: App JWTs (RS256, verified against the public key the test hands
over) for installation tokens, installation tokens that expire, 404/422 shapes,
bodies of at most 65,536 characters, ``Link`` pagination, rate-limit headers,
and — on demand — secondary rate limits and 5xx faults. Every request is
recorded for assertions. Nothing secret is generated at import time.

Faults a test can inject (``inject_faults`` for per-request scripts or random
faults; the rest are GitHub-side states): ``revoke_tokens`` (401 "Bad
credentials"), ``limit_installation`` (a secondary or primary rate-limit window
for one installation, with or without ``Retry-After``; requests it refuses are
counted in ``limited_requests``), ``delete_issue`` (410 "This issue was
deleted"), ``transfer_issue`` (404: moved where the installation cannot see it)
and ``lock_issue`` (403 "Unable to create comment because issue is locked.").
Requests are recorded with the installation whose token they carried.

Content creation is always limited as on GitHub (``content_limits=False`` turns it
off): per installation, at most 80 content-creating requests in any 60 s and 500
in any 3,600 s of ``clock``. Content-creating means POST, PATCH, PUT or DELETE on
a REST route with an installation token; app-JWT calls (installation tokens,
webhook redelivery) and GraphQL are not counted. The request beyond answers 403
with the secondary-limit message and a ``Retry-After`` of the seconds until the
window frees, and does not take effect; ``content_limited`` counts those
refusals, apart from ``limited_requests`` (the injected windows), so a test can
tell the bot's own pacing failing from a fault it injected.

Seed state with ``add_repo``, ``set_permission``, ``put_file``, ``add_issue``,
``add_pull``, ``add_comment`` and ``add_review_comment``; read it back with
``comments``, ``reactions``, ``labels``, ``review_comments``, ``thread_resolved``,
``file``, ``issue`` and the request helpers (``count``, ``counts_by_kind``).

Webhooks: ``configure_webhook(url, secret)`` names the app's webhook; ``deliver``
sends an event there as GitHub does (signed, recorded with the status it got,
0 when nothing answered) and ``add_hook_delivery`` records an attempt without
sending. ``GET /app/hook/deliveries`` lists the attempts and ``POST
/app/hook/deliveries/{delivery_id}/attempts`` sends one again (``hook_deliveries``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import math
import random
import re
import secrets
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode

import anyio
import httpx
import jwt
import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from testkit.fakes import github_archive

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


class FakeGitHub:
    def __init__(
        self,
        *,
        app_id: int,
        public_key_pem: str | bytes,
        app_slug: str = "debate-bot",
        token_ttl_s: float = 3600.0,
        api_prefix: str = "",
        rate_limit: int = 5000,
        content_limits: bool = True,
    ) -> None:
        self.app_id = app_id
        self.app_slug = app_slug
        # What the app was registered with (GET /app); doctor compares them to deploy/app.yml.
        self.app_permissions: dict[str, str] = {
            "issues": "write",
            "pull_requests": "write",
            "contents": "read",
            "metadata": "read",
        }
        # The manifest flow: codes GitHub handed out, and what a conversion returns.
        self._manifest_codes: dict[str, dict[str, Any]] = {}
        self.manifests: list[dict[str, Any]] = []
        self.manifest_private_key: str | None = None
        self.manifest_webhook_secret = "whsec-from-manifest-" + secrets.token_hex(8)
        self.app_events: list[str] = [
            "issue_comment",
            "issues",
            "pull_request",
            "pull_request_review_comment",
        ]
        self.bot_login = f"{app_slug}[bot]"
        self.token_ttl_s = token_ttl_s
        self.api_prefix = api_prefix.rstrip("/")
        self.rate_limit = rate_limit
        self.rate_limit_remaining = rate_limit
        self.faults: Faults | None = None
        self.limits: list[RateLimitWindow] = []
        self._limited: Counter[int] = Counter()
        self.content_limits = content_limits
        # installation -> clock() of its content-creating requests in the last hour
        self._content_writes: dict[int, deque[float]] = {}
        self._content_limited: Counter[int] = Counter()
        # Every Authorization credential received (app JWTs, installation tokens):
        # what a test scans the bot's logs and comments for.
        self.received_credentials: set[str] = set()
        self.clock: Callable[[], float] = time.time  # epoch seconds of rate-limit windows
        self.requests: list[RecordedRequest] = []
        # GitHub answers at most 100,000 tree entries (and 7 MB) and sets `truncated`.
        self.tree_limit = 100_000
        # Archives and special tree entries (testkit/fakes/github_archive.py): repo ->
        # path -> git mode ("120000" symlink, "160000" submodule); (repo, sha) -> a
        # crafted archive served instead of the commit's own.
        self.modes: dict[str, dict[str, str]] = {}
        self.archives: dict[tuple[str, str], bytes] = {}
        self._public_key = (
            public_key_pem.decode() if isinstance(public_key_pem, bytes) else public_key_pem
        )
        self._lock = threading.RLock()
        self._ids = itertools.count(1000)
        self._installations: set[int] = set()
        self._tokens: dict[str, tuple[int, float]] = {}  # token -> (installation, expiry)
        self._repos: dict[str, Repo] = {}
        self._issues: dict[tuple[str, int], Issue] = {}
        self._comments: dict[int, Comment] = {}
        self._review_comments: dict[int, ReviewComment] = {}
        self._threads: dict[str, Thread] = {}
        self._reactions: list[Reaction] = []
        self._user_ids: dict[str, int] = {}
        # installation -> granted permissions (GitHub App permissions); default: all written
        self._app_permissions: dict[int, dict[str, str]] = {}
        # The app's webhook and every attempt to deliver to it, oldest first.
        self.webhook_url: str | None = None
        self.webhook_secret: str | None = None
        self.hook_deliveries: list[HookDelivery] = []
        self.redelivery_max_age = timedelta(days=3)  # GitHub keeps deliveries 3 days
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""
        self.asgi: ASGIApp = _Recorder(self._build_app(), self)

    # -- lifecycle ---------------------------------------------------------

    @property
    def api_url(self) -> str:
        """What to give the bot as ``DEBATE_BOT_GITHUB_API_URL``."""
        return self.url + self.api_prefix

    def start(self) -> FakeGitHub:
        # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets
        # whose proto says TCP, and without it every response stalls ~40 ms (Nagle
        # holding the body behind the headers until the client's delayed ACK).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(self.asgi, log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake GitHub server did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- seeding -----------------------------------------------------------

    def add_installation(self, installation_id: int) -> None:
        with self._lock:
            self._installations.add(installation_id)

    def add_repo(
        self,
        full_name: str,
        *,
        installation_id: int,
        default_branch: str = "main",
        private: bool = False,
    ) -> None:
        with self._lock:
            self._installations.add(installation_id)
            repo = Repo(full_name, next(self._ids), installation_id, default_branch, private)
            root = sha1_hex("root", full_name)
            repo.commits[root] = {}
            repo.branches[default_branch] = root
            self._repos[full_name] = repo

    def set_mode(self, repo: str, path: str, mode: str) -> None:
        """Seed: ``path`` is a symlink (``120000``; its content is the target) or a
        submodule (``160000``; its content is the commit it pins)."""
        with self._lock:
            self.modes.setdefault(repo, {})[path.strip("/")] = mode

    def make_empty(self, repo: str) -> None:
        """The repository as GitHub holds it before the first push: no branch, and
        its git routes answer 409 "Git Repository is empty."."""
        with self._lock:
            self._repo(repo).branches.clear()

    def set_permission(self, repo: str, username: str, permission: str) -> None:
        if permission not in LEGACY_PERMISSION:
            raise ValueError(f"unknown permission {permission!r}")
        with self._lock:
            self._repo(repo).permissions[username] = permission

    def put_file(self, repo: str, path: str, content: str | bytes, ref: str | None = None) -> str:
        """Commit a file on branch ``ref`` (created from the default branch if new)."""
        data = content.encode() if isinstance(content, str) else content
        with self._lock:
            r = self._repo(repo)
            branch = ref or r.default_branch
            if branch not in r.branches:
                r.branches[branch] = r.branches[r.default_branch]
            return self._commit(r, branch, {path.strip("/"): data})

    def add_issue(
        self,
        repo: str,
        *,
        title: str,
        body: str | None = "",
        user: str = "octocat",
        user_type: str = "User",
        labels: Iterable[str] = (),
        number: int | None = None,
    ) -> int:
        with self._lock:
            return self._new_issue(repo, title, body, User(user, user_type), list(labels), number)

    def add_pull(
        self,
        repo: str,
        *,
        title: str,
        body: str | None = "",
        head_ref: str = "feature",
        base_ref: str | None = None,
        user: str = "octocat",
        user_type: str = "User",
        files: Iterable[dict[str, Any]] = (),
        labels: Iterable[str] = (),
        number: int | None = None,
    ) -> int:
        with self._lock:
            r = self._repo(repo)
            if head_ref not in r.branches:
                r.branches[head_ref] = r.branches[r.default_branch]
            n = self._new_issue(repo, title, body, User(user, user_type), list(labels), number)
            issue = self._issues[(repo, n)]
            issue.is_pr = True
            issue.head_ref = head_ref
            issue.base_ref = base_ref or r.default_branch
            issue.pull_files = [self._pull_file(f) for f in files]
            return n

    def set_pull_files(self, repo: str, pull_number: int, files: Iterable[dict[str, Any]]) -> None:
        """Seed: what `GET …/pulls/{n}/files` lists (e.g. after a push)."""
        with self._lock:
            self._issues[(repo, pull_number)].pull_files = [self._pull_file(f) for f in files]

    # -- history (`debate-bot eval harvest`) --------------------------------

    def merge_pull(self, repo: str, pull_number: int, *, merged_at: str | None = None) -> None:
        """Seed: the pull request was merged (closed) at ``merged_at`` (default: now)."""
        with self._lock:
            issue = self._issues[(repo, pull_number)]
            issue.state = "closed"
            issue.merged_at = merged_at or now_iso()
            issue.updated_at = issue.merged_at

    def close_pull(self, repo: str, pull_number: int, *, closed_at: str | None = None) -> None:
        """Seed: the pull request was closed without merging."""
        with self._lock:
            issue = self._issues[(repo, pull_number)]
            issue.state = "closed"
            issue.updated_at = closed_at or now_iso()

    def set_license(self, repo: str, spdx_id: str | None) -> None:
        with self._lock:
            self._repo(repo).license = spdx_id

    def set_author_association(self, comment_id: int, association: str) -> None:
        """Seed: how a review comment's author relates to the repository."""
        with self._lock:
            self._review_comments[comment_id].author_association = association

    def head_sha(self, repo: str, pull_number: int) -> str:
        with self._lock:
            issue = self._issues[(repo, pull_number)]
            assert issue.head_ref is not None
            return self._repo(repo).branches[issue.head_ref]

    def add_comment(
        self,
        repo: str,
        issue_number: int,
        body: str,
        *,
        user: str = "octocat",
        user_type: str = "User",
    ) -> int:
        with self._lock:
            c = Comment(next(self._ids), repo, issue_number, body, User(user, user_type))
            self._comments[c.id] = c
            return c.id

    def add_review_comment(
        self,
        repo: str,
        pull_number: int,
        *,
        body: str,
        path: str,
        line: int | None = 1,
        original_line: int | None = None,
        diff_hunk: str = "@@ -1,3 +1,3 @@\n-old\n+new",
        commit_id: str | None = None,
        original_commit_id: str | None = None,
        in_reply_to: int | None = None,
        user: str = "review-bot[bot]",
        user_type: str = "Bot",
    ) -> int:
        with self._lock:
            head = self.head_sha(repo, pull_number)
            return self._new_review_comment(
                repo,
                pull_number,
                body=body,
                path=path,
                line=line,
                original_line=original_line if original_line is not None else line,
                diff_hunk=diff_hunk,
                commit_id=commit_id or head,
                original_commit_id=original_commit_id or commit_id or head,
                in_reply_to=in_reply_to,
                user=User(user, user_type),
            )

    def set_app_permissions(self, installation_id: int, **permissions: str) -> None:
        """Restrict what an installation may do, e.g. ``contents="read"``: writes that
        need more answer 403 "Resource not accessible by integration", as GitHub does."""
        with self._lock:
            self._app_permissions[installation_id] = {
                **self._permissions_of(installation_id),
                **permissions,
            }

    def _permissions_of(self, installation_id: int) -> dict[str, str]:
        default = {
            "issues": "write",
            "pull_requests": "write",
            "contents": "write",
            "metadata": "read",
        }
        return dict(self._app_permissions.get(installation_id, default))

    def _require(self, r: Repo, permission: str) -> None:
        if self._permissions_of(r.installation_id).get(permission) != "write":
            raise ApiError(
                403,
                "Resource not accessible by integration",
                documentation_url=f"{DOCS}/git/refs#create-a-reference",
            )

    def inject_faults(self, **kwargs: Any) -> Faults:
        with self._lock:
            self.faults = Faults(**kwargs)
            return self.faults

    def clear_faults(self) -> None:
        with self._lock:
            self.faults = None

    def revoke_tokens(self, installation_id: int) -> None:
        """Revoke the installation's tokens issued so far (its next token works)."""
        with self._lock:
            for t, (iid, _) in list(self._tokens.items()):
                if iid == installation_id:
                    self._tokens[t] = (iid, 0.0)

    def limit_installation(
        self,
        installation_id: int,
        *,
        kind: str = "secondary",
        window_s: float = 1.0,
        retry_after: bool = True,
        applies_to: Callable[[str, str], bool] | None = None,
    ) -> RateLimitWindow:
        """Rate-limit the installation for ``window_s`` from its next request that
        ``applies_to`` (method, route) accepts; the window's requests are refused."""
        window = RateLimitWindow(installation_id, kind, window_s, retry_after, applies_to)
        with self._lock:
            self.limits.append(window)
        return window

    def limited_requests(self, installation_id: int) -> int:
        """Requests refused by ``limit_installation`` windows: one per window is the
        limit being hit; any more were sent while the client should have waited."""
        with self._lock:
            return self._limited[installation_id]

    def content_limited(self, installation_id: int | None = None) -> int:
        """Content-creating requests refused by the 80-a-minute / 500-an-hour
        limits, for one installation or (None) all of them."""
        with self._lock:
            if installation_id is None:
                return sum(self._content_limited.values())
            return self._content_limited[installation_id]

    def delete_issue(self, repo: str, number: int) -> None:
        with self._lock:
            self._issues[(repo, number)].gone = "deleted"

    def transfer_issue(self, repo: str, number: int) -> None:
        """Moved to a repository the installation cannot see: GitHub answers 404."""
        with self._lock:
            self._issues[(repo, number)].gone = "transferred"

    def lock_issue(self, repo: str, number: int) -> None:
        with self._lock:
            self._issues[(repo, number)].locked = True

    def expire_tokens(self) -> None:
        """Make every issued installation token invalid (as if revoked or expired)."""
        with self._lock:
            self._tokens = {t: (iid, 0.0) for t, (iid, _) in self._tokens.items()}

    # -- webhooks ----------------------------------------------------------

    def configure_webhook(self, url: str | None, secret: str | None) -> None:
        with self._lock:
            self.webhook_url, self.webhook_secret = url, secret

    def deliver(
        self, event: str, payload: dict[str, Any], *, guid: str | None = None
    ) -> HookDelivery:
        """Send ``payload`` to the app's webhook as GitHub does, and record the attempt."""
        action = payload.get("action")
        installation = payload.get("installation")
        hook = HookEvent(
            guid or secrets.token_hex(16),
            event,
            action if isinstance(action, str) else None,
            installation.get("id") if isinstance(installation, dict) else None,
            json.dumps(payload).encode(),
        )
        return self._send_hook(hook, redelivery=False)

    def add_hook_delivery(
        self,
        event: str,
        action: str | None,
        *,
        guid: str | None = None,
        status_code: int = 0,
        delivered_at: datetime | None = None,
        installation_id: int | None = None,
        redelivery: bool = False,
    ) -> HookDelivery:
        """Record an attempt without sending anything (its body is an empty object)."""
        return self._record_hook(
            HookEvent(guid or secrets.token_hex(16), event, action, installation_id, b"{}"),
            redelivery=redelivery,
            status_code=status_code,
            status="OK" if 200 <= status_code < 300 else "failed to connect to host",
            delivered_at=delivered_at,
        )

    def _record_hook(
        self,
        hook: HookEvent,
        *,
        redelivery: bool,
        status_code: int,
        status: str,
        delivered_at: datetime | None = None,
    ) -> HookDelivery:
        with self._lock:
            attempt = HookDelivery(
                hook.guid,
                hook.event,
                hook.action,
                hook.installation_id,
                hook.body,
                id=next(self._ids),
                delivered_at=delivered_at or datetime.now(UTC),
                redelivery=redelivery,
                status_code=status_code,
                status=status,
            )
            self.hook_deliveries.append(attempt)
            return attempt

    def _send_hook(self, hook: HookEvent, *, redelivery: bool) -> HookDelivery:
        with self._lock:
            url, secret = self.webhook_url, self.webhook_secret
        status_code, status = 0, "failed to connect to host"
        if url is not None:
            digest = hmac.new((secret or "").encode(), hook.body, hashlib.sha256).hexdigest()
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "GitHub-Hookshot/fake",
                "X-GitHub-Event": hook.event,
                "X-GitHub-Delivery": hook.guid,
                "X-GitHub-Hook-Installation-Target-Type": "integration",
                "X-GitHub-Hook-Installation-Target-ID": str(self.app_id),
                "X-Hub-Signature-256": f"sha256={digest}",
            }
            try:
                response = httpx.post(url, content=hook.body, headers=headers, timeout=10)
            except httpx.HTTPError:
                pass
            else:
                status_code = response.status_code
                status = "OK" if response.is_success else f"Invalid HTTP Response: {status_code}"
        return self._record_hook(
            hook, redelivery=redelivery, status_code=status_code, status=status
        )

    # -- assertions --------------------------------------------------------

    def actions_token(self, repo: str) -> str:
        """A job token like the ``GITHUB_TOKEN`` of a GitHub Actions run in ``repo``:
        valid for that repository (for the job's six hours), never fetched with a JWT."""
        token = "ghs_" + sha1_hex("actions", repo, str(next(self._ids)))[:36]
        with self._lock:
            self._tokens[token] = (self._repo(repo).installation_id, time.time() + 6 * 3600)
        return token

    def count(
        self, method: str | None = None, route: str | None = None, status: int | None = None
    ) -> int:
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (method is None or r.method == method)
                and (route is None or r.route == route)
                and (status is None or r.status == status)
            )

    def counts_by_kind(self) -> Counter[str]:
        with self._lock:
            return Counter(r.kind for r in self.requests)

    @property
    def token_requests(self) -> int:
        return self.count("POST", "/app/installations/{installation_id}/access_tokens")

    def reset_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    def comments(self, repo: str, issue_number: int) -> list[dict[str, Any]]:
        with self._lock:
            return [
                {
                    "id": c.id,
                    "body": c.body,
                    "user": c.user.login,
                    "user_type": c.user.type,
                    "created_at": c.created_at,
                    "updated_at": c.updated_at,
                }
                for c in sorted(self._comments.values(), key=lambda c: c.id)
                if c.repo == repo and c.issue_number == issue_number
            ]

    def reactions(
        self,
        repo: str,
        *,
        comment_id: int | None = None,
        review_comment_id: int | None = None,
        issue_number: int | None = None,
    ) -> list[str]:
        if comment_id is not None:
            subject, sid = "issue_comment", comment_id
        elif review_comment_id is not None:
            subject, sid = "review_comment", review_comment_id
        elif issue_number is not None:
            subject, sid = "issue", issue_number
        else:
            raise ValueError("name the comment, review comment or issue")
        with self._lock:
            return [
                r.content
                for r in self._reactions
                if r.repo == repo and r.subject == subject and r.subject_id == sid
            ]

    def labels(self, repo: str, issue_number: int) -> list[str]:
        with self._lock:
            return list(self._issues[(repo, issue_number)].labels)

    def issue(self, repo: str, number: int) -> dict[str, Any]:
        with self._lock:
            i = self._issues[(repo, number)]
            return {
                "number": i.number,
                "title": i.title,
                "body": i.body,
                "labels": list(i.labels),
                "user": i.user.login,
                "is_pr": i.is_pr,
                "head_ref": i.head_ref,
                "base_ref": i.base_ref,
                "state": i.state,
            }

    def issues(self, repo: str) -> list[dict[str, Any]]:
        with self._lock:
            numbers = sorted(n for (r, n) in self._issues if r == repo)
        return [self.issue(repo, n) for n in numbers]

    def review_comments(self, repo: str, pull_number: int) -> list[dict[str, Any]]:
        with self._lock:
            return [
                self._review_comment_json(c)
                for c in sorted(self._review_comments.values(), key=lambda c: c.id)
                if c.repo == repo and c.pull_number == pull_number
            ]

    def resolve_thread(self, repo: str, comment_id: int) -> None:
        """Seed: mark the review thread holding ``comment_id`` resolved."""
        with self._lock:
            c = self._review_comments[comment_id]
            assert c.repo == repo
            self._threads[c.thread_id].resolved = True

    def thread_resolved(self, repo: str, comment_id: int) -> bool:
        with self._lock:
            return self._threads[self._review_comments[comment_id].thread_id].resolved

    def file(self, repo: str, path: str, ref: str | None = None) -> str | None:
        with self._lock:
            r = self._repo(repo)
            tree = self._tree(r, ref or r.default_branch)
            data = None if tree is None else tree.get(path.strip("/"))
            return None if data is None else data.decode()

    def branches(self, repo: str) -> dict[str, str]:
        with self._lock:
            return dict(self._repo(repo).branches)

    # -- internals: state --------------------------------------------------

    def _repo(self, full_name: str) -> Repo:
        try:
            return self._repos[full_name]
        except KeyError:
            raise KeyError(f"unknown repo {full_name}") from None

    def _commit(self, r: Repo, branch: str, changes: dict[str, bytes]) -> str:
        tree = dict(r.commits[r.branches[branch]])
        tree.update(changes)
        sha = sha1_hex("commit", str(next(self._ids)), r.full_name, branch)
        r.commits[sha] = tree
        r.branches[branch] = sha
        return sha

    def _tree(self, r: Repo, ref: str) -> dict[str, bytes] | None:
        ref = ref.removeprefix("refs/heads/")
        if ref in r.branches:
            return r.commits[r.branches[ref]]
        return r.commits.get(ref)

    def _new_issue(
        self,
        repo: str,
        title: str,
        body: str | None,
        user: User,
        labels: list[str],
        number: int | None,
    ) -> int:
        r = self._repo(repo)
        if number is None:
            number = 1 + max((n for (rn, n) in self._issues if rn == repo), default=0)
        if (repo, number) in self._issues:
            raise ValueError(f"{repo}#{number} exists")
        r.labels.update(labels)
        self._issues[(repo, number)] = Issue(
            repo, number, next(self._ids), title, body, user, list(dict.fromkeys(labels))
        )
        return number

    def _new_review_comment(
        self,
        repo: str,
        pull_number: int,
        *,
        body: str,
        path: str,
        line: int | None,
        original_line: int | None,
        diff_hunk: str,
        commit_id: str,
        original_commit_id: str,
        in_reply_to: int | None,
        user: User,
    ) -> int:
        cid = next(self._ids)
        if in_reply_to is not None:
            parent = self._review_comments[in_reply_to]
            root_id = parent.in_reply_to_id or parent.id  # replies thread under the root
            thread = self._threads[parent.thread_id]
            thread.comment_ids.append(cid)
            thread_id = thread.node_id
        else:
            root_id = None
            thread_id = f"PRRT_kwDO{cid}"
            self._threads[thread_id] = Thread(thread_id, repo, pull_number, [cid])
        self._review_comments[cid] = ReviewComment(
            cid,
            repo,
            pull_number,
            body,
            path,
            line,
            original_line,
            diff_hunk,
            commit_id,
            original_commit_id,
            root_id,
            user,
            thread_id,
        )
        return cid

    def _pull_file(self, f: dict[str, Any]) -> dict[str, Any]:
        out = {
            "sha": sha1_hex("file", f["filename"]),
            "status": "modified",
            "additions": 1,
            "deletions": 1,
            "changes": 2,
        }
        out.update(f)
        return out

    def _user_json(self, user: User) -> dict[str, Any]:
        uid = self._user_ids.setdefault(user.login, 5000 + len(self._user_ids))
        return {
            "login": user.login,
            "id": uid,
            "node_id": f"U_{uid}",
            "type": user.type,
            "site_admin": False,
            "url": f"{self.api_url}/users/{user.login}",
            "html_url": f"https://github.com/{user.login}",
        }

    def _repo_json(self, r: Repo) -> dict[str, Any]:
        owner = r.full_name.split("/")[0]
        return {
            "id": r.id,
            "node_id": f"R_{r.id}",
            "name": r.full_name.split("/")[1],
            "full_name": r.full_name,
            "private": r.private,
            "owner": self._user_json(User(owner, "Organization")),
            "html_url": f"https://github.com/{r.full_name}",
            "url": f"{self.api_url}/repos/{r.full_name}",
            "default_branch": r.default_branch,
            "fork": False,
            "license": (
                {"key": r.license.lower(), "spdx_id": r.license, "name": r.license}
                if r.license
                else None
            ),
        }

    def _label_json(self, repo: str, name: str) -> dict[str, Any]:
        lid = int(sha1_hex(repo, name)[:8], 16)
        return {
            "id": lid,
            "node_id": f"LA_{lid}",
            "name": name,
            "color": "ededed",
            "default": False,
            "description": None,
            "url": f"{self.api_url}/repos/{repo}/labels/{name}",
        }

    def _issue_json(self, i: Issue) -> dict[str, Any]:
        base = f"{self.api_url}/repos/{i.repo}"
        out: dict[str, Any] = {
            "id": i.id,
            "node_id": f"I_{i.id}",
            "url": f"{base}/issues/{i.number}",
            "repository_url": base,
            "html_url": f"https://github.com/{i.repo}/{'pull' if i.is_pr else 'issues'}/{i.number}",
            "number": i.number,
            "title": i.title,
            "body": i.body,
            "user": self._user_json(i.user),
            "labels": [self._label_json(i.repo, n) for n in i.labels],
            "state": i.state,
            "locked": i.locked,
            "comments": sum(
                1
                for c in self._comments.values()
                if c.repo == i.repo and c.issue_number == i.number
            ),
            "created_at": i.created_at,
            "updated_at": i.updated_at,
            "closed_at": None,
            "author_association": "OWNER",
        }
        if i.is_pr:
            out["pull_request"] = {
                "url": f"{base}/pulls/{i.number}",
                "html_url": f"https://github.com/{i.repo}/pull/{i.number}",
                "diff_url": f"https://github.com/{i.repo}/pull/{i.number}.diff",
                "patch_url": f"https://github.com/{i.repo}/pull/{i.number}.patch",
                "merged_at": None,
            }
        return out

    def _pull_json(self, i: Issue) -> dict[str, Any]:
        r = self._repo(i.repo)
        assert i.head_ref is not None and i.base_ref is not None
        owner = i.repo.split("/")[0]
        return {
            "id": i.id,
            "node_id": f"PR_{i.id}",
            "url": f"{self.api_url}/repos/{i.repo}/pulls/{i.number}",
            "html_url": f"https://github.com/{i.repo}/pull/{i.number}",
            "number": i.number,
            "state": i.state,
            "title": i.title,
            "body": i.body,
            "user": self._user_json(i.user),
            "labels": [self._label_json(i.repo, n) for n in i.labels],
            "draft": False,
            "merged": i.merged_at is not None,
            "merged_at": i.merged_at,
            "closed_at": i.merged_at,
            "head": {
                "label": f"{owner}:{i.head_ref}",
                "ref": i.head_ref,
                "sha": r.branches[i.head_ref],
                "repo": self._repo_json(r),
            },
            "base": {
                "label": f"{owner}:{i.base_ref}",
                "ref": i.base_ref,
                "sha": r.branches.get(i.base_ref, ""),
                "repo": self._repo_json(r),
            },
            "created_at": i.created_at,
            "updated_at": i.updated_at,
        }

    def _check_app_jwt(self, request: Request) -> None:
        """Authenticate the app itself: an RS256 JWT signed with the app's key."""
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not credential:
            raise ApiError(401, "A JSON web token could not be decoded")
        try:
            claims = jwt.decode(
                credential.strip(),
                self._public_key,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"], "verify_iss": False},
            )
        except jwt.ExpiredSignatureError:
            raise ApiError(
                401,
                "'Expiration time' claim ('exp') must be a numeric value "
                "representing the future time at which the assertion "
                "expires",
            ) from None
        except jwt.PyJWTError:
            raise ApiError(401, "A JSON web token could not be decoded") from None
        if str(claims["iss"]) != str(self.app_id):
            raise ApiError(401, "Integration not found")
        if int(claims["exp"]) - int(claims["iat"]) > 600:
            raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future")

    def _comment_json(self, c: Comment) -> dict[str, Any]:
        return {
            "id": c.id,
            "node_id": f"IC_{c.id}",
            "url": f"{self.api_url}/repos/{c.repo}/issues/comments/{c.id}",
            "html_url": f"https://github.com/{c.repo}/issues/{c.issue_number}#issuecomment-{c.id}",
            "issue_url": f"{self.api_url}/repos/{c.repo}/issues/{c.issue_number}",
            "body": c.body,
            "user": self._user_json(c.user),
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "author_association": "NONE" if c.user.type == "Bot" else "OWNER",
        }

    def _review_comment_json(self, c: ReviewComment) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": c.id,
            "node_id": f"PRRC_{c.id}",
            "url": f"{self.api_url}/repos/{c.repo}/pulls/comments/{c.id}",
            "html_url": f"https://github.com/{c.repo}/pull/{c.pull_number}#discussion_r{c.id}",
            "pull_request_url": f"{self.api_url}/repos/{c.repo}/pulls/{c.pull_number}",
            "pull_request_review_id": c.id + 1,
            "diff_hunk": c.diff_hunk,
            "path": c.path,
            "position": c.line,
            "original_position": c.original_line,
            "line": c.line,
            "original_line": c.original_line,
            "side": "RIGHT",
            "commit_id": c.commit_id,
            "original_commit_id": c.original_commit_id,
            "user": self._user_json(c.user),
            "body": c.body,
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "author_association": c.author_association,
        }
        if c.in_reply_to_id is not None:
            out["in_reply_to_id"] = c.in_reply_to_id
        return out

    def _reaction(
        self, repo: str, subject: str, sid: int, payload: Any
    ) -> tuple[int, dict[str, Any]]:
        content = payload.get("content") if isinstance(payload, dict) else None
        if content not in REACTIONS:
            raise ApiError(
                422,
                "Validation Failed",
                errors=[{"resource": "Reaction", "code": "invalid", "field": "content"}],
            )
        for r in self._reactions:
            if (r.repo, r.subject, r.subject_id, r.content, r.user.login) == (
                repo,
                subject,
                sid,
                content,
                self.bot_login,
            ):
                return 200, self._reaction_json(r)
        new = Reaction(next(self._ids), repo, subject, sid, content, User(self.bot_login, "Bot"))
        self._reactions.append(new)
        return 201, self._reaction_json(new)

    def _reaction_json(self, r: Reaction) -> dict[str, Any]:
        return {
            "id": r.id,
            "node_id": f"REA_{r.id}",
            "user": self._user_json(r.user),
            "content": r.content,
            "created_at": r.created_at,
        }

    # -- internals: auth, paging, faults -----------------------------------

    def _installation_for(self, request: Request) -> int:
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() not in ("token", "bearer") or not credential:
            raise ApiError(401, "Requires authentication")
        entry = self._tokens.get(credential.strip())
        if entry is None or entry[1] <= time.time():
            raise ApiError(401, "Bad credentials")
        return entry[0]

    def _authorized_repo(self, request: Request, owner: str, name: str) -> Repo:
        installation = self._installation_for(request)
        r = self._repos.get(f"{owner}/{name}")
        # GitHub answers 404, not 403, for repositories the installation cannot see.
        if r is None or r.installation_id != installation:
            raise not_found()
        return r

    def _issue(self, r: Repo, number: int) -> Issue:
        issue = self._issues.get((r.full_name, number))
        if issue is None or issue.gone == "transferred":
            raise not_found()
        if issue.gone == "deleted":
            raise ApiError(
                410,
                "This issue was deleted",
                documentation_url=f"{DOCS}/issues/issues#get-an-issue",
            )
        return issue

    def _issue_comment(self, r: Repo, comment_id: int) -> Comment:
        """A comment by id; a comment of a deleted or transferred issue is not here."""
        c = self._comments.get(comment_id)
        issue = None if c is None else self._issues.get((c.repo, c.issue_number))
        if c is None or c.repo != r.full_name or (issue is not None and issue.gone):
            raise not_found()
        return c

    def _unless_locked(self, issue: Issue | None, verb: str) -> None:
        if issue is not None and issue.locked:
            raise ApiError(
                403,
                f"Unable to {verb} comment because issue is locked.",
                documentation_url=LOCKED_DOCS,
            )

    def _page(self, request: Request, items: list[Any]) -> JSONResponse:
        try:
            per_page = min(100, max(1, int(request.query_params.get("per_page", 30))))
            page = max(1, int(request.query_params.get("page", 1)))
        except ValueError:
            raise ApiError(400, "Invalid pagination parameters") from None
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        url = str(request.url).split("?")[0]
        query = dict(parse_qsl(request.url.query))

        def link(p: int, rel: str) -> str:
            return f'<{url}?{urlencode({**query, "per_page": per_page, "page": p})}>; rel="{rel}"'

        links = []
        if page > 1:
            links += [link(page - 1, "prev"), link(1, "first")]
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        headers = {"Link": ", ".join(links)} if links else {}
        return JSONResponse(chunk, headers=headers)

    def token_installation(self, authorization: str) -> int | None:
        """The installation a token was issued to (revoked or expired ones too)."""
        scheme, _, credential = authorization.partition(" ")
        if scheme.lower() != "token":
            return None
        entry = self._tokens.get(credential.strip())
        return None if entry is None else entry[0]

    def _limit_gate(self, request: Request, route: str) -> None:
        installation = self.token_installation(request.headers.get("authorization", ""))
        with self._lock:
            now = self.clock()
            window = next(
                (w for w in self.limits if w.refuses(installation, request.method, route, now)),
                None,
            )
            if window is None or window.ends_at is None or installation is None:
                return
            self._limited[installation] += 1
        wait = max(1, math.ceil(window.ends_at - now))
        if window.kind == "primary":
            raise ApiError(
                403,
                PRIMARY_MESSAGE.format(installation=installation),
                headers={
                    "x-ratelimit-limit": str(self.rate_limit),
                    "x-ratelimit-remaining": "0",
                    "x-ratelimit-used": str(self.rate_limit),
                    "x-ratelimit-reset": str(int(window.ends_at)),
                    "x-ratelimit-resource": "core",
                },
                documentation_url=f"{DOCS}/overview/rate-limits-for-the-rest-api",
            )
        raise ApiError(
            429 if window.kind == "secondary429" else 403,
            SECONDARY_MESSAGE,
            headers={"Retry-After": str(wait)} if window.retry_after else {},
            documentation_url=SECONDARY_DOCS,
        )

    def _content_gate(self, request: Request, route: str) -> None:
        """GitHub's content-creation limits: admit and count the request, or refuse it."""
        if not self.content_limits or request.method not in CONTENT_METHODS:
            return
        if route == "/graphql":
            return
        _, _, credential = request.headers.get("authorization", "").partition(" ")
        with self._lock:
            entry = self._tokens.get(credential.strip())
            if entry is None or entry[1] <= time.time():
                return  # an app JWT, or a token the route will answer 401 to
            installation = entry[0]
            now = self.clock()
            times = self._content_writes.setdefault(installation, deque())
            longest = max(span for span, _ in CONTENT_LIMITS)
            while times and times[0] <= now - longest:
                times.popleft()
            wait: float | None = None
            for span, limit in CONTENT_LIMITS:
                inside = [t for t in times if t > now - span]
                if len(inside) >= limit:
                    # Free once enough of the window's oldest requests have aged out.
                    frees = inside[len(inside) - limit] + span - now
                    wait = frees if wait is None else max(wait, frees)
            if wait is None:
                times.append(now)
                return
            self._content_limited[installation] += 1
        raise ApiError(
            403,
            SECONDARY_MESSAGE,
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
            documentation_url=SECONDARY_DOCS,
        )

    async def _fault_gate(self, request: Request) -> None:
        route = _template(request.scope, self.api_prefix)
        self._limit_gate(request, route)
        # Before the injected faults: a refused request must not use up a script entry.
        self._content_gate(request, route)
        with self._lock:
            kind = None if self.faults is None else self.faults.pick(request.method, route)
        if kind is None:
            return
        retry_after = self.faults.retry_after if self.faults is not None else 1
        if kind == "lost502":
            # The request takes effect, but the client sees a 502 (a proxy timed
            # out on the way back): what makes blind retries of a POST duplicate.
            request.scope.setdefault("state", {})["lose_response"] = True
            return
        if kind in ("secondary", "secondary429"):
            raise ApiError(
                403 if kind == "secondary" else 429,
                SECONDARY_MESSAGE,
                headers={"Retry-After": str(retry_after)},
                documentation_url=SECONDARY_DOCS,
            )
        if kind == "primary":
            raise ApiError(
                403,
                "API rate limit exceeded for installation.",
                headers={
                    "x-ratelimit-remaining": "0",
                    "x-ratelimit-reset": str(int(time.time()) + retry_after),
                },
            )
        status = int(kind)
        raise ApiError(status, {500: "Server Error", 502: "Bad Gateway"}.get(status, "Unavailable"))

    # -- the app -----------------------------------------------------------

    def _build_app(self) -> FastAPI:
        app = FastAPI(
            dependencies=[Depends(self._fault_gate)],
            openapi_url=None,
            docs_url=None,
            redoc_url=None,
        )
        P = self.api_prefix
        lock = self._lock

        @app.exception_handler(ApiError)
        async def api_error(_: Request, exc: ApiError) -> JSONResponse:
            return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)

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

        # -- apps ----------------------------------------------------------

        @app.get(P + "/app")
        async def get_app(request: Request) -> JSONResponse:
            self._check_app_jwt(request)
            return JSONResponse(
                {
                    "id": self.app_id,
                    "slug": self.app_slug,
                    "name": self.app_slug,
                    "permissions": self.app_permissions,
                    "events": self.app_events,
                }
            )

        # -- the manifest flow (github.com pages, then the REST conversion) ----

        @app.post("/settings/apps/new")
        @app.post("/organizations/{org}/settings/apps/new")
        async def new_app_from_manifest(request: Request) -> Response:
            form = parse_qs((await request.body()).decode())
            manifest = json.loads(form["manifest"][0])
            code = secrets.token_hex(10)
            with lock:
                self._manifest_codes[code] = manifest
            query = urlencode({"code": code, "state": request.query_params.get("state", "")})
            return Response(
                status_code=302, headers={"location": f"{manifest['redirect_url']}?{query}"}
            )

        @app.post(P + "/app-manifests/{code}/conversions")
        async def convert_manifest(code: str) -> JSONResponse:
            with lock:
                manifest = self._manifest_codes.pop(code, None)
            if manifest is None or self.manifest_private_key is None:
                raise not_found()
            self.app_permissions = dict(manifest.get("default_permissions") or {})
            self.app_events = list(manifest.get("default_events") or [])
            self.manifests.append(manifest)
            return JSONResponse(
                {
                    "id": self.app_id,
                    "slug": self.app_slug,
                    "name": manifest.get("name"),
                    "html_url": f"{self.url}/apps/{self.app_slug}",
                    "pem": self.manifest_private_key,
                    "webhook_secret": self.manifest_webhook_secret,
                    "client_id": "Iv1.fake",
                    "client_secret": "fake-client-secret",
                    "permissions": self.app_permissions,
                    "events": self.app_events,
                },
                status_code=201,
            )

        @app.get(P + "/app/installations")
        async def list_installations(request: Request) -> JSONResponse:
            self._check_app_jwt(request)
            with lock:
                ids = sorted(self._installations)
            return self._page(
                request,
                [
                    {
                        "id": i,
                        "app_id": self.app_id,
                        "app_slug": self.app_slug,
                        "permissions": self._permissions_of(i),
                        "events": self.app_events,
                    }
                    for i in ids
                ],
            )

        @app.get(P + "/repos/{owner}/{repo}/installation")
        async def repo_installation(owner: str, repo: str, request: Request) -> JSONResponse:
            """The app's installation on a repository (app JWT); 404 when not installed."""
            self._check_app_jwt(request)
            with lock:
                r = self._repos.get(f"{owner}/{repo}")
                if r is None:
                    raise not_found()
                return JSONResponse(
                    {
                        "id": r.installation_id,
                        "app_id": self.app_id,
                        "app_slug": self.app_slug,
                        "permissions": self._permissions_of(r.installation_id),
                        "events": self.app_events,
                    }
                )

        @app.post(P + "/app/installations/{installation_id:int}/access_tokens")
        async def create_token(installation_id: int, request: Request) -> JSONResponse:
            self._check_app_jwt(request)
            with lock:
                if installation_id not in self._installations:
                    raise not_found()
                token = "ghs_" + secrets.token_hex(18)
                expires = time.time() + self.token_ttl_s
                self._tokens[token] = (installation_id, expires)
            expires_at = datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return JSONResponse(
                {
                    "token": token,
                    "expires_at": expires_at,
                    "permissions": self._permissions_of(installation_id),
                    "repository_selection": "all",
                },
                status_code=201,
            )

        # -- the app's webhook deliveries ----------------------------------

        @app.get(P + "/app/hook/deliveries")
        async def list_hook_deliveries(request: Request) -> JSONResponse:
            """Newest first; ``cursor`` (from the ``Link`` header) names a page's first attempt."""
            self._check_app_jwt(request)
            try:
                per_page = min(100, max(1, int(request.query_params.get("per_page", 30))))
            except ValueError:
                raise ApiError(400, "Invalid pagination parameters") from None
            cursor = request.query_params.get("cursor")
            with lock:
                items = sorted(self.hook_deliveries, key=lambda d: d.id, reverse=True)
            if cursor is not None:
                if (m := re.fullmatch(r"v1_(\d+)", cursor)) is None:
                    raise ApiError(400, "Invalid cursor")
                items = [d for d in items if d.id <= int(m.group(1))]
            page, rest = items[:per_page], items[per_page:]
            headers = {}
            if rest:
                query = urlencode({"per_page": per_page, "cursor": f"v1_{rest[0].id}"})
                next_url = f"{str(request.url).split('?')[0]}?{query}"
                headers["Link"] = f'<{next_url}>; rel="next"'
            return JSONResponse([d.json() for d in page], headers=headers)

        @app.post(P + "/app/hook/deliveries/{delivery_id:int}/attempts")
        async def redeliver_hook_delivery(delivery_id: int, request: Request) -> JSONResponse:
            """Sends the attempt's event again (same guid) before answering 202, so a
            test sees the new attempt as soon as the bot has its answer."""
            self._check_app_jwt(request)
            with lock:
                attempt = next((d for d in self.hook_deliveries if d.id == delivery_id), None)
            if attempt is None:
                raise not_found()
            if datetime.now(UTC) - attempt.delivered_at > self.redelivery_max_age:
                raise ApiError(
                    422,
                    "Validation Failed",
                    errors=[{"resource": "HookDelivery", "code": "invalid", "field": "id"}],
                )
            await anyio.to_thread.run_sync(lambda: self._send_hook(attempt, redelivery=True))
            return JSONResponse({}, status_code=202)

        # -- repos ---------------------------------------------------------

        @app.get(P + "/repos/{owner}/{repo}")
        async def get_repo(owner: str, repo: str, request: Request) -> JSONResponse:
            with lock:
                return JSONResponse(self._repo_json(self._authorized_repo(request, owner, repo)))

        @app.get(P + "/repos/{owner}/{repo}/collaborators/{username}/permission")
        async def get_permission(
            owner: str, repo: str, username: str, request: Request
        ) -> JSONResponse:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                perm = r.permissions.get(username)
                if perm is None:
                    raise not_found()
                user = self._user_json(User(username))
                user["permissions"] = {
                    f: f in PERMISSION_FLAGS[perm]
                    for f in ("admin", "maintain", "push", "triage", "pull")
                }
                user["role_name"] = perm
                return JSONResponse(
                    {"permission": LEGACY_PERMISSION[perm], "role_name": perm, "user": user}
                )

        @app.get(P + "/repos/{owner}/{repo}/contents/{path:path}")
        async def get_content(owner: str, repo: str, path: str, request: Request) -> Response:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                ref = request.query_params.get("ref") or r.default_branch
                tree = self._tree(r, ref)
                if tree is None:
                    raise ApiError(404, f"No commit found for the ref {ref}")
                path = path.strip("/")
                data = tree.get(path)
                if data is None:
                    prefix = path + "/" if path else ""
                    entries = sorted(
                        {p[len(prefix) :].split("/")[0] for p in tree if p.startswith(prefix)}
                    )
                    if not entries:
                        raise not_found()
                    return JSONResponse(
                        [
                            {
                                "type": "file" if (prefix + e) in tree else "dir",
                                "name": e,
                                "path": prefix + e,
                                "sha": blob_sha(tree.get(prefix + e, b"")),
                                "size": len(tree.get(prefix + e, b"")),
                            }
                            for e in entries
                        ]
                    )
            if "application/vnd.github.raw" in request.headers.get("accept", ""):
                return Response(data, media_type="application/vnd.github.raw")
            big = len(data) > 1024 * 1024
            encoded = base64.encodebytes(data).decode() if not big else ""
            return JSONResponse(
                {
                    "type": "file",
                    "encoding": "none" if big else "base64",
                    "size": len(data),
                    "name": path.rsplit("/", 1)[-1],
                    "path": path,
                    "content": encoded,
                    "sha": blob_sha(data),
                    "url": f"{self.api_url}/repos/{owner}/{repo}/contents/{path}?ref={ref}",
                    "html_url": f"https://github.com/{owner}/{repo}/blob/{ref}/{path}",
                    "download_url": None,
                }
            )

        @app.get(P + "/installation/repositories")
        async def installation_repositories(request: Request) -> Response:
            with lock:
                installation = self._installation_for(request)
                repos = [
                    self._repo_json(r)
                    for r in sorted(self._repos.values(), key=lambda r: r.id)
                    if r.installation_id == installation
                ]
            page = self._page(request, repos)
            # This endpoint wraps its page in an object, unlike most list endpoints.
            body = {"total_count": len(repos), "repositories": json.loads(bytes(page.body))}
            return JSONResponse(
                body, headers={k: v for k, v in page.headers.items() if k == "link"}
            )

        @app.get(P + "/repos/{owner}/{repo}/git/trees/{tree_sha}")
        async def get_tree(owner: str, repo: str, tree_sha: str, request: Request) -> Response:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                tree = self._tree(r, tree_sha)
                if tree is None:
                    raise not_found()
                if not tree:
                    raise ApiError(409, "Git Repository is empty.")
                recursive = request.query_params.get("recursive") not in (None, "", "0", "false")
                entries = _tree_entries(tree, recursive, self.modes.get(r.full_name))
                limit = self.tree_limit
            base = f"{self.api_url}/repos/{owner}/{repo}/git"
            return JSONResponse(
                {
                    "sha": sha1_hex("tree", owner, repo, tree_sha),
                    "url": f"{base}/trees/{tree_sha}",
                    "tree": [
                        {
                            **e,
                            "url": f"{base}/{'blobs' if e['type'] == 'blob' else 'trees'}/"
                            f"{e['sha']}",
                        }
                        for e in entries[:limit]
                    ],
                    "truncated": len(entries) > limit,
                }
            )

        @app.put(P + "/repos/{owner}/{repo}/contents/{path:path}")
        async def put_content(owner: str, repo: str, path: str, request: Request) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                self._require(r, "contents")
                if not isinstance(payload, dict) or not payload.get("message"):
                    raise missing_field("Commit", "message")
                try:
                    data = base64.b64decode(str(payload.get("content", "")), validate=True)
                except ValueError:
                    raise ApiError(422, "content is not valid Base64") from None
                branch = payload.get("branch") or r.default_branch
                if branch not in r.branches:
                    raise ApiError(404, f"Branch {branch} not found")
                path = path.strip("/")
                existing = r.commits[r.branches[branch]].get(path)
                if existing is not None:
                    if "sha" not in payload:
                        raise ApiError(422, 'Invalid request.\n\n"sha" wasn\'t supplied.')
                    if payload["sha"] != blob_sha(existing):
                        raise ApiError(409, f"{path} does not match {payload['sha']}")
                commit = self._commit(r, branch, {path: data})
                return JSONResponse(
                    {
                        "content": {
                            "name": path.rsplit("/", 1)[-1],
                            "path": path,
                            "sha": blob_sha(data),
                            "size": len(data),
                            "type": "file",
                        },
                        "commit": {"sha": commit, "message": payload["message"]},
                    },
                    status_code=200 if existing is not None else 201,
                )

        @app.get(P + "/repos/{owner}/{repo}/git/ref/{ref:path}")
        async def get_ref(owner: str, repo: str, ref: str, request: Request) -> JSONResponse:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                if not r.branches:  # before the first push (see make_empty)
                    raise ApiError(409, "Git Repository is empty.")
                branch = ref.removeprefix("heads/")
                if not ref.startswith("heads/") or branch not in r.branches:
                    raise not_found()
                sha = r.branches[branch]
                return JSONResponse(
                    {
                        "ref": f"refs/{ref}",
                        "node_id": f"REF_{sha[:8]}",
                        "url": f"{self.api_url}/repos/{owner}/{repo}/git/refs/{ref}",
                        "object": {"type": "commit", "sha": sha},
                    }
                )

        @app.post(P + "/repos/{owner}/{repo}/git/refs")
        async def create_ref(owner: str, repo: str, request: Request) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                self._require(r, "contents")
                ref = payload.get("ref") if isinstance(payload, dict) else None
                sha = payload.get("sha") if isinstance(payload, dict) else None
                if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2:
                    raise ApiError(422, f"{ref} is not a valid ref name.")
                if not isinstance(sha, str) or sha not in r.commits:
                    raise ApiError(422, "Object does not exist")
                branch = ref.removeprefix("refs/heads/")
                if branch in r.branches:
                    raise ApiError(422, "Reference already exists")
                r.branches[branch] = sha
                return JSONResponse(
                    {
                        "ref": ref,
                        "node_id": f"REF_{sha[:8]}",
                        "url": f"{self.api_url}/repos/{owner}/{repo}/git/{ref}",
                        "object": {"type": "commit", "sha": sha},
                    },
                    status_code=201,
                )

        # -- issues --------------------------------------------------------

        @app.post(P + "/repos/{owner}/{repo}/issues")
        async def create_issue(owner: str, repo: str, request: Request) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                title = payload.get("title") if isinstance(payload, dict) else None
                if not title:
                    raise missing_field("Issue", "title")
                body = body_text(payload, "Issue", required=False)
                labels = [
                    x if isinstance(x, str) else str(x.get("name"))
                    for x in payload.get("labels") or []
                ]
                n = self._new_issue(
                    r.full_name, str(title), body, User(self.bot_login, "Bot"), labels, None
                )
                return JSONResponse(
                    self._issue_json(self._issues[(r.full_name, n)]), status_code=201
                )

        @app.get(P + "/repos/{owner}/{repo}/issues")
        async def list_issues(owner: str, repo: str, request: Request) -> JSONResponse:
            q = request.query_params
            with lock:
                r = self._authorized_repo(request, owner, repo)
                found = [
                    i for (name, _), i in self._issues.items() if name == r.full_name and not i.gone
                ]
                if q.get("creator"):
                    found = [i for i in found if i.user.login == q["creator"]]
                if q.get("state", "open") != "all":
                    found = [i for i in found if i.state == q.get("state", "open")]
                found.sort(key=lambda i: i.number, reverse=q.get("direction", "desc") == "desc")
                items = [self._issue_json(i) for i in found]
            return self._page(request, items)

        @app.get(P + "/repos/{owner}/{repo}/issues/{issue_number:int}")
        async def get_issue(
            owner: str, repo: str, issue_number: int, request: Request
        ) -> JSONResponse:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                return JSONResponse(self._issue_json(self._issue(r, issue_number)))

        @app.get(P + "/repos/{owner}/{repo}/issues/{issue_number:int}/comments")
        async def list_comments(
            owner: str, repo: str, issue_number: int, request: Request
        ) -> JSONResponse:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                self._issue(r, issue_number)
                items = [
                    self._comment_json(c)
                    for c in sorted(self._comments.values(), key=lambda c: c.id)
                    if c.repo == r.full_name and c.issue_number == issue_number
                ]
            return self._page(request, items)

        @app.post(P + "/repos/{owner}/{repo}/issues/{issue_number:int}/comments")
        async def create_comment(
            owner: str, repo: str, issue_number: int, request: Request
        ) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                self._unless_locked(self._issue(r, issue_number), "create")
                body = body_text(payload, "IssueComment")
                assert body is not None
                c = Comment(
                    next(self._ids), r.full_name, issue_number, body, User(self.bot_login, "Bot")
                )
                self._comments[c.id] = c
                return JSONResponse(self._comment_json(c), status_code=201)

        @app.get(P + "/repos/{owner}/{repo}/issues/comments/{comment_id:int}")
        async def get_comment(
            owner: str, repo: str, comment_id: int, request: Request
        ) -> JSONResponse:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                c = self._issue_comment(r, comment_id)
                return JSONResponse(self._comment_json(c))

        @app.patch(P + "/repos/{owner}/{repo}/issues/comments/{comment_id:int}")
        async def update_comment(
            owner: str, repo: str, comment_id: int, request: Request
        ) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                c = self._issue_comment(r, comment_id)
                self._unless_locked(self._issues.get((c.repo, c.issue_number)), "update")
                body = body_text(payload, "IssueComment")
                assert body is not None
                c.body = body
                c.updated_at = now_iso()
                return JSONResponse(self._comment_json(c))

        @app.post(P + "/repos/{owner}/{repo}/issues/comments/{comment_id:int}/reactions")
        async def react_comment(
            owner: str, repo: str, comment_id: int, request: Request
        ) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                self._issue_comment(r, comment_id)
                status, out = self._reaction(r.full_name, "issue_comment", comment_id, payload)
                return JSONResponse(out, status_code=status)

        @app.post(P + "/repos/{owner}/{repo}/issues/{issue_number:int}/reactions")
        async def react_issue(
            owner: str, repo: str, issue_number: int, request: Request
        ) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                self._issue(r, issue_number)
                status, out = self._reaction(r.full_name, "issue", issue_number, payload)
                return JSONResponse(out, status_code=status)

        @app.post(P + "/repos/{owner}/{repo}/issues/{issue_number:int}/labels")
        async def add_labels(
            owner: str, repo: str, issue_number: int, request: Request
        ) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                issue = self._issue(r, issue_number)
                raw = payload.get("labels") if isinstance(payload, dict) else payload
                if not isinstance(raw, list):
                    raise ApiError(
                        422, "Invalid request.\n\nFor 'links/0/schema', nil is not an array."
                    )
                names = [x if isinstance(x, str) else str(x.get("name")) for x in raw]
                for name in names:
                    r.labels.add(name)
                    if name not in issue.labels:
                        issue.labels.append(name)
                return JSONResponse([self._label_json(r.full_name, n) for n in issue.labels])

        @app.delete(P + "/repos/{owner}/{repo}/issues/{issue_number:int}/labels/{name}")
        async def remove_label(
            owner: str, repo: str, issue_number: int, name: str, request: Request
        ) -> JSONResponse:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                issue = self._issue(r, issue_number)
                if name not in issue.labels:
                    raise ApiError(404, "Label does not exist")
                issue.labels.remove(name)
                return JSONResponse([self._label_json(r.full_name, n) for n in issue.labels])

        # -- pulls ---------------------------------------------------------

        def pull(r: Repo, number: int) -> Issue:
            issue = self._issue(r, number)
            if not issue.is_pr:
                raise not_found()
            return issue

        @app.post(P + "/repos/{owner}/{repo}/pulls")
        async def create_pull(owner: str, repo: str, request: Request) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                self._require(r, "pull_requests")
                if not isinstance(payload, dict):
                    raise missing_field("PullRequest", "head")
                head = str(payload.get("head") or "").split(":")[-1]
                base = str(payload.get("base") or "")
                for fname, value in (("head", head), ("base", base)):
                    if value not in r.branches:
                        raise ApiError(
                            422,
                            "Validation Failed",
                            errors=[{"resource": "PullRequest", "code": "invalid", "field": fname}],
                        )
                if not payload.get("title"):
                    raise missing_field("PullRequest", "title")
                body = body_text(payload, "PullRequest", required=False)
                for other in self._issues.values():
                    if (
                        other.repo == r.full_name
                        and other.is_pr
                        and other.head_ref == head
                        and other.state == "open"
                    ):
                        raise ApiError(
                            422,
                            "Validation Failed",
                            errors=[
                                {
                                    "resource": "PullRequest",
                                    "code": "custom",
                                    "message": f"A pull request already exists for {owner}:{head}.",
                                }
                            ],
                        )
                n = self._new_issue(
                    r.full_name, str(payload["title"]), body, User(self.bot_login, "Bot"), [], None
                )
                issue = self._issues[(r.full_name, n)]
                issue.is_pr, issue.head_ref, issue.base_ref = True, head, base
                return JSONResponse(self._pull_json(issue), status_code=201)

        @app.get(P + "/repos/{owner}/{repo}/pulls")
        async def list_pulls(owner: str, repo: str, request: Request) -> JSONResponse:
            """``state`` (open, closed, all), ``sort`` (created, updated), ``direction``."""
            q = request.query_params
            with lock:
                r = self._authorized_repo(request, owner, repo)
                found = [
                    i
                    for (name, _), i in self._issues.items()
                    if name == r.full_name and i.is_pr and not i.gone
                ]
                if q.get("state", "open") != "all":
                    found = [i for i in found if i.state == q.get("state", "open")]
                key = "updated_at" if q.get("sort") == "updated" else "created_at"
                desc = q.get("direction", "desc") == "desc"
                found.sort(key=lambda i: (getattr(i, key), i.number), reverse=desc)
                items = [self._pull_json(i) for i in found]
            return self._page(request, items)

        @app.get(P + "/repos/{owner}/{repo}/pulls/{pull_number:int}")
        async def get_pull(
            owner: str, repo: str, pull_number: int, request: Request
        ) -> JSONResponse:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                return JSONResponse(self._pull_json(pull(r, pull_number)))

        @app.get(P + "/repos/{owner}/{repo}/pulls/{pull_number:int}/files")
        async def pull_files(
            owner: str, repo: str, pull_number: int, request: Request
        ) -> JSONResponse:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                items = list(pull(r, pull_number).pull_files)
            return self._page(request, items)

        @app.get(P + "/repos/{owner}/{repo}/pulls/{pull_number:int}/comments")
        async def list_review_comments(
            owner: str, repo: str, pull_number: int, request: Request
        ) -> JSONResponse:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                pull(r, pull_number)
                items = self.review_comments(r.full_name, pull_number)
            return self._page(request, items)

        def review_comment(r: Repo, comment_id: int) -> ReviewComment:
            c = self._review_comments.get(comment_id)
            if c is None or c.repo != r.full_name:
                raise not_found()
            return c

        @app.get(P + "/repos/{owner}/{repo}/pulls/comments/{comment_id:int}")
        async def get_review_comment(
            owner: str, repo: str, comment_id: int, request: Request
        ) -> JSONResponse:
            with lock:
                r = self._authorized_repo(request, owner, repo)
                return JSONResponse(self._review_comment_json(review_comment(r, comment_id)))

        @app.patch(P + "/repos/{owner}/{repo}/pulls/comments/{comment_id:int}")
        async def update_review_comment(
            owner: str, repo: str, comment_id: int, request: Request
        ) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                c = review_comment(r, comment_id)
                body = body_text(payload, "PullRequestReviewComment")
                assert body is not None
                c.body, c.updated_at = body, now_iso()
                return JSONResponse(self._review_comment_json(c))

        @app.post(P + "/repos/{owner}/{repo}/pulls/comments/{comment_id:int}/reactions")
        async def react_review_comment(
            owner: str, repo: str, comment_id: int, request: Request
        ) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                review_comment(r, comment_id)
                status, out = self._reaction(r.full_name, "review_comment", comment_id, payload)
                return JSONResponse(out, status_code=status)

        @app.post(
            P + "/repos/{owner}/{repo}/pulls/{pull_number:int}/comments/{comment_id:int}/replies"
        )
        async def reply_review_comment(
            owner: str, repo: str, pull_number: int, comment_id: int, request: Request
        ) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                r = self._authorized_repo(request, owner, repo)
                pull(r, pull_number)
                parent = review_comment(r, comment_id)
                if parent.pull_number != pull_number:
                    raise not_found()
                body = body_text(payload, "PullRequestReviewComment")
                assert body is not None
                cid = self._new_review_comment(
                    r.full_name,
                    pull_number,
                    body=body,
                    path=parent.path,
                    line=parent.line,
                    original_line=parent.original_line,
                    diff_hunk=parent.diff_hunk,
                    commit_id=parent.commit_id,
                    original_commit_id=parent.original_commit_id,
                    in_reply_to=comment_id,
                    user=User(self.bot_login, "Bot"),
                )
                return JSONResponse(
                    self._review_comment_json(self._review_comments[cid]), status_code=201
                )

        # -- graphql -------------------------------------------------------

        graphql_path = "/api/graphql" if P.endswith("/api/v3") else P + "/graphql"

        @app.post(graphql_path)
        async def graphql(request: Request) -> JSONResponse:
            payload = await body_json(request)
            with lock:
                installation = self._installation_for(request)
                query = str(payload.get("query", "")) if isinstance(payload, dict) else ""
                variables = (payload.get("variables") or {}) if isinstance(payload, dict) else {}
                if "resolveReviewThread" in query:
                    return JSONResponse(self._gql_resolve(installation, variables))
                if "reviewThreads" in query:
                    return JSONResponse(self._gql_threads(installation, query, variables))
            return JSONResponse(
                {
                    "errors": [
                        {"message": "the fake supports only reviewThreads and resolveReviewThread"}
                    ]
                }
            )

        github_archive.install(app, self)
        return app

    def _gql_threads(self, installation: int, query: str, variables: dict[str, Any]) -> Any:
        full = f"{variables.get('owner')}/{variables.get('name')}"
        r = self._repos.get(full)
        issue = None if r is None else self._issues.get((full, int(variables.get("number", 0))))
        if r is None or r.installation_id != installation or issue is None or not issue.is_pr:
            return {
                "data": {"repository": None},
                "errors": [
                    {
                        "type": "NOT_FOUND",
                        "path": ["repository"],
                        "message": f"Could not resolve to a Repository with the name '{full}'.",
                    }
                ],
            }
        m = re.search(r"reviewThreads\s*\(\s*first:\s*(\d+)", query)
        first = min(100, int(m.group(1))) if m else 100
        threads = [
            t for t in self._threads.values() if t.repo == full and t.pull_number == issue.number
        ]
        cursor = variables.get("cursor")
        start = int(base64.b64decode(cursor).decode()) if cursor else 0
        chunk = threads[start : start + first]
        end = start + len(chunk)
        return {
            "data": {
                "repository": {
                    "pullRequest": {
                        "reviewThreads": {
                            "pageInfo": {
                                "hasNextPage": end < len(threads),
                                "endCursor": base64.b64encode(str(end).encode()).decode(),
                            },
                            "nodes": [
                                {
                                    "id": t.node_id,
                                    "isResolved": t.resolved,
                                    "comments": {
                                        "nodes": [{"databaseId": c} for c in t.comment_ids]
                                    },
                                }
                                for t in chunk
                            ],
                        }
                    }
                }
            }
        }

    def _gql_resolve(self, installation: int, variables: dict[str, Any]) -> Any:
        thread_id = str(variables.get("threadId", ""))
        t = self._threads.get(thread_id)
        if t is None or self._repos[t.repo].installation_id != installation:
            return {
                "data": {"resolveReviewThread": None},
                "errors": [
                    {
                        "type": "NOT_FOUND",
                        "path": ["resolveReviewThread"],
                        "message": "Could not resolve to a node with the global id of "
                        f"'{thread_id}'",
                    }
                ],
            }
        t.resolved = True
        return {"data": {"resolveReviewThread": {"thread": {"id": t.node_id, "isResolved": True}}}}

    def _record(self, req: RecordedRequest, credential: str) -> None:
        with self._lock:
            self.requests.append(req)
            if credential:
                self.received_credentials.add(credential)

    @property
    def issued_tokens(self) -> list[str]:
        with self._lock:
            return list(self._tokens)

    def _rate_headers(self, resource: str) -> list[tuple[bytes, bytes]]:
        with self._lock:
            self.rate_limit_remaining = max(0, self.rate_limit_remaining - 1)
            remaining = self.rate_limit_remaining
        reset = int(time.time()) + 3600
        return [
            (b"x-ratelimit-limit", str(self.rate_limit).encode()),
            (b"x-ratelimit-remaining", str(remaining).encode()),
            (b"x-ratelimit-reset", str(reset).encode()),
            (b"x-ratelimit-used", str(self.rate_limit - remaining).encode()),
            (b"x-ratelimit-resource", resource.encode()),
        ]


def _template(scope: Scope, prefix: str) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None) or scope.get("path", "")
    path = re.sub(r"\{(\w+):\w+\}", r"{\1}", path)
    if path.endswith("/graphql"):
        return "/graphql"
    return path[len(prefix) :] if prefix and path.startswith(prefix) else path


class _Recorder:
    """ASGI wrapper: adds rate-limit headers and records every request.

    The record is written when the response starts, before any byte reaches the
    client, so a test that has its response can always see the request recorded.
    """

    def __init__(self, app: ASGIApp, fake: FakeGitHub) -> None:
        self.app = app
        self.fake = fake

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        received = time.monotonic()
        chunks: list[bytes] = []

        async def recv() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
            return message

        lost = b'{"message":"Bad Gateway"}'

        async def snd(message: Message) -> None:
            if scope.get("state", {}).get("lose_response"):
                if message["type"] == "http.response.start":
                    message = {
                        "type": "http.response.start",
                        "status": 502,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(lost)).encode()),
                        ],
                    }
                elif message["type"] == "http.response.body":
                    if message.get("more_body", False):
                        return  # swallow the real body
                    message = {"type": "http.response.body", "body": lost}
            if message["type"] == "http.response.start":
                self._record(scope, message["status"], b"".join(chunks), received)
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                resource = "graphql" if scope["path"].endswith("/graphql") else "core"
                headers += [h for h in self.fake._rate_headers(resource) if h[0] not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, recv, snd)

    def _record(self, scope: Scope, status: int, raw: bytes, received: float) -> None:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        authorization = dict(scope.get("headers", [])).get(b"authorization", b"").decode()
        self.fake._record(
            RecordedRequest(
                method=scope["method"],
                path=scope["path"],
                route=_template(scope, self.fake.api_prefix),
                query=dict(parse_qsl(scope.get("query_string", b"").decode())),
                json=body,
                status=status,
                installation=self.fake.token_installation(authorization),
                received=received,
                headers={
                    k.decode().lower(): v.decode()
                    for k, v in scope.get("headers", [])
                    if k.decode().lower() != "authorization"
                },
            ),
            authorization.partition(" ")[2].strip(),
        )
