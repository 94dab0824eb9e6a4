"""The eval's result cache: a local SQLite file (``DIR/cache.sqlite``).

Keyed by (case, configuration, models): the case's fingerprint (everything a
model sees, and the label) and the configuration's canonical spec, which names
its models. Every model turn is stored the moment it completes and every
finished case's result with it, so an interrupted eval resumes without paying
a finished case, or a finished turn of an unfinished debate, again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from bot.core.errors import ConfigError
from bot.engine.types import Turn
from bot.store.codec import from_json, to_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    job TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    turn TEXT NOT NULL,
    PRIMARY KEY (job, turn_id)
);
CREATE TABLE IF NOT EXISTS results (
    job TEXT PRIMARY KEY,
    case_id TEXT NOT NULL,
    config TEXT NOT NULL,
    answer TEXT,
    status TEXT NOT NULL,
    correct INTEGER,
    cost_usd REAL NOT NULL,
    tokens INTEGER NOT NULL,
    seconds REAL NOT NULL,
    detail TEXT NOT NULL
);
"""


def job_key(case_fingerprint: str, config_canonical: str) -> str:
    raw = json.dumps([case_fingerprint, config_canonical])
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class Result:
    """One case under one configuration. ``status``: ``answered`` (``correct``
    says whether right), ``escalated`` (an abstention) or ``failed`` (no usable
    answer: models dropped, the run aborted, the reply unreadable)."""

    case_id: str
    config: str
    answer: str | None
    status: str
    correct: bool | None
    cost_usd: float
    tokens: int
    seconds: float
    detail: str = ""  # why escalated or failed, in a few words


class Cache:
    def __init__(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise ConfigError(f"{path}: cannot open the eval cache ({exc})") from exc

    def turns(self, job: str) -> list[Turn]:
        rows = self._db.execute("SELECT turn FROM turns WHERE job = ? ORDER BY rowid", (job,))
        return [from_json(Turn, r[0]) for r in rows]

    def save_turn(self, job: str, turn: Turn) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO turns (job, turn_id, turn) VALUES (?, ?, ?)",
            (job, turn.key.id(), to_json(turn)),
        )

    def result(self, job: str) -> Result | None:
        row = self._db.execute(
            "SELECT case_id, config, answer, status, correct, cost_usd, tokens, seconds, detail "
            "FROM results WHERE job = ?",
            (job,),
        ).fetchone()
        if row is None:
            return None
        correct = None if row[4] is None else bool(row[4])
        return Result(row[0], row[1], row[2], row[3], correct, row[5], row[6], row[7], row[8])

    def save_result(self, job: str, r: Result) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                job,
                r.case_id,
                r.config,
                r.answer,
                r.status,
                None if r.correct is None else int(r.correct),
                r.cost_usd,
                r.tokens,
                r.seconds,
                r.detail,
            ),
        )

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
