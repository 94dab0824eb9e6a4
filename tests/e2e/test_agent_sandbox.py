"""The agent sandbox holds by itself, whatever runs inside (bot/models/agents/
sandbox.py): a probe in place of a CLI tries to write, to connect and to read
secrets; only the forwarder's path to the gateway works."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot.models.agents.clis import Found
from bot.models.agents.host import probe_sandbox, warm_compile_cache
from bot.models.agents.sandbox import (
    SOCKET_NAME,
    Command,
    Limits,
    Sandbox,
    find_sandbox,
    python_for_sandbox,
    run_sandboxed,
)
from testkit.harness.agents import processes_mentioning

SECRET = "sk-worker-secret-never-in-the-sandbox-4242"

PROBE = r"""
import json, os, socket, sys
out = {}
def attempt(name, fn):
    try:
        out[name] = ["ok", str(fn())[:200]]
    except Exception as exc:
        out[name] = ["refused", type(exc).__name__]
def connect(host, port):
    s = socket.socket(); s.settimeout(2); s.connect((host, port)); s.close(); return "connected"
def write(path):
    with open(path, "w") as f: f.write("pwned")
    return path
cfg = json.loads(os.environ["PROBE"])
attempt("write_workspace", lambda: write("/workspace/marker.txt"))
attempt("write_new_in_workspace", lambda: write("/workspace/new.txt"))
attempt("write_usr", lambda: write("/usr/pwned"))
attempt("write_home", lambda: write("/home/agent/ok.txt"))
attempt("write_tmp", lambda: write("/tmp/ok.txt"))
attempt("canary", lambda: connect("127.0.0.1", cfg["canary"]))
attempt("dns", lambda: socket.getaddrinfo("example.com", 443))
attempt("gateway_via_forwarder", lambda: connect("127.0.0.1", int(os.environ["FWD_PORT"])))
attempt("root_home", lambda: os.listdir("/root"))
attempt("host_tmp", lambda: os.listdir(cfg["host_dir"]))
attempt("read_compile_cache", lambda: os.listdir(os.environ["NODE_COMPILE_CACHE"]))
attempt("write_compile_cache", lambda: write(os.environ["NODE_COMPILE_CACHE"] + "/v1/entry"))
environ = dict(os.environ)
procs = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            procs[pid] = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
        except OSError:
            pass
out["env"] = environ
out["proc_environ"] = procs
out["uid"] = os.getuid()
print(json.dumps(out))
"""


@pytest.fixture
def sandbox() -> Sandbox:
    found = find_sandbox("bwrap", None) if os.path.exists("/usr/bin/bwrap") else None
    if found is None:
        pytest.skip("bubblewrap is not installed")
    probe_sandbox(found)
    return found


@pytest.fixture
def canary() -> Iterator[tuple[int, list[str]]]:
    """A listener on the host's loopback: nothing in the sandbox may reach it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    hits: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            hits.append("connected")
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], hits
    stop.set()
    thread.join(timeout=2)
    server.close()


def _turn_dir(tmp_path: Path) -> tuple[Path, Path]:
    turn = tmp_path / "turn"
    for sub in ("workspace", "home", "tmp"):
        (turn / sub).mkdir(parents=True)
    (turn / "workspace" / "marker.txt").write_text("original\n")
    (turn / "workspace").chmod(0o555)
    (turn / "workspace" / "marker.txt").chmod(0o444)
    gateway = Path("/tmp") / f"dbgw-test-{os.getpid()}"
    gateway.mkdir(exist_ok=True)
    return turn, gateway


