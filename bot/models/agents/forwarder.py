"""The forwarder: the only way out of an agent's sandbox.

``SOURCE`` runs inside the sandbox (``python3 -I -S -c SOURCE CONFIG``, the
standard library only): it listens on the sandbox's own loopback, relays each
connection to the gateway's unix socket (bound into the sandbox), then starts
the CLI with ``{port}`` in its arguments and environment replaced by the port it
got, and exits with the CLI's exit code. Inside a network namespace with
nothing else on it, the CLI can reach the gateway and nothing else.
"""

from __future__ import annotations

from typing import Final

SOURCE: Final = r"""
import json, os, socket, subprocess, sys, threading
cfg = json.loads(sys.argv[1])
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", cfg["port"]))
srv.listen(64)
port = srv.getsockname()[1]

def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

def relay(conn):
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(cfg["socket"])
    except OSError:
        conn.close()
        return
    t = threading.Thread(target=pump, args=(up, conn), daemon=True)
    t.start()
    pump(conn, up)
    t.join()
    conn.close()
    up.close()

def accept():
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=relay, args=(conn,), daemon=True).start()

threading.Thread(target=accept, daemon=True).start()
fill = lambda s: s.replace("{port}", str(port))
argv = [fill(a) for a in cfg["argv"]]
env = {k: fill(v) for k, v in cfg["env"].items()}
stdin = open(cfg["stdin"], "rb") if cfg.get("stdin") else subprocess.DEVNULL
proc = subprocess.Popen(argv, env=env, cwd=cfg["cwd"], stdin=stdin)
sys.exit(proc.wait())
"""
