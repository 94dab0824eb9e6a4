"""The bot's own comments, found again by their marker."""

from __future__ import annotations

from typing import cast

import sqlalchemy as sa

from bot.errors import StoreError
from bot.store.base import StoreBase
from bot.store.rows import (
    CommentKind,
    CommentRecord,
)
from bot.store.schema import (
    COMMENT_KINDS,
    comments,
)


class CommentQueries(StoreBase):
    def comment_id(self, run_id: str, marker: str) -> CommentRecord | None:
        with self._read("comment_id") as conn:
            row = conn.execute(
                sa.select(comments.c.comment_id, comments.c.kind, comments.c.body_sha256).where(
                    comments.c.run_id == run_id, comments.c.marker == marker
                )
            ).first()
        if row is None:
            return None
        return CommentRecord(int(row[0]), cast(CommentKind, row[1]), row[2])

    def record_comment(
        self, run_id: str, marker: str, comment_id: int, kind: CommentKind, body_sha256: str
    ) -> None:
        """Remember (or update) the comment posted for ``marker`` in a run."""
        if kind not in COMMENT_KINDS:
            raise StoreError(f"unknown comment kind {kind!r}")
        now = self._now()
        stmt = self._insert(comments).values(
            run_id=run_id,
            marker=marker,
            comment_id=comment_id,
            kind=kind,
            body_sha256=body_sha256,
            updated_at=now,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[comments.c.run_id, comments.c.marker],
            set_={
                "comment_id": stmt.excluded.comment_id,
                "kind": stmt.excluded.kind,
                "body_sha256": stmt.excluded.body_sha256,
                "updated_at": stmt.excluded.updated_at,
            },
        )
        with self._write("record_comment") as conn:
            conn.execute(stmt)
