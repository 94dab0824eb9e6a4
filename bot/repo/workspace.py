"""The pinned commit as plain files in a folder: an agent seat's workspace
(docs/agents-operators.md, "What an agent can see").

Written from the run's snapshot (a GitHub commit, a local checkout's tracked
files, an Action job's checkout), read-only from then on. ``skip`` names the
files left out: those an agent CLI would load on its own as settings, hooks,
MCP servers or instructions (``bot.engine.agents.is_agent_config``). Bounded:
a lazy snapshot (a repository past the archive size) loads at most
``max_loads`` more files; what is not written is counted, never an error.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from bot.repo.paths import Refused
from bot.repo.snapshot import Snapshot

# The sandbox's user must read and traverse, nobody may write.
READ_ONLY_FILE, READ_ONLY_DIR, WRITABLE_DIR = 0o444, 0o555, 0o755


@dataclass(frozen=True)
class Written:
    files: int
    bytes: int
    skipped: int  # agent configuration left out
    missing: int  # not written: binary, past the bounds, not loadable


async def write_workspace(
    snapshot: Snapshot,
    folder: Path,
    *,
    skip: Callable[[str], bool],
    max_loads: int = 500,
) -> Written:
    """Every text file of ``snapshot`` under ``folder`` (created), then made
    read-only (files 0444, folders 0555)."""
    items: list[tuple[str, bytes]] = []
    skipped = missing = loads = 0
    for entry in snapshot.files_under(""):
        if skip(entry.path):
            skipped += 1
            continue
        data = snapshot.held(entry.path)
        if data is None:
            if snapshot.complete or loads >= max_loads:
                missing += 1
                continue
            loads += 1
            try:
                data = (await snapshot.read_text(entry.path)).data
            except Refused:
                missing += 1
                continue
        items.append((entry.path, data))
    outside = await anyio.to_thread.run_sync(_write, folder, items)
    return Written(
        len(items) - outside, sum(len(d) for _, d in items), skipped, missing + outside
    )


def _write(folder: Path, items: list[tuple[str, bytes]]) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    base = folder.resolve()
    outside = 0
    for path, data in items:
        target = folder / path
        if not target.resolve().is_relative_to(base):
            outside += 1  # never outside the folder, whatever a path says
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    _set_modes(folder, READ_ONLY_FILE, READ_ONLY_DIR)
    return outside


def _set_modes(folder: Path, files: int, dirs: int) -> None:
    for root, subdirs, names in os.walk(folder, topdown=False):
        for name in names:
            os.chmod(os.path.join(root, name), files)
        for name in subdirs:
            os.chmod(os.path.join(root, name), dirs)
    os.chmod(folder, dirs)


def remove_tree(folder: Path) -> None:
    """Delete a folder holding a read-only workspace (write bits back first)."""
    if not folder.exists():
        return
    for root, subdirs, _ in os.walk(folder):
        os.chmod(root, WRITABLE_DIR)
        for name in subdirs:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, WRITABLE_DIR)
    shutil.rmtree(folder, ignore_errors=True)
