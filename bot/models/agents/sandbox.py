"""An agent CLI in a bubblewrap sandbox that the operating system enforces
(docs/agents-operators.md, "The sandbox").

What the process inside gets, and nothing more:
- ``/workspace``: the run's pinned commit, read-only;
- ``/home/agent`` and ``/tmp``: its own empty, writable folders (in the turn's
  folder on the host, deleted with it);
- ``/usr`` (and the ``/lib``, ``/bin`` links into it), ``/etc/ssl``, the
  CLI's own install folder: read-only;
- no network: a private network namespace whose loopback holds only the
  forwarder (``forwarder.py``), which relays to the gateway's unix socket;
- an environment built from an allow-list (``bwrap`` itself starts with an
  empty one, so ``/proc/1/environ`` shows nothing of the worker's);
- its own user (65534), pid, IPC and UTS namespaces; ``--die-with-parent``
  and a pid namespace, so killing ``bwrap`` ends every process inside.

``run_sandboxed`` starts it in its own process group and kills the group on the
first-event, idle or wall timeout, on an output past its cap, or on memory past
its bound (the tree's resident memory, polled), and whatever else ends the
turn (a cancelled task included): no process outlives its turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, Literal

from bot.core.errors import AgentUnavailable, ModelError
from bot.models.agents import forwarder

WORKSPACE: Final = "/workspace"
HOME: Final = "/home/agent"
GATEWAY_DIR: Final = "/run/gateway"
COMPILE_CACHE: Final = "/var/cache/node"  # Node's compile cache, read-only in turns
SOCKET_NAME: Final = "gateway.sock"
FORWARDER_PORT: Final = 41_000  # inside the sandbox's own network namespace
NOBODY: Final = 65534
SANDBOX_TMP: Final = "/tmp"  # noqa: S108  (the sandbox's own, a bind of the turn's folder)
Ending = Literal["exited", "first_event", "idle", "wall", "output", "memory"]


@dataclass(frozen=True)
class Limits:
    wall_s: float = 600.0
    first_event_s: float = 120.0
    idle_s: float = 180.0
    max_output_bytes: int = 8 * 1024 * 1024
    max_rss_bytes: int = 2 * 1024**3


@dataclass(frozen=True)
class Sandbox:
    """How agents are confined: ``bwrap`` (the path of bubblewrap) or ``none``."""

    kind: Literal["bwrap", "none"]
    bwrap: str = ""
    # Node's compile cache on the host (Node 22+ keeps V8's compiled code: ~0.2 s
    # of each Gemini CLI start). Written only by a trusted `--version` run
    # (``warm_argv``); every turn binds it read-only.
    compile_cache: Path | None = None

    @property
    def confined(self) -> bool:
        return self.kind == "bwrap"


@dataclass(frozen=True)
class Command:
    """One agent turn's process: ``argv`` and ``env`` may hold ``{port}`` (the
    forwarder's loopback port, known once it listens) and ``{workspace}``."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    install_dir: Path  # the CLI's folder, bound read-only
    stdin: str = ""  # a file (a path inside the sandbox) for its standard input


@dataclass
class Result:
    ending: Ending
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    first_event_s: float | None = None
    peak_rss: int = 0
    notes: list[str] = field(default_factory=list)


def find_sandbox(kind: str, bwrap_setting: str | None) -> Sandbox:
    """The configured sandbox, checked to exist (AgentUnavailable names the fix)."""
    if kind == "none":
        return Sandbox("none")
    if kind != "bwrap":
        raise AgentUnavailable(
            f"DEBATE_BOT_AGENT_SANDBOX={kind!r}: expected bwrap or none", cause="sandbox"
        )
    path = bwrap_setting or shutil.which("bwrap") or ""
    if not path or not os.access(path, os.X_OK):
        raise AgentUnavailable(
            "bubblewrap (bwrap) is not installed: install the `bubblewrap` package or set "
            "DEBATE_BOT_AGENT_BWRAP",
            cause="sandbox",
        )
    return Sandbox("bwrap", path)


