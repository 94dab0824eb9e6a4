"""What a debate of an eval case with ``tools=on`` reads: the case's files as a
snapshot at a fixed commit, through the service's own reader and tools
(``bot.repo.snapshot.Snapshot``, ``bot.repo.tools.run_tool``).

An arbitration case's ``files`` are the repository (the commented file among
them); a case read from ``repo: PATH`` and ``commit`` holds the commented file
only (the rest of that repository is not read into eval). A question case has
nothing to read: it debates without tools whatever the configuration says.
"""

from __future__ import annotations

import hashlib
import json

from bot.cli.eval.cases import ArbitrateCase, Loaded
from bot.repo.paths import Refused, clean_path
from bot.repo.snapshot import Entry, Limits, Snapshot


def case_files(loaded: Loaded) -> dict[str, str]:
    """The files a case's debaters may read (empty: nothing to read)."""
    case = loaded.case
    if not isinstance(case, ArbitrateCase):
        return {}
    files = dict(case.files) if case.files else {case.path: loaded.head_text or ""}
    out: dict[str, str] = {}
    for path, text in files.items():
        try:
            clean = clean_path(path)
        except Refused:
            continue  # a path no tool could name (absolute, `..`): not part of the tree
        if clean:
            out[clean] = text
    return out


def case_reader(loaded: Loaded) -> Snapshot | None:
    """A sealed snapshot of the case's files, or None when there are none."""
    files = case_files(loaded)
    if not files:
        return None
    case = loaded.case
    assert isinstance(case, ArbitrateCase)
    # A case without a commit gets one from its files: the same files, the same sha.
    commit = (
        case.commit
        or hashlib.sha1(
            json.dumps(files, sort_keys=True).encode(), usedforsecurity=False
        ).hexdigest()
    )
    snap = Snapshot(
        repo=case.repo or f"eval/{case.id}",
        commit=commit,
        html_url="",  # no page to link to: citations are checked, not linked
        entries=[Entry(p, "file", len(t.encode())) for p, t in sorted(files.items())],
        limits=Limits(),
    )
    for path, text in files.items():
        snap.keep(path, text.encode())
    snap.seal()
    return snap
