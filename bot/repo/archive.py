"""Reading a GitHub tarball (``owner-name-sha/…``) into a snapshot, in memory.

Nothing is written to disk, so a member cannot land outside the snapshot by
construction; names are still judged by ``clean_path`` and a member that is
not clean (``..``, absolute, NUL, outside the one top folder) is skipped and
counted, never renamed. Only regular files and symlinks that the git tree lists
are taken (the tree is the index; the archive only brings bytes), so a crafted
member cannot add a file either. Hard links, devices and FIFOs are skipped.

Bounded whatever the archive holds: the gzip stream is read through a counter
that stops at ``max_unpacked`` bytes (a gzip bomb costs that much CPU, no more),
each file is read only up to the snapshot's ``max_file_bytes``, and the
snapshot itself refuses content past its ``max_bytes``.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from dataclasses import dataclass

from bot.repo.paths import PathRefused, clean_path
from bot.repo.snapshot import Snapshot


class ArchiveTooLarge(Exception):
    """Internal: the unpacked archive passed its bound (the snapshot keeps what it read)."""


class _Bounded(io.RawIOBase):
    """A reader that fails once more than ``limit`` bytes went through it."""

    def __init__(self, inner: io.BufferedIOBase, limit: int) -> None:
        self._inner = inner
        self._left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._inner.read(min(len(buffer), 64 * 1024))
        self._left -= len(data)
        if self._left < 0:
            raise ArchiveTooLarge
        buffer[: len(data)] = data
        return len(data)


@dataclass
class Unpacked:
    files: int = 0  # file contents the snapshot took
    links: int = 0
    skipped: int = 0  # members refused: unclean names, other types, not in the tree
    complete: bool = True  # False: cut at the unpacked bound or the snapshot's size


def unpack_into(snap: Snapshot, archive: bytes, *, max_unpacked: int) -> Unpacked:
    """Fill ``snap`` (whose index came from the git tree) from a ``.tar.gz``.
    Blocking and CPU-bound: run it in a thread."""
    result = Unpacked()
    raw = _Bounded(gzip.GzipFile(fileobj=io.BytesIO(archive)), max_unpacked)
    try:
        # "r|": a stream, one pass, no seeking back (memory stays one member's worth).
        with tarfile.open(fileobj=io.BufferedReader(raw), mode="r|") as tar:
            top: str | None = None
            for member in tar:
                name, _, rest = member.name.partition("/")
                if top is None:
                    top = name  # GitHub's one top folder: owner-name-shortsha
                if name != top:
                    result.skipped += 1
                    continue
                if not rest:
                    continue  # the top folder itself
                try:
                    path = clean_path(rest)
                except PathRefused:
                    result.skipped += 1
                    continue
                entry = snap.entry(path)
                if member.isdir():
                    continue
                if entry is None:
                    result.skipped += 1
                    continue
                if member.issym() and entry.kind == "link":
                    snap.add_link(path, member.linkname)
                    result.links += 1
                elif member.isfile() and entry.kind == "file":
                    f = tar.extractfile(member)
                    if f is None:
                        continue
                    data = f.read(snap.limits.max_file_bytes + 1)
                    if not snap.keep(path, data):
                        result.complete = False
                        return result
                    result.files += 1
                else:
                    result.skipped += 1
    except ArchiveTooLarge:
        result.complete = False
    except (tarfile.TarError, OSError, EOFError, gzip.BadGzipFile):
        result.complete = False  # a cut or corrupt archive: what was read stands
    return result
