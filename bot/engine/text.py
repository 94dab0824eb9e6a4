"""Bounding text that is shown in one line (names, lenses, points, positions)."""

from __future__ import annotations


def clip(text: str, n: int) -> str:
    """``text`` on one line, at most ``n`` characters (an ellipsis marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"
