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

One app (``_build_app``), its routes by area as the gateway (bot/github/) is split:
github_apps.py (app, manifest, installations, tokens, hook deliveries),
github_repos.py (repository, permissions, contents, trees, refs), github_issues.py
(issues, comments, reactions, labels), github_pulls.py (pulls, review comments,
GraphQL review threads), github_archive.py (tarballs, blobs); the state and error
shapes are github_model.py's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import math
import re
import secrets
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx
import jwt
import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from testkit.fakes import (
    github_apps,
    github_archive,
    github_issues,
    github_pulls,
    github_repos,
    serving,
)
from testkit.fakes.github_model import (
    CONTENT_LIMITS,
    CONTENT_METHODS,
    DOCS,
    LEGACY_PERMISSION,
    LOCKED_DOCS,
    PRIMARY_MESSAGE,
    REACTIONS,
    SECONDARY_DOCS,
    SECONDARY_MESSAGE,
    ApiError,
    Comment,
    Faults,
    HookDelivery,
    HookEvent,
    Issue,
    RateLimitWindow,
    Reaction,
    RecordedRequest,
    Repo,
    ReviewComment,
    Thread,
    User,
    blob_sha,
    not_found,
    now_iso,
    sha1_hex,
)


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
        self._server = serving.Server(config)
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

        @app.exception_handler(ApiError)
        async def api_error(_: Request, exc: ApiError) -> JSONResponse:
            return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)

        for area in (github_apps, github_repos, github_issues, github_pulls):
            area.install(app, self)
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


# What tests and benchmarks import from here (the state lives in github_model.py).
__all__ = [
    "CONTENT_LIMITS",
    "CONTENT_METHODS",
    "SECONDARY_DOCS",
    "SECONDARY_MESSAGE",
    "FakeGitHub",
    "HookDelivery",
    "RecordedRequest",
    "blob_sha",
    "not_found",
]