def python_for_sandbox() -> str:
    """An interpreter under /usr (which the sandbox binds) for the forwarder."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        real = os.path.realpath(candidate)
        if real.startswith("/usr/") and os.access(real, os.X_OK):
            return real
    raise AgentUnavailable(
        "no Python under /usr for the sandbox's forwarder: install python3", cause="sandbox"
    )


def bwrap_argv(
    sandbox: Sandbox,
    *,
    turn_dir: Path,
    install_dir: Path,
    gateway_dir: Path,
    cache_writable: bool = False,
) -> list[str]:
    """bubblewrap's options for one turn (the command follows them)."""
    argv = [
        sandbox.bwrap,
        "--unshare-all",  # user, pid, net, ipc, uts, cgroup: no network but loopback
        "--die-with-parent",
        "--new-session",
        "--uid", str(NOBODY), "--gid", str(NOBODY),
        "--clearenv",
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    for link in ("lib", "lib64", "bin", "sbin"):
        if Path(f"/{link}").is_symlink():
            argv += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
        elif Path(f"/{link}").is_dir():
            argv += ["--ro-bind", f"/{link}", f"/{link}"]
    for etc in ("/etc/ssl", "/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime"):
        if Path(etc).exists():
            argv += ["--ro-bind", etc, etc]
    argv += [
        "--proc", "/proc",
        "--dev", "/dev",
        # The turn's own /tmp (a later bind wins over a tmpfs: pitfall 4 of the CLIs).
        "--bind", str(turn_dir / "tmp"), SANDBOX_TMP,
        "--bind", str(turn_dir / "home"), HOME,
        "--ro-bind", str(turn_dir / "workspace"), WORKSPACE,
        "--ro-bind", str(gateway_dir), GATEWAY_DIR,
        "--ro-bind", str(install_dir), str(install_dir),
        "--chdir", WORKSPACE,
    ]  # fmt: skip
    if sandbox.compile_cache is not None and sandbox.compile_cache.is_dir():
        bind = "--bind" if cache_writable else "--ro-bind"
        argv += [bind, str(sandbox.compile_cache), COMPILE_CACHE]
    return argv


def warm_argv(sandbox: Sandbox, command: Command, *, turn_dir: Path) -> list[str]:
    """``command`` (a CLI's own ``--version``: no workspace, no prompt) in the
    sandbox with the compile cache writable, so that the cache holds what the
    same Node, as the same user, compiles when a turn starts."""
    argv = bwrap_argv(
        sandbox,
        turn_dir=turn_dir,
        install_dir=command.install_dir,
        gateway_dir=turn_dir / "gateway",
        cache_writable=True,
    )
    for name, value in {**command.env, "NODE_COMPILE_CACHE": COMPILE_CACHE}.items():
        argv += ["--setenv", name, value]
    return [*argv, *command.argv]


def forwarder_argv(python: str, command: Command, *, socket_path: str, port: int) -> list[str]:
    config = {
        "socket": socket_path,
        "port": port,
        "argv": list(command.argv),
        "env": dict(command.env),
        "cwd": WORKSPACE,
        "stdin": command.stdin,
    }
    return [python, "-I", "-S", "-c", forwarder.SOURCE, json.dumps(config)]


async def run_sandboxed(
    sandbox: Sandbox,
    command: Command,
    *,
    turn_dir: Path,
    gateway_dir: Path,
    limits: Limits,
    on_line: Callable[[bytes], None] | None = None,
    active_at: Callable[[], float] | None = None,
) -> Result:
    """Run ``command`` confined to ``turn_dir`` (which holds ``workspace/``,
    ``home/`` and ``tmp/``) and ``gateway_dir`` (the gateway's socket, apart: a
    unix socket's path is at most 107 bytes) and wait for its end; the process
    group is gone when this returns or raises."""
    argv, cwd = _launch(sandbox, command, turn_dir=turn_dir, gateway_dir=gateway_dir)
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},  # bwrap's own: nothing of ours
        start_new_session=True,
        limit=limits.max_output_bytes,  # a CLI's event line may be long (a file it read)
    )
    watch = _Watch(proc, limits, started, on_line, active_at)
    try:
        ending = await watch.run()
    finally:
        await _kill_group(proc)
    return Result(
        ending=ending,
        exit_code=proc.returncode,
        stdout=bytes(watch.stdout),
        stderr=bytes(watch.stderr[-16384:]),
        seconds=time.monotonic() - started,
        first_event_s=watch.first_event_s,
        peak_rss=watch.peak_rss,
    )


