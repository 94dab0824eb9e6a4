"""What every test runs under (the autouse fixture in tests/conftest.py): none of
the bot's settings inherited from the developer's shell, and no network beyond
this machine, so no test can reach a real model host or GitHub by accident."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable
from typing import Any

import pytest

from testkit.harness.deploy import settings_env_names

SETTINGS_PREFIX = "DEBATE_BOT_"
# The tests' own settings share the prefix but are not the bot's: kept.
TEST_VARIABLES = frozenset({"DEBATE_BOT_TEST_PG_URL"})


PROXY_VARIABLES = frozenset({"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"})


def clear_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every variable Settings would read: the prefixed ones and the provider
    aliases (OPENAI_API_KEY, ANTHROPIC_BASE_URL, …), in any case; and the proxy
    variables the HTTP clients read (bot/core/transport.py), or a developer's proxy
    would carry the tests' loopback calls."""
    read = settings_env_names() | PROXY_VARIABLES
    for name in list(os.environ):
        upper = name.upper()
        if upper in TEST_VARIABLES:
            continue
        if upper.startswith(SETTINGS_PREFIX) or upper in read:
            monkeypatch.delenv(name)


class ForbiddenConnection(RuntimeError):
    """A test tried to reach a host other than this machine.

    Not an OSError, so code that handles network failures does not absorb it."""


def is_local(host: object) -> bool:
    """Loopback, or no host at all (binding a listening socket, say)."""
    if host is None or host in ("", b""):
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%", 1)[0].rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return False  # any other name would need DNS: not this machine
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    # 0.0.0.0 / :: reach this machine when connected to.
    return ip.is_loopback or ip.is_unspecified


class NetworkGuard:
    """Refuses, and records, every attempt to resolve or connect to a host that is
    not this machine. Unix sockets, socket pairs and subprocesses are untouched."""

    def __init__(self) -> None:
        self.refused: list[str] = []

    def check(self, host: object, port: object = None) -> None:
        if is_local(host):
            return
        target = f"{host!r}" + (f" port {port}" if port is not None else "")
        self.refused.append(target)
        raise ForbiddenConnection(
            f"a test tried to reach {target}; tests may only connect to loopback "
            "(testkit/harness/isolation.py)"
        )

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_getaddrinfo = socket.getaddrinfo
        real_connect = socket.socket.connect
        real_connect_ex = socket.socket.connect_ex

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            self.check(host, port)
            return real_getaddrinfo(host, port, *args, **kwargs)

        def guarded(real: Callable[[socket.socket, Any], Any]) -> Callable[..., Any]:
            def connect(sock: socket.socket, address: Any) -> Any:
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    self.check(address[0], address[1])
                return real(sock, address)

            return connect

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(socket.socket, "connect", guarded(real_connect))
        monkeypatch.setattr(socket.socket, "connect_ex", guarded(real_connect_ex))
