"""`debate-bot setup`: the manifest flow over real HTTP, the fake GitHub playing
github.com's "new app from manifest" page and the REST conversion."""

from __future__ import annotations

import html
import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dotenv import dotenv_values

from testkit.fakes.github_server import FakeGitHub
from testkit.harness.service import APP_ID, free_port

GHES_PREFIX = "/api/v3"


@pytest.fixture
def github(app_keys: tuple[str, str]) -> Iterator[FakeGitHub]:
    private, public = app_keys
    with FakeGitHub(app_id=APP_ID, public_key_pem=public, api_prefix=GHES_PREFIX) as gh:
        gh.manifest_private_key = private
        gh.add_installation(1)
        yield gh


class Setup:
    """`debate-bot setup` as a subprocess, in its own folder."""

    def __init__(self, cwd: Path, github: FakeGitHub, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "setup", "--github-url", github.url,
             "--port", str(self.port), *args],
            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url + "/setup", timeout=0.5)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError(self.proc.communicate()[1])

    def form(self) -> tuple[str, str]:
        page = httpx.get(self.url + "/setup").text
        action = re.search(r'<form method="post" action="([^"]+)"', page)
        value = re.search(r'name="manifest" value="([^"]+)"', page)
        assert action and value
        return html.unescape(action.group(1)), html.unescape(value.group(1))

    def finish(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=20)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def test_the_manifest_flow_writes_the_app_settings(github: FakeGitHub, tmp_path: Path) -> None:
    setup = Setup(tmp_path, github, "--org", "octo-org", "--public-url", "https://bot.example")
    try:
        action, manifest_json = setup.form()
        assert action.startswith(f"{github.url}/organizations/octo-org/settings/apps/new?state=")
        manifest = json.loads(manifest_json)
        assert manifest["hook_attributes"]["url"] == "https://bot.example/api/github/webhooks"
        assert manifest["redirect_url"] == f"{setup.url}/setup/callback"
        assert manifest["default_permissions"]["issues"] == "write"
        # The browser posts the form; GitHub redirects back with a code and the state.
        page = httpx.post(action, data={"manifest": manifest_json}, follow_redirects=True)
        assert page.status_code == 200, page.text
        assert "installations/new" in page.text
        code, out, _ = setup.finish()
    finally:
        setup.kill()
    assert code == 0
    assert f"{github.url}/apps/{github.app_slug}/installations/new" in out
    # Read as the service (python-dotenv) and Docker Compose's env_file read it.
    env = dotenv_values(tmp_path / ".env")
    assert env["DEBATE_BOT_APP_ID"] == str(APP_ID)
    assert env["DEBATE_BOT_WEBHOOK_SECRET"] == github.manifest_webhook_secret
    # GitHub Enterprise Server: the service must call its API, not api.github.com.
    assert env["DEBATE_BOT_GITHUB_API_URL"] == github.url + GHES_PREFIX
    # The key inline (a host path means nothing in a container), and as a file for Helm.
    assert env["DEBATE_BOT_PRIVATE_KEY"] == github.manifest_private_key
    assert "DEBATE_BOT_PRIVATE_KEY_FILE" not in env
    key = tmp_path / f"{github.app_slug}.private-key.pem"
    assert key.read_text() == github.manifest_private_key
    for path in (key, tmp_path / ".env"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # What setup wrote is enough for GitHub to accept the app (doctor reads .env).
    doctor = subprocess.run(
        [sys.executable, "-m", "bot", "doctor"],
        cwd=tmp_path,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("DEBATE_BOT_")},
            "COLUMNS": "200",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    rows = [ln for ln in doctor.stdout.splitlines() if "GitHub accepts the app" in ln]
    assert rows and "✓" in rows[0], doctor.stdout
    assert any("✓" in ln and "app permissions" in ln for ln in doctor.stdout.splitlines())


def test_a_wrong_state_is_400_and_saves_nothing(github: FakeGitHub, tmp_path: Path) -> None:
    setup = Setup(tmp_path, github)
    try:
        for query in ("?code=abc&state=forged", "?code=abc"):
            r = httpx.get(setup.url + "/setup/callback" + query)
            assert r.status_code == 400 and "state" in r.text
        assert not (tmp_path / ".env").exists()
        # A code GitHub does not know: GitHub's refusal is shown, nothing saved.
        action, _ = setup.form()
        state = action.split("state=", 1)[1]
        r = httpx.get(setup.url + f"/setup/callback?code=unknown&state={state}")
        assert r.status_code == 502 and "404" in r.text and "Not Found" in r.text
        assert not (tmp_path / ".env").exists()
    finally:
        setup.kill()


def test_an_existing_app_is_kept_without_force(github: FakeGitHub, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("DEBATE_BOT_APP_ID=1\nOPENAI_API_KEY=sk-keep\n")
    result = subprocess.run(
        [sys.executable, "-m", "bot", "setup", "--github-url", github.url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "--force" in result.stderr
    assert (tmp_path / ".env").read_text() == "DEBATE_BOT_APP_ID=1\nOPENAI_API_KEY=sk-keep\n"

    setup = Setup(tmp_path, github, "--force")
    try:
        action, manifest_json = setup.form()
        httpx.post(action, data={"manifest": manifest_json}, follow_redirects=True)
        code, _, _ = setup.finish()
    finally:
        setup.kill()
    assert code == 0
    text = (tmp_path / ".env").read_text()
    assert "OPENAI_API_KEY=sk-keep" in text  # other settings are kept
    assert f"DEBATE_BOT_APP_ID={APP_ID}" in text and "DEBATE_BOT_APP_ID=1\n" not in text


def test_github_com_needs_a_url_it_can_reach(tmp_path: Path) -> None:
    """github.com cannot post to this machine's loopback: refused with the advice,
    before anything listens; a proxy channel is the way to try it locally."""
    for args in (
        [],
        ["--public-url", "http://localhost:3000"],
        ["--public-url", "http://10.0.0.5"],
    ):
        result = subprocess.run(
            [sys.executable, "-m", "bot", "setup", "--port", str(free_port()), *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        assert "--webhook-proxy-url" in result.stderr and "--public-url" in result.stderr
        assert "Traceback" not in result.stderr and not result.stdout


def test_a_proxy_channel_is_the_webhook_url_and_is_written(
    github: FakeGitHub, tmp_path: Path
) -> None:
    channel = "https://smee.io/aBcDeF123"
    setup = Setup(tmp_path, github, "--webhook-proxy-url", channel)
    try:
        action, manifest_json = setup.form()
        assert json.loads(manifest_json)["hook_attributes"]["url"] == channel
        httpx.post(action, data={"manifest": manifest_json}, follow_redirects=True)
        code, out, _ = setup.finish()
    finally:
        setup.kill()
    assert code == 0
    env = dotenv_values(tmp_path / ".env")
    assert env["DEBATE_BOT_WEBHOOK_PROXY_URL"] == channel
    assert "debate-bot serve" in out


def test_a_busy_port_is_one_line_before_the_page_is_offered(tmp_path: Path) -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "bot", "setup", "--port", str(port),
             "--public-url", "https://bot.example"],
            cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    assert result.returncode == 2
    assert "address already in use" in result.stderr and "--port" in result.stderr
    assert "Open" not in result.stdout