def _launch(
    sandbox: Sandbox, command: Command, *, turn_dir: Path, gateway_dir: Path
) -> tuple[list[str], str]:
    """The argv that starts ``command`` (through the forwarder) and its folder."""
    python = python_for_sandbox()
    if sandbox.confined:
        if sandbox.compile_cache is not None:
            command = replace(command, env={**command.env, "NODE_COMPILE_CACHE": COMPILE_CACHE})
        socket_path = f"{GATEWAY_DIR}/{SOCKET_NAME}"
        argv = [
            *bwrap_argv(
                sandbox, turn_dir=turn_dir, install_dir=command.install_dir, gateway_dir=gateway_dir
            ),
            *forwarder_argv(python, command, socket_path=socket_path, port=FORWARDER_PORT),
        ]
        return argv, str(turn_dir)
    # Unsafe, explicit: the host's loopback, a free port, the real paths.
    workspace, home = str(turn_dir / "workspace"), str(turn_dir / "home")
    unsafe = Command(
        tuple(a.replace(WORKSPACE, workspace) for a in command.argv),
        {k: v.replace(HOME, home).replace(WORKSPACE, workspace) for k, v in command.env.items()},
        command.install_dir,
        command.stdin.replace(HOME, home),
    )
    argv = forwarder_argv(python, unsafe, socket_path=str(gateway_dir / SOCKET_NAME), port=0)
    argv[-1] = argv[-1].replace(f'"cwd": "{WORKSPACE}"', f'"cwd": "{workspace}"')
    return argv, workspace


class _Watch:
    """Reads the process's output under the timeouts and bounds."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        limits: Limits,
        started: float,
        on_line: Callable[[bytes], None] | None,
        active_at: Callable[[], float] | None = None,
    ) -> None:
        self.active_at = active_at  # the gateway's last call or answer: alive too
        self.rss_due = started
        self.proc = proc
        self.limits = limits
        self.started = started
        self.on_line = on_line
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.first_event_s: float | None = None
        self.last_event = started
        self.peak_rss = 0
        self.ending: Ending | None = None

    async def run(self) -> Ending:
        readers = [
            asyncio.create_task(self._read_stdout()),
            asyncio.create_task(self._read_stderr()),
        ]
        try:
            while True:
                for r in readers:  # a reader that failed (a line past the cap): say so
                    if r.done() and r.exception() is not None:
                        return "output"
                done = all(r.done() for r in readers)
                if done:
                    await self.proc.wait()
                    return "exited"
                ending = self._over()
                if ending is not None:
                    return ending
                await asyncio.wait(readers, timeout=0.25)
        finally:
            for r in readers:
                r.cancel()
            await asyncio.gather(*readers, return_exceptions=True)

    def _over(self) -> Ending | None:
        if self.ending is not None:
            return self.ending
        now = time.monotonic()
        if now - self.started > self.limits.wall_s:
            return "wall"
        if self.first_event_s is None and now - self.started > self.limits.first_event_s:
            return "first_event"
        last = max(self.last_event, self.active_at() if self.active_at is not None else 0.0)
        if self.first_event_s is not None and now - last > self.limits.idle_s:
            return "idle"
        if now >= self.rss_due:  # once a second: the process tree's own entries only
            self.rss_due = now + 1.0
            rss = _tree_rss(self.proc.pid)
            self.peak_rss = max(self.peak_rss, rss)
            if rss > self.limits.max_rss_bytes:
                return "memory"
        return None

    async def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            now = time.monotonic()
            if self.first_event_s is None:
                self.first_event_s = now - self.started
            self.last_event = now
            if len(self.stdout) + len(line) > self.limits.max_output_bytes:
                self.ending = "output"
                return
            self.stdout += line
            if self.on_line is not None:
                self.on_line(line)

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(4096):
            self.stderr += chunk
            del self.stderr[:-65536]  # the tail says why; the head is noise


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and its descendants, walked down from it (each
    process's ``children`` list), never the whole host's /proc."""
    page = os.sysconf("SC_PAGE_SIZE")
    total, stack = 0, [root]
    seen: set[int] = set()
    while stack and len(seen) < 4096:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * page
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                    stack.extend(int(c) for c in f.read().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the process group (bwrap's pid namespace dies with it), then reap."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(proc.wait(), timeout=10)


def ending_error(result: Result, cli: str) -> ModelError | None:
    """The drop a sandbox ending means (None: it exited by itself)."""
    match result.ending:
        case "exited":
            return None
        case "output":
            return ModelError(f"{cli}: output past its cap", drop_class="agent_protocol")
        case "memory":
            return ModelError(f"{cli}: memory past its bound", drop_class="agent_protocol")
        case _:
            return ModelError(f"{cli}: {result.ending} timeout", drop_class="agent_timeout")


def describe_argv(argv: Sequence[str]) -> str:
    """For logs: the command without the forwarder's config (it holds a token)."""
    return " ".join(a if len(a) < 200 else "<config>" for a in argv)
