"""The agent CLIs we seat: how each is found, started headless and read
(docs/agents-operators.md; measured facts in docs/agents-operators.md,
"What each CLI does").

Each CLI's own restrictions stay on (read-only tools, no web search, no MCP,
hooks or plugins, no telemetry or update checks), but nothing relies on them:
the sandbox is the boundary (``sandbox.py``). Its prompt comes on standard
input from a file in its home (never as an argument: a prompt can pass the
kernel's 128 KiB limit on one), and its final message is read from its
stdout's JSON events, never from what it says it cost.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bot.core.errors import AgentUnavailable
from bot.engine.agents import Cli
from bot.models.agents.sandbox import HOME, SANDBOX_TMP, WORKSPACE, Command

PROMPT_FILE: Final = f"{HOME}/prompt.md"
GATEWAY_URL: Final = "http://127.0.0.1:{port}"
QUIET: Final = {"LANG": "C.UTF-8", "NO_COLOR": "1", "TERM": "dumb"}


@dataclass(frozen=True)
class Found:
    cli: Cli
    exe: Path
    version: str
    install_dir: Path  # bound read-only into the sandbox


@dataclass(frozen=True)
class Answer:
    text: str
    error: str = ""  # why no usable answer: the CLI's own words (logs only)


@dataclass(frozen=True)
class CliSpec:
    cli: Cli
    setting: str  # DEBATE_BOT_AGENT_<SETTING>_BIN / _MODEL
    names: tuple[str, ...]  # executables looked for on PATH
    min_version: str
    on_node = False  # a Node.js program: its start is sped by the compile cache

    def command(self, found: Found, *, model: str, token: str, max_turns: int) -> Command:
        raise NotImplementedError

    def answer(self, stdout: bytes) -> Answer:
        raise NotImplementedError

    def home_files(self) -> dict[str, str]:
        """Files written into the turn's empty home before the CLI starts."""
        return {}


def _events(stdout: bytes) -> list[dict[str, object]]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith(b"{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def path_env(found: Found) -> str:
    """PATH inside the sandbox for ``found``."""
    return _dir_path(found.exe, found.install_dir)


def _dir_path(exe: Path, install_dir: Path) -> str:
    """PATH for a CLI: the Node.js pinned beside the CLIs first, when installed
    (its own folder, which holds nothing else: ``.bin`` links every package)."""
    node = install_dir / ".bin" / "node"
    first = f"{node.resolve().parent}:" if node.is_file() else ""
    return f"{first}{exe.parent}:/usr/local/bin:/usr/bin:/bin"


class ClaudeCode(CliSpec):
    def command(self, found: Found, *, model: str, token: str, max_turns: int) -> Command:
        argv = [
            str(found.exe), "-p",
            "--output-format", "stream-json", "--verbose",
            "--no-session-persistence", "--strict-mcp-config", "--disable-slash-commands",
            "--max-turns", str(max_turns),
            "--tools", "Read,Grep,Glob", "--allowedTools", "Read,Grep,Glob",
            "--permission-mode", "dontAsk",
        ]  # fmt: skip
        if model:
            argv.append(f"--model={model}")
        env = {
            **QUIET,
            "PATH": path_env(found),
            "HOME": HOME,
            "ANTHROPIC_BASE_URL": GATEWAY_URL,
            "ANTHROPIC_API_KEY": token,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_BUG_COMMAND": "1",
            # The gateway is the retry layer: a refused call ends the turn at once.
            "CLAUDE_CODE_MAX_RETRIES": "1",
        }
        return Command(tuple(argv), env, found.install_dir, stdin=PROMPT_FILE)

    def answer(self, stdout: bytes) -> Answer:
        for event in reversed(_events(stdout)):
            if event.get("type") != "result":
                continue
            text = event.get("result")
            if event.get("is_error") or not isinstance(text, str):
                return Answer("", f"result event is an error ({event.get('subtype')})")
            return Answer(text)
        return Answer("", "no result event")


class Codex(CliSpec):
    def command(self, found: Found, *, model: str, token: str, max_turns: int) -> Command:
        argv = [
            str(found.exe), "exec", "--json", "--ephemeral", "--skip-git-repo-check",
            "--ignore-user-config", "--ignore-rules", "-C", WORKSPACE,
            "--color", "never", "--sandbox", "read-only",
            "-c", "model_provider=gw",
            "-c", "model_providers.gw.name=gw",
            "-c", f"model_providers.gw.base_url={GATEWAY_URL}/v1",
            "-c", "model_providers.gw.wire_api=responses",
            "-c", "model_providers.gw.env_key=GW_TOKEN",
            "-c", "model_providers.gw.request_max_retries=1",
            "-c", "model_providers.gw.stream_max_retries=1",
            "-c", "analytics.enabled=false",
            "-c", "web_search=disabled",
            "-c", "mcp_servers={}",
        ]  # fmt: skip
        if model:
            argv.append(f"--model={model}")
        argv.append("-")  # the prompt from standard input
        env = {
            **QUIET,
            "PATH": path_env(found),
            "HOME": HOME,
            "CODEX_HOME": f"{HOME}/.codex",  # apart from TMPDIR: its sandbox breaks there
            "TMPDIR": SANDBOX_TMP,
            "GW_TOKEN": token,
        }
        return Command(tuple(argv), env, found.install_dir, stdin=PROMPT_FILE)

    def answer(self, stdout: bytes) -> Answer:
        text = ""
        for event in _events(stdout):
            item = event.get("item")
            if event.get("type") == "item.completed" and isinstance(item, dict):
                said = item.get("text")
                if item.get("type") == "agent_message" and isinstance(said, str):
                    text = said
            if event.get("type") in ("turn.failed", "error"):
                return Answer("", f"{event.get('type')}: {str(event)[:300]}")
        return Answer(text) if text.strip() else Answer("", "no agent_message item")


# Gemini CLI's user settings (measured at 0.61.0): the API-key auth (the base
# URL alone selects an auth the CLI then rejects), no telemetry, updates, IDE,
# extensions, MCP, skills or hooks, four read-only tools, and no `.env` read
# from the workspace. `--skip-trust` (never GEMINI_CLI_TRUST_WORKSPACE, which
# applies the repository's own `.gemini/settings.json`).
GEMINI_SETTINGS: Final = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "general": {
        "enableAutoUpdate": False,
        "enableAutoUpdateNotification": False,
        "checkpointing": {"enabled": False},
    },
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "ide": {"enabled": False},
    "admin": {"extensions": {"enabled": False}, "mcp": {"enabled": False},
              "skills": {"enabled": False}},
    "hooksConfig": {"enabled": False},
    "skills": {"enabled": False},
    "mcp": {"allowed": ["none"]},
    "tools": {"core": ["read_file", "list_directory", "glob", "grep_search"]},
    "advanced": {"ignoreLocalEnv": True},
}  # fmt: skip


