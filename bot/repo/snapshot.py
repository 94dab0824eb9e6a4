"""A read-only view of a repository at one commit: the index, the content kept,
and how a missing piece is loaded.

One class serves every reader (``bot.repo.github``, ``bot.repo.local``): they
differ only in how the index is built and in the ``Loader`` that brings a file's
bytes when it is not held yet (a git blob from GitHub, a file from the working
tree, or none when an archive already delivered everything it will).

Bounds, whatever the repository (docs/architecture.md, "Repository snapshots"):
at most ``max_files`` index entries, ``max_file_bytes`` kept per file (a longer
file is kept cut, and says so), ``max_bytes`` of content kept in all; a file
loaded beyond that is answered but not kept. Binary files (a NUL in the first
8,000 bytes, git's own test) keep no content at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import anyio

from bot.repo.paths import Refused, link_target, parents

Kind = Literal["file", "link", "submodule"]
MAX_LINK_HOPS = 40  # Linux's own limit before ELOOP
BINARY_PROBE = 8000  # bytes git looks at to call a file binary
ENTRY_OVERHEAD = 120  # bytes an index entry costs beside its path (for the cache's sums)


@dataclass(frozen=True, slots=True)
class Entry:
    path: str
    kind: Kind
    size: int = 0
    sha: str = ""  # git blob sha (GitHub), or a submodule's commit


@dataclass(frozen=True)
class Limits:
    """Per-snapshot bounds; defaults justified in docs/configuration.md."""

    max_files: int = 100_000  # GitHub's own cut of a recursive tree
    max_file_bytes: int = 1024 * 1024  # a source file past 1 MB is generated or data
    max_bytes: int = 64 * 1024 * 1024  # content kept per snapshot
    # A lazy snapshot (over the archive size) searches a folder only when its
    # unread files fit these: one request per file, so a search stays cheap.
    search_fetch_files: int = 100
    search_fetch_bytes: int = 8 * 1024 * 1024
    # Paths a truncated index asks GitHub about (one request each), per snapshot.
    max_probes: int = 500


# Bytes of a file (None: gone or unreadable).
Loader = Callable[[Entry], Awaitable[bytes | None]]
# What the source has at a path missing from a truncated index: the file's own
# entry, or a folder's entries; empty when nothing is there.
Probe = Callable[[str], Awaitable[tuple[list[Entry], list[str]]]]


@dataclass(frozen=True)
class Text:
    path: str
    data: bytes
    cut: bool  # only the first ``max_file_bytes`` are held
    size: int  # the file's real size


def is_binary(data: bytes) -> bool:
    return b"\x00" in data[:BINARY_PROBE]


def split_lines(data: bytes) -> list[str]:
    """Lines as GitHub numbers them: split on LF only (a form feed or U+2028 does
    not start a line there), CR of CRLF dropped, no phantom line after a final LF."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


