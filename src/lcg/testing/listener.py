"""What the scripted servers share: listening on loopback TCP and/or a Unix socket, each
request in its own thread, started and stopped as a context manager. Standard library only."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Self

__all__ = ["JsonHandler", "Listener"]


class _QuietErrors:
    """A client that gave up (timeout, cancellation) is not a server error worth printing.

    Also counts the connections accepted and keeps the open ones, so that `Listener.stop`
    closes them as a server process that exits does (a keep-alive client notices).
    """

    listener: Listener

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            traceback.print_exc(file=sys.stderr)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.listener._opened(request)
        return True

    def shutdown_request(self, request: Any) -> None:
        self.listener._closed(request)
        super().shutdown_request(request)  # type: ignore[misc]  # the socketserver base's


class _TcpHTTPServer(_QuietErrors, ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog (5) drops SYNs of a burst: a 1 s retransmit


class _UnixHTTPServer(_QuietErrors, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 128


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, JSON answers, no request log, no Nagle stalls."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate writes: Nagle with delayed ACKs would stall each
        # answer ~40 ms on TCP (a Unix socket has no such option).
        if self.connection.family != socket.AF_UNIX:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def address_string(self) -> str:
        # A Unix-socket peer has no (host, port) address.
        return str(self.client_address[0]) if self.client_address else "uds"

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Listener:
    """Serve `self._handler()` on 127.0.0.1 (an ephemeral port) and/or a Unix socket."""

    def __init__(self, *, tcp: bool, uds_path: str | os.PathLike[str] | None) -> None:
        if not tcp and uds_path is None:
            raise ValueError(f"{type(self).__name__} needs tcp=True or a uds_path")
        self._tcp = tcp
        self._uds_path = Path(uds_path) if uds_path is not None else None
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self._port: int | None = None
        self._conn_lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._accepted = 0

    @property
    def accepted(self) -> int:
        """Connections accepted since the first start (restarts included)."""
        with self._conn_lock:
            return self._accepted

    @property
    def open_connections(self) -> int:
        """Connections accepted and not closed yet."""
        with self._conn_lock:
            return len(self._open)

    def _opened(self, connection: socket.socket) -> None:
        with self._conn_lock:
            self._accepted += 1
            self._open.add(connection)

    def _closed(self, connection: socket.socket) -> None:
        with self._conn_lock:
            self._open.discard(connection)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server is not listening on TCP (start it, or tcp=True)")
        return self._port

    @property
    def uds_path(self) -> Path:
        if self._uds_path is None:
            raise RuntimeError("the server has no Unix socket (pass uds_path)")
        return self._uds_path

    def start(self) -> Self:
        """Listen; after a `stop`, on the same port and socket path (a server restart)."""
        handler = self._handler()
        if self._tcp:
            tcp_server = _TcpHTTPServer(("127.0.0.1", self._port or 0), handler)
            self._port = int(tcp_server.server_address[1])
            self._servers.append(tcp_server)
        if self._uds_path is not None:
            if self._uds_path.exists():
                self._uds_path.unlink()
            self._servers.append(_UnixHTTPServer(str(self._uds_path), handler))
        for server in self._servers:
            server.listener = self  # type: ignore[attr-defined]  # both classes mix it in
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop listening and close the open connections: later connections are refused."""
        for server in self._servers:
            server.shutdown()
        with self._conn_lock:
            still_open, self._open = list(self._open), set()
        for connection in still_open:
            # A keep-alive connection idles in its handler's read: end it as an exiting
            # process would (the handler thread then returns, and server_close can join it).
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for server in self._servers:
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers.clear()
        self._threads.clear()
        if self._uds_path is not None and self._uds_path.exists():
            self._uds_path.unlink()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
