"""`debate-bot setup`: register the GitHub App through GitHub's manifest flow.

A local page posts deploy/app.yml (with this host's URLs) to GitHub; GitHub
creates the app and redirects back with a one-time code; the callback checks
the random ``state``, exchanges the code for the app's id, key and webhook
secret, and writes them to ``.env`` (the key inline, so `docker compose` reads
the same file) and to a key file for `helm --set-file` (both 0600).

GitHub must reach the webhook URL: the service's public URL (``--public-url``)
or a webhook-proxy channel (``--webhook-proxy-url``, written as
``DEBATE_BOT_WEBHOOK_PROXY_URL``: the service follows it, as Probot does)."""

from __future__ import annotations

import html
import ipaddress
import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from bot.core.errors import ConfigError, GitHubError
from bot.github.gateway import convert_manifest
from bot.github.manifest import load_app_manifest
from bot.service.web.webhook import WEBHOOK_PATH

CALLBACK_PATH = "/setup/callback"


@dataclass(frozen=True)
class SetupOptions:
    github_url: str = "https://github.com"
    org: str | None = None
    host: str = "127.0.0.1"
    port: int = 3000
    public_url: str | None = None  # where GitHub will send webhooks
    webhook_proxy_url: str | None = None  # or a channel the service follows
    env_file: Path = Path(".env")
    force: bool = False

    @property
    def local_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def on_github_com(self) -> bool:
        return self.github_url.rstrip("/") == "https://github.com"

    @property
    def api_url(self) -> str:
        base = self.github_url.rstrip("/")
        return "https://api.github.com" if self.on_github_com else base + "/api/v3"

    @property
    def webhook_url(self) -> str:
        """Where GitHub posts deliveries: the proxy channel, else the public URL
        (a GitHub Enterprise Server on this network may reach this host)."""
        if self.webhook_proxy_url:
            return self.webhook_proxy_url
        return (self.public_url or self.local_url).rstrip("/") + WEBHOOK_PATH

    @property
    def new_app_url(self) -> str:
        base = self.github_url.rstrip("/")
        owner = f"/organizations/{self.org}" if self.org else ""
        return f"{base}{owner}/settings/apps/new"


def _loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified or address.is_private


def check_options(options: SetupOptions) -> None:
    """Refuse what cannot work before anything is registered: github.com cannot
    deliver webhooks to this machine's loopback (or private) address."""
    for flag, url in (
        ("--public-url", options.public_url),
        ("--webhook-proxy-url", options.webhook_proxy_url),
    ):
        if url is not None and urlsplit(url).scheme not in ("http", "https"):
            raise ConfigError(f"{flag} {url!r}: expected an http(s) URL")
    if options.public_url and options.webhook_proxy_url:
        raise ConfigError("give --public-url or --webhook-proxy-url, not both")
    if not options.on_github_com or options.webhook_proxy_url:
        return
    if options.public_url is None or _loopback(options.public_url):
        given = (
            f"{options.public_url} is not reachable from github.com"
            if options.public_url
            else ("github.com needs a webhook URL it can reach")
        )
        raise ConfigError(
            f"{given}: use --public-url https://YOUR-HOST (where this service will run), "
            "or for trying it on this machine --webhook-proxy-url with a channel from "
            "https://smee.io/new (the service follows it; written as DEBATE_BOT_WEBHOOK_PROXY_URL)"
        )


def check_not_configured(options: SetupOptions) -> None:
    """Never overwrite an existing app's settings without ``--force``."""
    check_options(options)
    if options.force or not options.env_file.exists():
        return
    if any(line.startswith("DEBATE_BOT_APP_ID=") for line in _lines(options.env_file)):
        raise ConfigError(
            f"{options.env_file} already names an app (DEBATE_BOT_APP_ID); "
            "use --force to register a new one and replace its settings"
        )


def manifest_for(options: SetupOptions) -> dict[str, Any]:
    manifest = load_app_manifest()
    homepage = (options.public_url or options.webhook_proxy_url or options.local_url).rstrip("/")
    return {
        **manifest,
        "url": homepage,
        "hook_attributes": {**manifest.get("hook_attributes", {}), "url": options.webhook_url},
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


def _quoted(value: str) -> str:
    """A double-quoted .env value: python-dotenv (the service) and Docker
    Compose's env_file both turn ``\\n`` back into a newline."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n") + '"'


# Written by setup; an older line of any of them is replaced, never kept beside.
SETUP_VARIABLES = (
    "DEBATE_BOT_APP_ID",
    "DEBATE_BOT_PRIVATE_KEY",
    "DEBATE_BOT_PRIVATE_KEY_FILE",
    "DEBATE_BOT_WEBHOOK_SECRET",
    "DEBATE_BOT_GITHUB_API_URL",
    "DEBATE_BOT_WEBHOOK_PROXY_URL",
)


def save_app(options: SetupOptions, app: dict[str, Any]) -> Path:
    """``.env`` lines for the app GitHub created (other lines are kept), and the
    key again as a file, for `helm install --set-file secret.privateKey=…`."""
    slug = str(app.get("slug") or "debate-bot")
    key_file = (options.env_file.parent / f"{slug}.private-key.pem").resolve()
    pem = str(app["pem"])
    _write_private(key_file, pem)
    values = {
        "DEBATE_BOT_APP_ID": str(app["id"]),
        # Inline, not a path: a path on this machine means nothing in a container.
        "DEBATE_BOT_PRIVATE_KEY": _quoted(pem),
        "DEBATE_BOT_WEBHOOK_SECRET": str(app["webhook_secret"]),
        "DEBATE_BOT_GITHUB_API_URL": options.api_url,
    }
    if options.webhook_proxy_url:
        values["DEBATE_BOT_WEBHOOK_PROXY_URL"] = options.webhook_proxy_url
    kept = [
        line
        for line in _lines(options.env_file)
        if line.split("=", 1)[0].strip() not in SETUP_VARIABLES
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
