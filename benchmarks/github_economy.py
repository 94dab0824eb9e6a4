"""GitHub economy: requests to GitHub per 3-round debate, by kind.

The real service (`debate-bot serve` as a subprocess) handles a signed
`/debate --rounds 3` comment delivery from the corpus, talking over loopback to
the fake GitHub REST server and the fake model server (the same set-up as the
end-to-end tests). The model never converges (every stance HOLD), so all three
rounds run. Every request GitHub receives from the moment the command is
delivered until the run is done is counted by method and route template.

Targets (issue 3): writes (POST/PATCH/PUT/DELETE, the installation-token POST
aside) ≤ rounds + 4, continuation comments aside; and no list call (a GET of a
collection such as …/comments or …/reviews) on the happy path.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from benchmarks._support_models import model_server, persona_responder, verdict
from benchmarks.common import print_table
from testkit.fakes.github_server import FakeGitHub, RecordedRequest
from testkit.harness.service import APP_ID, INSTALLATION, REPO, Harness, delivery, rsa_keypair

ROUNDS = 3
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
TOKEN_ROUTE = "/app/installations/{installation_id}/access_tokens"
# Route segments that name a collection: a GET ending in one of them is a listing.
COLLECTIONS = frozenset(
    {
        "comments",
        "reviews",
        "issues",
        "pulls",
        "labels",
        "reactions",
        "files",
        "commits",
        "events",
        "timeline",
        "collaborators",
        "installations",
        "repositories",
        "branches",
    }
)
_PART = re.compile(r"^<!-- debate-bot:[a-z-]+ run=\S+(?: round=\d+)? part=(\d+) -->")
_ROUND_MARKER = re.compile(r"^<!-- debate-bot:round run=\S+ round=(\d+)")


def is_write(r: RecordedRequest) -> bool:
    return r.method in WRITE_METHODS and r.route != TOKEN_ROUTE


def is_listing(method: str, route: str) -> bool:
    last = route.rstrip("/").rsplit("/", 1)[-1]
    return method == "GET" and not last.startswith("{") and last in COLLECTIONS


def is_continuation(r: RecordedRequest) -> bool:
    """A write of part 2+ of a long comment (its marker line carries ``part=k``)."""
    body = r.json.get("body") if isinstance(r.json, dict) else None
    m = _PART.match(body) if isinstance(body, str) else None
    return m is not None and int(m.group(1)) >= 2


# --- the few helpers of tests/e2e/test_service_e2e.py this needs -----------------------


def seed_issue(h: Harness) -> int:
    return h.github.add_issue(
        REPO,
        title="Should we use gRPC or REST for the public API?",
        body="We expose a public API to partners.",
        user="Codertocat",
    )


def command_payload(h: Harness, number: int, text: str) -> dict[str, object]:
    comment_id = h.github.add_comment(REPO, number, text, user="Codertocat")
    issue = h.github.issue(REPO, number)
    return delivery(
        "issue_comment.created.with-installation",
        **{
            "action": "created",
            "comment.body": text,
            "comment.id": comment_id,
            "comment.user.login": "Codertocat",
            "issue.number": number,
            "issue.title": issue["title"],
            "issue.body": issue["body"],
            "sender.login": "Codertocat",
            "sender.type": "User",
            "installation.id": INSTALLATION,
        },
    )


def runs(h: Harness) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(h.db_url.removeprefix("sqlite:///")) as db:
        return list(db.execute("select id, state, outcome_kind from runs order by created_at"))


def finished(h: Harness) -> bool:
    rows = runs(h)
    return bool(rows) and all(state in ("done", "failed", "aborted") for _, state, _ in rows)


# --- the measurement ---------------------------------------------------------------


@dataclass
class Economy:
    requests: list[RecordedRequest]
    startup_requests: int
    run_state: str
    outcome: str | None
    rounds_posted: int
    elapsed_s: float


def measure(tmp: Path, timeout_s: float) -> Economy:
    private, public = rsa_keypair()
    responder = persona_responder(never_converge=True)
    with (
        FakeGitHub(app_id=APP_ID, public_key_pem=public) as github,
        model_server(responder=responder) as models,
    ):
        github.add_repo(REPO, installation_id=INSTALLATION)
        github.set_permission(REPO, "Codertocat", "admin")
        h = Harness(tmp, github, models, private)
        try:
            h.start()
            number = seed_issue(h)
            payload = command_payload(h, number, f"/debate --rounds {ROUNDS}")
            startup = len(github.requests)
            github.reset_requests()
            t0 = time.perf_counter()
            response = h.post("issue_comment", payload)
            if response.status_code != 202:
                raise RuntimeError(f"the delivery was answered {response.status_code}")
            h.wait_for(lambda: finished(h), timeout=timeout_s, what="the run to finish")
            elapsed = time.perf_counter() - t0
            requests = list(github.requests)
            [(_, state, outcome)] = runs(h)
            rounds = {
                int(m.group(1))
                for c in github.comments(REPO, number)
                if (m := _ROUND_MARKER.match(c["body"]))
            }
        finally:
            h.stop()
    return Economy(requests, startup, state, outcome, len(rounds), elapsed)


def report(e: Economy) -> None:
    kinds: Counter[str] = Counter(r.kind for r in e.requests)
    statuses: dict[str, Counter[int]] = {}
    for r in e.requests:
        statuses.setdefault(r.kind, Counter())[r.status] += 1
    rows = []
    for kind, n in sorted(kinds.items(), key=lambda kv: (kv[0].split(" ", 1)[1], kv[0])):
        method, route = kind.split(" ", 1)
        role = (
            "token"
            if route == TOKEN_ROUTE
            else "write"
            if method in WRITE_METHODS
            else "LIST"
            if is_listing(method, route)
            else "read"
        )
        codes = ", ".join(f"{c}×{k}" for c, k in sorted(statuses[kind].items()))
        rows.append([kind, role, str(n), codes])
    print(
        f"`/debate --rounds {ROUNDS}` on an issue, model never converging; run {e.run_state} "
        f"({e.outcome}), {e.rounds_posted} round digest(s) posted, {e.elapsed_s:.1f} s "
        f"from delivery to done; {e.startup_requests} GitHub request(s) before the delivery "
        "(service start-up) not counted"
    )
    print_table(
        "GitHub requests per 3-round debate, by kind",
        ["method and route", "kind", "count", "statuses"],
        rows,
    )
    writes = [r for r in e.requests if is_write(r)]
    continuations = [r for r in writes if is_continuation(r)]
    counted = len(writes) - len(continuations)
    listings = [r for r in e.requests if is_listing(r.method, r.route)]
    reads = [r for r in e.requests if not is_write(r) and r.route != TOKEN_ROUTE]
    limit = e.rounds_posted + 4
    print(
        f"total {len(e.requests)}: {len(reads)} reads, {len(writes)} writes "
        f"({len(continuations)} continuation), "
        f"{sum(1 for r in e.requests if r.route == TOKEN_ROUTE)} installation token(s)"
    )
    ran_all = e.run_state == "done" and e.rounds_posted == ROUNDS
    print(
        f"{verdict(ran_all)}  the run finished with all {ROUNDS} rounds "
        f"(state {e.run_state}, {e.rounds_posted} round digests)"
    )
    print(
        f"{verdict(counted <= limit)}  writes {counted} ≤ rounds + 4 = {limit} "
        "(continuation comments aside)"
    )
    listed = ", ".join(sorted({r.kind for r in listings})) or "none"
    print(f"{verdict(not listings)}  no list calls on the happy path (seen: {listed})")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks github_economy")
    # Accepted for the runner; one run is both the full and the quick measurement.
    parser.add_argument("--quick", action="store_true", help="same as a full run")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the run")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-github-economy-") as tmp:
        report(measure(Path(tmp), args.timeout))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
