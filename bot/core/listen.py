"""The listening socket of `serve`, `web`, `worker` and `setup`, bound before
anything says it is ready, so a busy port is one line naming the flag to use
instead (not a traceback from inside the web server, after "ready")."""

from __future__ import annotations

import errno
import socket

from bot.core.errors import ConfigError


def bind_socket(host: str, port: int, *, flag: str = "--port", setting: str = "") -> socket.socket:
    """A TCP socket bound to ``host:port`` (the web server listens on it).

    ``flag`` and ``setting`` name where the port comes from, for the fix."""
    where = f"{flag} N" + (f" (or {setting})" if setting else "")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror}; use --host with an address of "
            "this machine (127.0.0.1, or 0.0.0.0 for every interface)"
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    # As uvicorn does: a port left in TIME_WAIT by the last run is free to take.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        reason = (exc.strerror or type(exc).__name__).lower()
        if exc.errno == errno.EADDRINUSE:
            fix = f"another process listens there (a service running?): stop it, or use {where}"
        elif exc.errno == errno.EACCES:
            fix = f"ports below 1024 need privileges: use {where} with a port of 1024 or more"
        elif exc.errno == errno.EADDRNOTAVAIL:
            fix = "this machine has no such address: use --host 127.0.0.1 (0.0.0.0: every one)"
        else:
            fix = f"use {where}, or --host"
        raise ConfigError(f"cannot listen on {host}:{port}: {reason}; {fix}") from None
    sock.set_inheritable(True)
    return sock
