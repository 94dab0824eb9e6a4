"""What a process knows about seating agents: the sandbox, the CLIs found, the
upstream of each, and how many agent processes may run at once.

Built once per process from the settings (``AgentHost.from_settings``). Its
checks run when a seat is asked for, not at start, so a service without
agents never looks for bubblewrap: ``check`` raises ``AgentUnavailable`` naming
the cause, and the command that asked is refused before any run starts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import anyio

from bot.core.errors import AgentUnavailable
from bot.core.logs import get_logger
from bot.core.settings import Settings
from bot.engine.agents import PREFIX, UPSTREAM, AgentRef, Cli, is_agent, parse_agent
from bot.models.agents.clis import CLI_SPECS, QUIET, CliSpec, Found, find_cli, path_env
from bot.models.agents.sandbox import (
    HOME,
    Command,
    Limits,
    Sandbox,
    bwrap_argv,
    find_sandbox,
    warm_argv,
)

log = get_logger(__name__)

RECHECK_S = 30.0  # a failed sandbox or CLI check is answered from memory this long
CACHE_DIR = "node-compile-cache"  # under DEBATE_BOT_AGENT_DIR (default: the temp folder)
AGENT_RSS_BYTES = 600 * 1024**2  # what one agent process is budgeted (measured: 140-230 MB)


def default_concurrency(cores: int | None = None, memory_bytes: int | None = None) -> int:
    """Agent processes at once: two per core, and no more than memory holds at
    ``AGENT_RSS_BYTES`` each with a quarter kept for the rest."""
    cores = cores or os.cpu_count() or 1
    if memory_bytes is None:
        try:
            memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            memory_bytes = 4 * 1024**3
    return max(1, min(2 * cores, int(memory_bytes * 0.75) // AGENT_RSS_BYTES))


@dataclass
class AgentHost:
    sandbox_kind: str
    bwrap_setting: str | None
    bins: Mapping[Cli, str | None]
    models: Mapping[Cli, str]
    limits: Limits
    concurrency: int
    max_calls: int
    root: Path
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    _sandbox: Sandbox | None = None
    _found: dict[Cli, Found] = field(default_factory=dict)
    _slots: anyio.CapacityLimiter | None = None
    # A failed check is remembered a while: commands asking meanwhile get its
    # answer without starting bubblewrap or the CLI again.
    _failed: dict[str, tuple[float, AgentUnavailable]] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> AgentHost:
        return cls(
            sandbox_kind=settings.agent_sandbox,
            bwrap_setting=settings.agent_bwrap,
            bins={
                "claude-code": settings.agent_claude_code_bin,
                "codex": settings.agent_codex_bin,
                "gemini": settings.agent_gemini_bin,
            },
            models={
                "claude-code": settings.agent_claude_code_model,
                "codex": settings.agent_codex_model,
                "gemini": settings.agent_gemini_model,
            },
            limits=Limits(
                wall_s=settings.agent_timeout_s,
                first_event_s=settings.agent_first_event_s,
                idle_s=settings.agent_idle_s,
            ),
            concurrency=settings.agent_concurrency or default_concurrency(),
            max_calls=settings.agent_max_calls,
            root=settings.agent_dir or Path(tempfile.gettempdir()),
        )

    @property
    def slots(self) -> anyio.CapacityLimiter:
        if self._slots is None:
            self._slots = anyio.CapacityLimiter(self.concurrency)
        return self._slots

    def sandbox(self) -> Sandbox:
        """The sandbox, proven to start once (AgentUnavailable: it cannot)."""
        if self._sandbox is None:
            self._recent_failure("sandbox")
            try:
                found = find_sandbox(self.sandbox_kind, self.bwrap_setting)
                if found.confined:
                    probe_sandbox(found)
                    found = replace(found, compile_cache=private_dir(self.root / CACHE_DIR))
            except AgentUnavailable as exc:
                self._failed["sandbox"] = (time.monotonic(), exc)
                raise
            if not found.confined:
                log.warning(
                    "agent.unsandboxed",
                    detail="DEBATE_BOT_AGENT_SANDBOX=none: agent CLIs run unconfined (unsafe)",
                )
            self._sandbox = found
        return self._sandbox

    def cli(self, cli: Cli) -> Found:
        if cli not in self._found:
            self._recent_failure(cli)
            try:
                found = find_cli(CLI_SPECS[cli], self.bins.get(cli), self.environ)
            except AgentUnavailable as exc:
                self._failed[cli] = (time.monotonic(), exc)
                raise
            self._found[cli] = found
            if CLI_SPECS[cli].on_node and self._sandbox is not None:
                warm_compile_cache(self._sandbox, found)
        return self._found[cli]

    def _recent_failure(self, what: str) -> None:
        failed = self._failed.get(what)
        if failed is not None and time.monotonic() - failed[0] < RECHECK_S:
            raise failed[1]

    def spec(self, cli: Cli) -> CliSpec:
        return CLI_SPECS[cli]

    def model_of(self, ref: AgentRef) -> str:
        return ref.model or self.models.get(ref.cli, "")

    def check(self, refs: Iterable[str]) -> None:
        """Every agent reference among ``refs`` can run here: the sandbox starts
        and its CLI is installed at its pinned minimum (AgentUnavailable: which
        and why)."""
        agents = [parse_agent(r) for r in dict.fromkeys(refs) if is_agent(r)]
        if not agents:
            return
        self.sandbox()
        for ref in agents:
            self.cli(ref.cli)

    def available(self, refs: Iterable[str]) -> frozenset[str]:
        """The routing providers (``agent:<cli>``) among ``refs`` that can run here."""
        out = set()
        for ref in dict.fromkeys(refs):
            if not is_agent(ref):
                continue
            try:
                self.check([ref])
            except AgentUnavailable:
                continue
            out.add(f"{PREFIX}{parse_agent(ref).cli}")
        return frozenset(out)

    @staticmethod
    def upstream_provider(cli: Cli) -> str:
        return UPSTREAM[cli]


def private_dir(path: Path) -> Path | None:
    """``path`` as a folder only this process's user can write, made if missing;
    None (and a warning) when it is anything else: under a shared /tmp another
    user could have planted code in it, or a link to the service's own files,
    which every turn would then read."""
    try:
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700, parents=True)
        st = path.lstat()
    except OSError as exc:
        log.warning("agent.compile_cache_off", error=type(exc).__name__)
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        log.warning("agent.compile_cache_off", error="not a private folder of this user")
        return None
    return path


def _in_scratch_turn(
    argv_for: Callable[[Path], list[str]], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """A trusted command (our probe, a CLI's ``--version``) in the sandbox, in a
    turn folder of its own with nothing in it; OSError or TimeoutExpired if it
    cannot run."""
    with tempfile.TemporaryDirectory(prefix="debate-bot-check-") as folder:
        turn = Path(folder)
        for sub in ("workspace", "home", "tmp", "gateway"):
            (turn / sub).mkdir()
        return subprocess.run(  # noqa: S603  (our own argv)
            argv_for(turn), capture_output=True, text=True, timeout=timeout_s,
            stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"},
        )  # fmt: skip


def warm_compile_cache(sandbox: Sandbox, found: Found) -> None:
    """Run a Node CLI's ``--version`` once in the sandbox with the compile cache
    writable: turns then start from compiled code. Best effort: a cold cache
    only costs speed."""
    if sandbox.compile_cache is None:
        return
    command = Command(
        (str(found.exe), "--version"), {"PATH": path_env(found), "HOME": HOME, **QUIET},
        found.install_dir,
    )  # fmt: skip
    try:
        done = _in_scratch_turn(lambda turn: warm_argv(sandbox, command, turn_dir=turn), 60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("agent.compile_cache_cold", cli=found.cli, error=type(exc).__name__)
        return
    if done.returncode != 0:
        log.warning("agent.compile_cache_cold", cli=found.cli, exit=done.returncode)


def probe_sandbox(sandbox: Sandbox) -> None:
    """Start ``true`` in the sandbox exactly as a turn is started (user and network
    namespaces, the binds): AgentUnavailable with bubblewrap's own words if not."""
    true = shutil.which("true", path="/usr/bin:/bin") or "/usr/bin/true"

    def argv(turn: Path) -> list[str]:
        binds = bwrap_argv(
            sandbox, turn_dir=turn, install_dir=turn / "tmp", gateway_dir=turn / "gateway"
        )
        return [*binds, true]

    try:
        done = _in_scratch_turn(argv, 30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AgentUnavailable(
            f"the agent sandbox does not start ({type(exc).__name__})", cause="sandbox"
        ) from None
    if done.returncode != 0:
        # bubblewrap's own words may name host paths: logs only.
        log.warning("agent.sandbox_failed", stderr=done.stderr.strip()[-500:])
        raise AgentUnavailable(
            "the agent sandbox (bubblewrap) does not start on this server: unprivileged user "
            "namespaces may be off, or the container does not allow them "
            "(docs/agents-operators.md)",
            cause="sandbox",
        )
