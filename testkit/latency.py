"""What a latency benchmark reads off the fake GitHub's recorded requests: whose
`eyes` reaction and installation token were answered when, and the phases of a
command between its milestones (pure; benchmarks/eyes_latency.py times them,
tests/unit/test_bench_eyes_latency.py tests them)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from testkit.fakes.github_server import RecordedRequest

EYES_PATH = re.compile(r"/repos/[^/]+/[^/]+/issues/comments/(\d+)/reactions$")
TOKEN_PATH = re.compile(r"/app/installations/(\d+)/access_tokens$")


@dataclass
class Command:
    installation: int
    comment_id: int
    body: bytes
    delivery_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    accepted_at: float = 0.0  # time.monotonic() when its 202 arrived


def eyes_at(requests: Sequence[RecordedRequest]) -> dict[int, float]:
    """Comment id -> when the fake GitHub answered its first `eyes` reaction."""
    seen: dict[int, float] = {}
    for r in requests:
        m = EYES_PATH.search(r.path)
        if not (m and r.method == "POST" and 200 <= r.status < 300):
            continue
        if isinstance(r.json, dict) and r.json.get("content") == "eyes":
            seen.setdefault(int(m.group(1)), r.at)
    return seen


def first_token_at(requests: Sequence[RecordedRequest]) -> dict[int, float]:
    """Installation -> when its first installation token was answered."""
    seen: dict[int, float] = {}
    for r in requests:
        m = TOKEN_PATH.search(r.path)
        if r.method == "POST" and m and r.status == 201:
            seen.setdefault(int(m.group(1)), r.at)
    return seen


PHASES = (
    "stored → its 202 seen here",
    "stored → claimed (wake, free intake slot, claim)",
    "claimed → token answered (JWT, POST access_tokens)",
    "token → run queued (permission, config, create_run)",
    "run queued → eyes answered",
)


def phases(
    commands: Sequence[Command],
    eyes: dict[int, float],
    tokens: dict[int, float],
    stored: dict[str, float],
    claimed: dict[str, tuple[float, str]],
    queued: dict[int, float],
) -> dict[str, list[float]]:
    """Per phase, its duration (ms) for each command whose milestones are all known
    (a claim can fall between two samples and be missed)."""
    out: dict[str, list[float]] = {name: [] for name in PHASES}
    for c in commands:
        if c.delivery_id not in claimed or c.delivery_id not in stored:
            continue
        if c.installation not in tokens or c.installation not in queued:
            continue
        t0 = stored[c.delivery_id]
        marks = [
            c.accepted_at,
            claimed[c.delivery_id][0],
            tokens[c.installation],
            queued[c.installation],
            eyes[c.comment_id],
        ]
        out[PHASES[0]].append((marks[0] - t0) * 1000)
        prev = t0
        for name, at in zip(PHASES[1:], marks[1:], strict=True):
            out[name].append((at - prev) * 1000)
            prev = at
    return out