class Snapshot:
    """The repository at ``commit``. Shared by every run on that commit (reads
    never change it, apart from filling in content a lazy loader brings)."""

    def __init__(
        self,
        *,
        repo: str,
        commit: str,
        html_url: str,
        entries: Iterable[Entry],
        limits: Limits,
        loader: Loader | None = None,
        probe: Probe | None = None,
        remote: bool = False,
        notes: Iterable[str] = (),
        truncated: bool = False,
    ) -> None:
        self.repo = repo
        self._commit = commit
        self._html_url = html_url.rstrip("/")
        self.limits = limits
        self._loader = loader
        # A truncated index asks the source about a path it does not list.
        self._probe = probe
        self._probed: set[str] = set()
        self.remote = remote  # a load costs a GitHub request
        self.notes = tuple(notes)
        self._entries: dict[str, Entry] = {}
        self._dirs: set[str] = set()
        self.truncated = truncated  # the index is known to miss entries
        for e in entries:
            if len(self._entries) >= limits.max_files:
                self.truncated = True
                break
            self._entries[e.path] = e
            self._dirs.update(parents(e.path))
        self._text: dict[str, bytes] = {}
        self._cut: set[str] = set()
        self._binary: set[str] = set()
        self._links: dict[str, str] = {}  # link path -> its raw target
        self._kept = 0
        self._loading: dict[str, _Load] = {}
        self.requests = 0  # loads that went to the loader (GitHub requests when remote)
        self.index_bytes = sum(len(p) + ENTRY_OVERHEAD for p in self._entries)

    # -- what the outside reads ------------------------------------------------------

    @property
    def commit(self) -> str:
        return self._commit

    @property
    def html_url(self) -> str:
        """The repository's page (``https://github.com/owner/name``; GHES alike), the
        base of a permalink ``<html_url>/blob/<commit>/<path>#L12``; "" when unknown
        (a local checkout without a GitHub remote)."""
        return self._html_url

    @property
    def nbytes(self) -> int:
        """What this snapshot holds in memory, roughly: content kept plus the index."""
        return self._kept + self.index_bytes

    @property
    def complete(self) -> bool:
        """Every file's content is held, or known not to be (no loader to ask)."""
        return self._loader is None

    @property
    def file_count(self) -> int:
        return sum(1 for e in self._entries.values() if e.kind == "file")

    def file_lines(self, path: str) -> list[str] | None:
        """The file's lines at the pinned commit as held now (citation checks), or
        None: no such text file, or (lazy snapshots) not loaded yet: ``await
        ensure(paths)`` first. Follows symlinks whose target is known."""
        try:
            _, found = self._walk(path)
        except (Refused, _NeedLink, _NeedProbe):
            return None
        if found is None or found.kind != "file" or found.path not in self._text:
            return None
        return split_lines(self._text[found.path])

    async def ensure(self, paths: Iterable[str]) -> None:
        """Load the named files when a loader can (best effort, for ``file_lines``).
        Only paths the index holds: asking the source about an unknown path spends
        the snapshot's probes, shared by every run on this commit, and cited paths
        are often made up."""
        for path in paths:
            if self.entry(path) is None:
                continue
            try:
                await self.read_text(path)
            except Refused:
                continue

    # -- resolving -------------------------------------------------------------------

    def entry(self, path: str) -> Entry | None:
        return self._entries.get(path)

    def is_dir(self, path: str) -> bool:
        return path == "" or path in self._dirs

    async def resolve(self, path: str) -> tuple[str, Entry | None]:
        """Where ``path`` (a clean path) leads after following symlinks: the real
        path and its entry (None for a folder). Refused: missing, a symlink leaving
        the repository or looping, a path through a file or submodule."""
        while True:
            try:
                return self._walk(path)
            except _NeedLink as need:  # read its target, then walk again
                await self._link_target(need.entry)
            except _NeedProbe as need:  # ask the source what is there, then walk again
                await self._ask(need.path)

    def _walk(self, path: str) -> tuple[str, Entry | None]:
        parts = path.split("/") if path else []
        hops = 0
        i = 0
        current = ""
        while i < len(parts):
            here = f"{current}/{parts[i]}" if current else parts[i]
            e = self._entries.get(here)
            if e is not None and e.kind == "link":
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise Refused(f"`{path}`: too many symlinks (a symlink loop).")
                if e.path not in self._links:
                    raise _NeedLink(e)
                resolved = link_target(here, self._links[e.path])
                parts = (resolved.split("/") if resolved else []) + parts[i + 1 :]
                current, i = "", 0
                continue
            if e is not None and i < len(parts) - 1:
                raise Refused(_not_a_folder(e))
            if e is None and here not in self._dirs:
                if self._probe is not None and here not in self._probed:
                    raise _NeedProbe(here)
                raise Refused(self._missing(path))
            current = here
            i += 1
        return current, self._entries.get(current) if current else None

    async def _ask(self, path: str) -> None:
        """Add what the source has at ``path`` (a file, or a folder's entries) to the
        index; at most ``max_probes`` questions per snapshot."""
        assert self._probe is not None
        self._probed.add(path)
        if len(self._probed) > self.limits.max_probes:
            return
        self.requests += 1
        entries, folders = await self._probe(path)
        for folder in folders:
            self._dirs.update((*parents(folder), folder))
        for e in entries:
            if e.path not in self._entries:
                self._entries[e.path] = e
                self._dirs.update(parents(e.path))
                self.index_bytes += len(e.path) + ENTRY_OVERHEAD

    def _missing(self, path: str) -> str:
        text = f"`{path}` does not exist at commit {self._commit[:12]}"
        if self.truncated:
            text += (
                " (or is past the part of the listing this snapshot holds: the repository "
                "has more files than it keeps; try a path you saw in list_files)"
            )
        return text + "."

    async def _link_target(self, e: Entry) -> str:
        if e.path not in self._links:
            data = await self._load(e)
            if data is None:
                raise Refused(f"the symlink `{e.path}` cannot be read")
            self._links[e.path] = data[:4096].decode("utf-8", errors="replace")
        return self._links[e.path]

    # -- reading ---------------------------------------------------------------------

    def seal(self) -> None:
        """Everything there is to hold is held (a whole archive was read): no loads."""
        self._loader = None

    def add_link(self, path: str, target: str) -> None:
        self._links[path] = target

    def keep(self, path: str, data: bytes) -> bool:
        """Hold ``data`` as the content of ``path``, within the bounds; False when
        the snapshot is full (the caller still has the bytes)."""
        if path in self._text or path in self._binary:
            return True
        if is_binary(data):
            self._binary.add(path)
            return True
        if len(data) > self.limits.max_file_bytes:
            data = data[: self.limits.max_file_bytes]
            self._cut.add(path)
        if self._kept + len(data) > self.limits.max_bytes:
            self._cut.discard(path)
            return False
        self._text[path] = data
        self._kept += len(data)
        return True

    async def read_text(self, path: str) -> Text:
        """A text file's bytes (perhaps cut). Refused: a folder, a submodule, a
        binary, a missing file or one that cannot be loaded."""
        _, e = await self.resolve(path)
        if e is None:
            raise Refused(f"`{path or '/'}` is a folder; use list_files to see what it holds.")
        if e.kind == "submodule":
            raise Refused(_not_a_folder(e))
        data = self._text.get(e.path)
        if data is None:
            if e.path in self._binary:
                raise Refused(f"`{e.path}` is a binary file; only text files can be read.")
            loaded = await self._load(e)
            if loaded is None:
                raise Refused(self._unreadable(e))
            if is_binary(loaded):
                self._binary.add(e.path)
                raise Refused(f"`{e.path}` is a binary file; only text files can be read.")
            if not self.keep(e.path, loaded):
                cut = len(loaded) > self.limits.max_file_bytes
                return Text(e.path, loaded[: self.limits.max_file_bytes], cut, e.size)
            data = self._text[e.path]
        return Text(e.path, data, e.path in self._cut, max(e.size, len(data)))

    def _unreadable(self, e: Entry) -> str:
        if self._loader is None:
            return (
                f"`{e.path}` ({e.size:,} bytes) is not held in this snapshot: it is past "
                "the size the snapshot keeps."
            )
        return f"`{e.path}` could not be read at commit {self._commit[:12]}."

    async def _load(self, e: Entry) -> bytes | None:
        """One load per path at a time: runs asking for the same file wait for the
        first one's answer instead of each paying a request (a failed load is
        tried again by the next caller)."""
        if self._loader is None:
            return None
        while (pending := self._loading.get(e.path)) is not None:
            await pending.done.wait()
            if pending.ok:
                return pending.data
        flight = _Load()
        self._loading[e.path] = flight
        try:
            self.requests += 1
            flight.data = await self._loader(e)
            flight.ok = True
            return flight.data
        finally:
            del self._loading[e.path]
            flight.done.set()

    def held(self, path: str) -> bytes | None:
        return self._text.get(path)

    # -- listing ---------------------------------------------------------------------

    def children(self, folder: str) -> list[str]:
        """The entries directly in ``folder`` (a resolved folder path), sorted,
        folders ending in ``/``."""
        prefix = f"{folder}/" if folder else ""
        names: set[str] = set()
        for d in self._dirs:
            if d.startswith(prefix) and "/" not in d[len(prefix) :]:
                names.add(d + "/")
        for p in self._entries:
            if p.startswith(prefix) and "/" not in p[len(prefix) :]:
                names.add(p)
        return sorted(names)

    def files_under(self, folder: str) -> Iterator[Entry]:
        """Files (not links or submodules) under ``folder``, in path order."""
        prefix = f"{folder}/" if folder else ""
        for p in sorted(self._entries):
            e = self._entries[p]
            if e.kind == "file" and p.startswith(prefix):
                yield e

    def size(self, path: str) -> int | None:
        """The size the index gives ``path`` (0 for a folder), None when it is absent."""
        e = self._entries.get(path)
        if e is not None:
            return e.size
        return 0 if self.is_dir(path) and path else None

    def listing(self) -> Iterator[tuple[str, int, str]]:
        """(path, size, kind) of every entry and folder (``bot.repo.brief.source.RepoFiles``)."""
        for d in self._dirs:
            yield d, 0, "folder"
        for e in self._entries.values():
            yield e.path, e.size, e.kind

    async def text(self, path: str) -> str | None:
        """A UTF-8 text file's content, None when refused (missing, binary, a
        folder…) or not UTF-8 (a file cut at the bound may end mid-character)."""
        try:
            found = await self.read_text(path)
        except Refused:
            return None
        try:
            return found.data.decode("utf-8", errors="ignore" if found.cut else "strict")
        except UnicodeDecodeError:
            return None

    def lacking(self) -> int:
        """Files with no content held and symlinks with no target: what an archive
        that was meant to bring everything did not bring."""
        return sum(
            1
            for e in self._entries.values()
            if (e.kind == "file" and e.path not in self._text and e.path not in self._binary)
            or (e.kind == "link" and e.path not in self._links)
        )

    def unheld(self, entries: Iterable[Entry]) -> list[Entry]:
        return [e for e in entries if e.path not in self._text and e.path not in self._binary]

    def describe(self, e: Entry) -> str:
        """A listing line: ``path``, ``path -> target`` or ``path (submodule)``."""
        if e.kind == "link":
            target = self._links.get(e.path)
            return f"{e.path} -> {target}" if target is not None else f"{e.path} (symlink)"
        if e.kind == "submodule":
            return f"{e.path} (submodule, not readable)"
        return e.path


@dataclass
class _Load:
    done: anyio.Event = field(default_factory=anyio.Event)
    data: bytes | None = None
    ok: bool = False


class _NeedProbe(Exception):
    """Internal: the walk met a path a truncated index does not list."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class _NeedLink(Exception):
    """Internal: the walk met a symlink whose target is not read yet."""

    def __init__(self, entry: Entry) -> None:
        super().__init__(entry.path)
        self.entry = entry


def _not_a_folder(e: Entry) -> str:
    if e.kind == "submodule":
        return (
            f"`{e.path}` is a submodule (commit {e.sha[:12] or 'unknown'}); its files belong "
            "to another repository and are not readable here."
        )
    return f"`{e.path}` is a file, not a folder."
