"""`debate-bot setup`: register the GitHub App through GitHub's manifest flow.

A local page posts deploy/app.yml (with this host's URLs) to GitHub; GitHub
creates the app and redirects back with a one-time code; the callback checks
the random ``state``, exchanges the code for the app's id, key and webhook
secret, and writes them to a key file and ``.env`` (both 0600)."""

from __future__ import annotations

import html
import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from bot.app.webhook import WEBHOOK_PATH
from bot.errors import ConfigError, GitHubError
from bot.github.gateway import convert_manifest
from bot.manifest import load_app_manifest

CALLBACK_PATH = "/setup/callback"


@dataclass(frozen=True)
class SetupOptions:
    github_url: str = "https://github.com"
    org: str | None = None
    host: str = "127.0.0.1"
    port: int = 3000
    public_url: str | None = None  # where GitHub will send webhooks; default: this host
    env_file: Path = Path(".env")
    force: bool = False

    @property
    def local_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        base = self.github_url.rstrip("/")
        return "https://api.github.com" if base == "https://github.com" else base + "/api/v3"

    @property
    def new_app_url(self) -> str:
        base = self.github_url.rstrip("/")
        owner = f"/organizations/{self.org}" if self.org else ""
        return f"{base}{owner}/settings/apps/new"


def check_not_configured(options: SetupOptions) -> None:
    """Never overwrite an existing app's settings without ``--force``."""
    if options.force or not options.env_file.exists():
        return
    if any(line.startswith("DEBATE_BOT_APP_ID=") for line in _lines(options.env_file)):
        raise ConfigError(
            f"{options.env_file} already names an app (DEBATE_BOT_APP_ID); "
            "use --force to register a new one and replace its settings"
        )


def manifest_for(options: SetupOptions) -> dict[str, Any]:
    manifest = load_app_manifest()
    public = (options.public_url or options.local_url).rstrip("/")
    return {
        **manifest,
        "url": public,
        "hook_attributes": {**manifest.get("hook_attributes", {}), "url": public + WEBHOOK_PATH},
        "redirect_url": options.local_url + CALLBACK_PATH,
    }


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _write_private(path: Path, text: str) -> None:
    """Create or replace ``path`` readable by its owner only, from the first byte."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    path.chmod(0o600)


def save_app(options: SetupOptions, app: dict[str, Any]) -> Path:
    """The key file and ``.env`` lines for the app GitHub created; other lines are kept."""
    slug = str(app.get("slug") or "debate-bot")
    key_file = (options.env_file.parent / f"{slug}.private-key.pem").resolve()
    _write_private(key_file, str(app["pem"]))
    values = {
        "DEBATE_BOT_APP_ID": str(app["id"]),
        "DEBATE_BOT_PRIVATE_KEY_FILE": str(key_file),
        "DEBATE_BOT_WEBHOOK_SECRET": str(app["webhook_secret"]),
    }
    kept = [
        line
        for line in _lines(options.env_file)
        if line.split("=", 1)[0] not in {*values, "DEBATE_BOT_PRIVATE_KEY"}
    ]
    _write_private(
        options.env_file, "\n".join([*kept, *(f"{k}={v}" for k, v in values.items())]) + "\n"
    )
    return key_file


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<h1>{html.escape(title)}</h1>{body}",
        status_code=status,
    )


def create_setup_app(options: SetupOptions, on_done: Callable[[str], None]) -> FastAPI:
    """``on_done`` receives the installation URL once the app is saved."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    state = secrets.token_urlsafe(24)
    manifest = json.dumps(manifest_for(options))

    @app.get("/")
    async def root() -> Response:
        return RedirectResponse("/setup")

    @app.get("/setup")
    async def start() -> HTMLResponse:
        action = f"{options.new_app_url}?state={state}"
        return _page(
            "Register debate-bot on GitHub",
            f"<p>GitHub will create the app with the permissions and events of "
            f"<code>deploy/app.yml</code>, then send you back here.</p>"
            f'<form method="post" action="{html.escape(action)}">'
            f'<input type="hidden" name="manifest" value="{html.escape(manifest)}">'
            f'<button type="submit">Create the GitHub App</button></form>',
        )

    @app.get(CALLBACK_PATH)
    async def callback(request: Request) -> HTMLResponse:
        code = request.query_params.get("code", "")
        if not secrets.compare_digest(request.query_params.get("state", ""), state):
            return _page("Wrong or missing state", "<p>Start again from /setup.</p>", 400)
        if not code:
            return _page("Missing code", "<p>GitHub sent no code; start again.</p>", 400)
        try:
            created = await convert_manifest(options.api_url, code)
            key_file = save_app(options, created)
        except GitHubError as exc:
            return _page("GitHub refused the app", f"<p>{html.escape(str(exc))}</p>", 502)
        except (KeyError, OSError) as exc:
            return _page("Could not save the app", f"<p>{html.escape(type(exc).__name__)}</p>", 500)
        install = f"{str(created.get('html_url') or '').rstrip('/')}/installations/new"
        on_done(install)
        return _page(
            f"Created {created.get('slug')}",
            f"<p>Saved to <code>{html.escape(str(options.env_file))}</code> and "
            f"<code>{html.escape(str(key_file))}</code>.</p>"
            f'<p>Now <a href="{html.escape(install)}">install it on a repository</a>, '
            f"then start <code>debate-bot serve</code>.</p>",
        )

    return app