async def test_the_sandbox_stops_writes_network_and_secrets(
    tmp_path: Path,
    sandbox: Sandbox,
    canary: tuple[int, list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # the worker's environment holds a key
    port, hits = canary
    turn, gateway = _turn_dir(tmp_path)
    cache = tmp_path / "compile-cache"
    (cache / "v1").mkdir(parents=True)  # what a trusted `--version` run compiled
    sandbox = replace(sandbox, compile_cache=cache)
    # The gateway's socket: the forwarder's one way out.
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(gateway / SOCKET_NAME))
    listener.listen(4)
    try:
        python = python_for_sandbox()
        config = {"canary": port, "host_dir": str(tmp_path)}
        command = Command(
            (python, "-I", "-c", PROBE),
            {"PROBE": json.dumps(config), "FWD_PORT": "{port}", "PATH": "/usr/bin:/bin"},
            Path(python).parent,
        )
        result = await run_sandboxed(
            sandbox, command, turn_dir=turn, gateway_dir=gateway, limits=Limits(wall_s=60)
        )
    finally:
        listener.close()
        for f in gateway.iterdir():
            f.unlink()
        gateway.rmdir()
    assert result.ending == "exited", result.stderr
    report = json.loads(result.stdout)
    refused = {k: v[0] for k, v in report.items() if isinstance(v, list)}
    assert refused == {
        "write_workspace": "refused",
        "write_new_in_workspace": "refused",
        "write_usr": "refused",
        "write_home": "ok",
        "write_tmp": "ok",
        "canary": "refused",
        "dns": "refused",
        "gateway_via_forwarder": "ok",
        "root_home": "refused",
        "host_tmp": "refused",
        "read_compile_cache": "ok",
        "write_compile_cache": "refused",  # no turn can plant code for the next one
    }
    assert hits == []  # the host's loopback never heard from it
    assert (turn / "workspace" / "marker.txt").read_text() == "original\n"
    assert list((cache / "v1").iterdir()) == []
    assert report["uid"] == 65534
    everything = json.dumps([report["env"], report["proc_environ"]])
    assert SECRET not in everything
    assert not any(k.startswith(("DEBATE_BOT_", "OPENAI_", "ANTHROPIC_", "GITHUB"))
                   for k in report["env"])  # fmt: skip
    # What it wrote stays in the turn's own folders.
    assert (turn / "home" / "ok.txt").read_text() == "pwned"
    assert processes_mentioning(str(turn)) == []


async def test_a_hung_process_and_its_children_are_killed_at_the_timeout(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    turn, gateway = _turn_dir(tmp_path)
    script = (
        "import subprocess, time; subprocess.Popen(['sleep', '300']); "
        "print('up', flush=True); time.sleep(300)"
    )
    python = python_for_sandbox()
    command = Command((python, "-c", script), {"PATH": "/usr/bin:/bin"}, Path(python).parent)
    try:
        result = await run_sandboxed(
            sandbox, command, turn_dir=turn, gateway_dir=gateway,
            limits=Limits(wall_s=30, first_event_s=10, idle_s=2),
        )  # fmt: skip
    finally:
        gateway.rmdir()
    assert result.ending == "idle" and result.first_event_s is not None
    assert processes_mentioning(str(turn)) == []
    assert processes_mentioning("sleep 300") == []


async def test_a_long_output_line_is_read_whole(tmp_path: Path, sandbox: Sandbox) -> None:
    """A CLI's event line can be long (a file it read): it is read whole."""
    turn, gateway = _turn_dir(tmp_path)
    script = "print('x' * 300_000); print('{\"type\": \"result\"}')"
    python = python_for_sandbox()
    command = Command((python, "-c", script), {"PATH": "/usr/bin:/bin"}, Path(python).parent)
    try:
        result = await run_sandboxed(
            sandbox, command, turn_dir=turn, gateway_dir=gateway, limits=Limits(wall_s=30)
        )
    finally:
        gateway.rmdir()
    assert result.ending == "exited"
    lines = result.stdout.splitlines()
    assert len(lines[0]) == 300_000 and lines[1] == b'{"type": "result"}'


def test_the_compile_cache_is_written_only_by_the_warm_up(tmp_path: Path, sandbox: Sandbox) -> None:
    """The start-up warm-up runs a Node CLI's `--version` as a turn's user with
    the cache writable; what it writes is what a turn later reads."""
    cache = tmp_path / "compile-cache"
    cache.mkdir()
    cli = tmp_path / "cli" / "fake-node-cli"
    cli.parent.mkdir()
    cli.write_text(
        f"#!{python_for_sandbox()}\nimport os\n"
        "d = os.path.join(os.environ['NODE_COMPILE_CACHE'], f'v1-{os.getuid()}')\n"
        "os.makedirs(d, exist_ok=True)\nopen(os.path.join(d, 'entry'), 'w').write('compiled')\n"
    )
    cli.chmod(0o755)
    found = Found("gemini", cli, "0.61.0", cli.parent)
    warm_compile_cache(replace(sandbox, compile_cache=cache), found)
    assert (cache / "v1-65534" / "entry").read_text() == "compiled"
    warm_compile_cache(replace(sandbox, compile_cache=None), found)  # none configured: no run