class Gemini(CliSpec):
    on_node = True

    def command(self, found: Found, *, model: str, token: str, max_turns: int) -> Command:
        argv = [
            # stream-json: events as they happen (json says nothing until the end,
            # and the first-event timeout could not tell a slow turn from a hung one).
            str(found.exe), "--output-format", "stream-json", "--skip-trust",
            "--prompt", "Do the task given above.",
        ]  # fmt: skip
        if model:
            argv.append(f"--model={model}")
        env = {
            **QUIET,
            "PATH": path_env(found),
            "HOME": HOME,
            "GEMINI_API_KEY": token,
            "GOOGLE_GEMINI_BASE_URL": GATEWAY_URL,
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }
        return Command(tuple(argv), env, found.install_dir, stdin=PROMPT_FILE)

    def home_files(self) -> dict[str, str]:
        return {".gemini/settings.json": json.dumps(GEMINI_SETTINGS)}

    def answer(self, stdout: bytes) -> Answer:
        parts: list[str] = []
        for event in _events(stdout):
            kind = event.get("type")
            if kind == "message" and event.get("role") == "assistant":
                content = event.get("content")
                parts.append(content if isinstance(content, str) else "")
            elif kind == "result" and event.get("status") not in (None, "success"):
                return Answer("", f"result: {event.get('status')}")
        text = "".join(parts)
        return Answer(text) if text.strip() else Answer("", "no assistant message")


CLI_SPECS: Final[dict[Cli, CliSpec]] = {
    "claude-code": ClaudeCode("claude-code", "CLAUDE_CODE", ("claude",), "2.1.332"),
    "codex": Codex("codex", "CODEX", ("codex",), "0.171.0"),
    "gemini": Gemini("gemini", "GEMINI", ("gemini",), "0.61.0"),
}


def version_tuple(text: str) -> tuple[int, ...]:
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(p) for p in found.groups()) if found else ()


def find_cli(spec: CliSpec, configured: str | None, environ: Mapping[str, str]) -> Found:
    """The CLI's executable (the setting, else PATH), its version checked against
    the pinned minimum. AgentUnavailable names the fix."""
    exe = configured or next(
        (w for n in spec.names if (w := shutil.which(n, path=environ.get("PATH"))) is not None),
        None,
    )
    setting = f"DEBATE_BOT_AGENT_{spec.setting}_BIN"
    if exe is None or not os.access(exe, os.X_OK):
        raise AgentUnavailable(
            f"agent:{spec.cli}: the CLI is not installed (set {setting} or put it on PATH)",
            cause="cli",
        )
    path = Path(exe).resolve()
    root = install_root(path)
    try:
        out = subprocess.run(  # noqa: S603  (the operator's own executable)
            [str(path), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env={
                "PATH": _dir_path(path, root),
                "HOME": "/nonexistent",
                **QUIET,
            },
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AgentUnavailable(
            f"agent:{spec.cli}: the CLI does not run ({type(exc).__name__})", cause="cli"
        ) from None
    version = version_tuple(out.stdout + out.stderr)
    if not version or version < version_tuple(spec.min_version):
        shown = ".".join(map(str, version)) or "unknown"
        raise AgentUnavailable(
            f"agent:{spec.cli}: version {shown} is older than {spec.min_version} "
            f"(install {spec.min_version} or newer)",
            cause="cli",
        )
    return Found(spec.cli, path, ".".join(map(str, version)), root)


def install_root(exe: Path) -> Path:
    """The folder to bind for a CLI, read-only: its ``node_modules`` when it lives
    in one (never that folder's parent: an `npm install --prefix ~` would bind the
    home with it), else its own folder, which must not be a home or the root."""
    for parent in exe.parents:
        if parent.name == "node_modules":
            return parent
    folder = exe.parent
    if folder == Path("/") or folder == Path.home() or folder.parent == Path("/home"):
        raise AgentUnavailable(
            f"agent CLI {exe.name}: its folder would be bound into the sandbox whole; "
            "install it in a folder of its own",
            cause="cli",
        )
    return folder
