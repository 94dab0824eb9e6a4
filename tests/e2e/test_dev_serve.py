"""`python3 dev.py serve`: the service itself, so a signal to it stops the service
(it used to leave `debate-bot serve` running), and it takes serve's flags."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from testkit.harness.service import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_sigterm_to_dev_py_stops_the_service(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBATE_BOT_")}
    env["DEBATE_BOT_DATABASE_URL"] = f"sqlite:///{tmp_path / 'bot.db'}"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "dev.py"), "serve", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise AssertionError("dev.py serve did not start")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0  # the service drained and exited, not only dev.py
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5)
            raise AssertionError("something still serves the port")
        except httpx.ConnectError:
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
