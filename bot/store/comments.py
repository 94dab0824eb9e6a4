"""The bot's own comments, found again by their marker."""

from __future__ import annotations

import functools
from typing import cast

import sqlalchemy as sa

from bot.core.errors import StoreError
from bot.store.base import StoreBase
from bot.store.rows import (
    CommentKind,
    CommentRecord,
)
from bot.store.schema import (
    COMMENT_KINDS,
    comments,
)

# Looked up before every comment the bot posts or edits: built once.
_COMMENT_ID = sa.select(comments.c.comment_id, comments.c.kind, comments.c.body_sha256).where(
    comments.c.run_id == sa.bindparam("c_run_id"), comments.c.marker == sa.bindparam("c_marker")
)

_RUN_COMMENTS = sa.select(
    comments.c.marker, comments.c.comment_id, comments.c.kind, comments.c.body_sha256
).where(comments.c.run_id == sa.bindparam("c_run_id"))


class CommentQueries(StoreBase):
    def comment_id(self, run_id: str, marker: str) -> CommentRecord | None:
        with self._read("comment_id") as conn:
            row = conn.execute(_COMMENT_ID, {"c_run_id": run_id, "c_marker": marker}).first()
        if row is None:
            return None
        return CommentRecord(int(row[0]), cast(CommentKind, row[1]), row[2])

    def run_comments(self, run_id: str) -> dict[str, CommentRecord]:
        """Every comment recorded for a run, by marker (a run's publisher reads
        them once, then keeps its own copy)."""
        with self._read("run_comments") as conn:
            rows = conn.execute(_RUN_COMMENTS, {"c_run_id": run_id}).all()
        return {
            row[0]: CommentRecord(int(row[1]), cast(CommentKind, row[2]), row[3]) for row in rows
        }

    def record_comment(
        self, run_id: str, marker: str, comment_id: int, kind: CommentKind, body_sha256: str
    ) -> None:
        """Remember (or update) the comment posted for ``marker`` in a run."""
        if kind not in COMMENT_KINDS:
            raise StoreError(f"unknown comment kind {kind!r}")
        values = {
            "run_id": run_id,
            "marker": marker,
            "comment_id": comment_id,
            "kind": kind,
            "body_sha256": body_sha256,
            "updated_at": self._now(),
        }
        with self._write("record_comment") as conn:
            conn.execute(self._record_comment_stmt, values)

    @functools.cached_property
    def _record_comment_stmt(self) -> sa.Executable:
        """record_comment's upsert, built once: it runs for every comment posted
        or edited, and building (and cache-keying) it cost more than running it."""
        stmt = self._insert(comments).values(
            {c.name: sa.bindparam(c.name, type_=c.type) for c in comments.c}
        )
        return stmt.on_conflict_do_update(
            index_elements=[comments.c.run_id, comments.c.marker],
            set_={
                "comment_id": stmt.excluded.comment_id,
                "kind": stmt.excluded.kind,
                "body_sha256": stmt.excluded.body_sha256,
                "updated_at": stmt.excluded.updated_at,
            },
        )
