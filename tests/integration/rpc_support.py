"""Helpers for the socket-service tests: real servers on short Unix-socket paths.

AF_UNIX paths are limited to ~107 bytes, and pytest's tmp_path is long, so sockets live in a
fresh directory under /tmp while the workspace stays in tmp_path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from lcg.config import Settings
from lcg.service.rpc.client import RpcClient
from lcg.service.rpc.server import RpcServer
from lcg.telemetry import ListSink

WAIT_SECONDS = 60.0


@contextlib.contextmanager
def short_socket_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(dir="/tmp", prefix="lcg-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class ServerThread:
    """An `RpcServer` running its own event loop in a thread."""

    def __init__(self, server: RpcServer) -> None:
        self.server = server
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name="rpc-server", daemon=True)

    def _run(self) -> None:
        try:
            anyio.run(self.server.serve)
        except BaseException as exc:
            self.errors.append(exc)

    def start(self) -> None:
        self.thread.start()
        while not self.server.bound.wait(0.05):
            assert self.thread.is_alive(), self.errors

    def stop(self) -> None:
        self.server.shutdown_threadsafe()
        self.thread.join(WAIT_SECONDS)
        assert not self.thread.is_alive(), "server did not stop"


@contextlib.contextmanager
def running_server(
    settings: Settings, *, server_cls: type[RpcServer] = RpcServer, **kwargs: Any
) -> Iterator[tuple[RpcServer, Path, ListSink]]:
    """Start a server for `settings` on a short socket path; wait until its engine is settled."""
    events = ListSink()
    with short_socket_dir() as directory:
        path = directory / "sub" / "s.sock"
        server = server_cls(
            settings, socket_path=path, events=events, handle_signals=False, **kwargs
        )
        runner = ServerThread(server)
        runner.start()
        try:
            yield server, path, events
        finally:
            runner.stop()
        assert not runner.errors, runner.errors


def wait_settled(server: RpcServer) -> None:
    assert server.settled.wait(WAIT_SECONDS)


def raw_connect(path: Path, timeout: float = 30.0) -> tuple[socket.socket, Any]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(str(path))
    return sock, sock.makefile("rb")


def send_line(sock: socket.socket, message: Any) -> None:
    data = message if isinstance(message, bytes) else json.dumps(message).encode()
    sock.sendall(data + b"\n")


def read_message(reader: Any) -> dict[str, Any]:
    line = reader.readline()
    assert line, "connection closed"
    value = json.loads(line)
    assert isinstance(value, dict)
    return value


def request(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}


def wait_healthy(path: Path, *, accept_degraded: bool = False) -> dict[str, Any]:
    """Poll health_check until the service settles (the documented readiness probe)."""
    deadline = time.monotonic() + WAIT_SECONDS
    last: Any = None
    while time.monotonic() < deadline:
        try:
            with RpcClient(path, timeout=10) as client:
                last = client.call("health_check")
        except OSError as exc:
            last = exc
        else:
            if last["state"] == "healthy" or (accept_degraded and last["state"] == "degraded"):
                return dict(last)
        time.sleep(0.05)
    raise AssertionError(f"service did not become healthy: {last!r}")


class ServiceProcess:
    """`lcg serve` as a subprocess; telemetry (stderr) goes to a file so it never blocks."""

    def __init__(
        self,
        workdir: Path,
        socket_path: Path,
        *extra_args: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.socket_path = socket_path
        self.extra_args = extra_args
        self.env = env or {}  # LCG_* settings of this service (the developer's are dropped)
        self.stderr_path = workdir / f"serve-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ServiceProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LCG_", "GRAPHITI_"))}
        env["LCG_HOME"] = str(self.workdir / ".lcg")
        env["LCG_KUZU_BUFFER_POOL_MB"] = "256"
        env.update(self.env)
        with self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    *("-m", "lcg.cli", "serve", "--socket", str(self.socket_path)),
                    *self.extra_args,
                ],
                cwd=self.workdir,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        return self

    def send_signal(self, signum: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def wait(self, timeout: float = WAIT_SECONDS) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, signum: int = signal.SIGTERM) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.send_signal(signum)
        try:
            return self.wait()
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.stderr_path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out
