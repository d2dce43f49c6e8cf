"""A scripted OpenAI-compatible embeddings server that really listens (tests, benchmarks).

`ScriptedEmbeddingServer` answers `POST /v1/embeddings` on 127.0.0.1 (an ephemeral port)
and/or a Unix socket with deterministic vectors: lcg's hash embedder at `dim` dimensions, so
the same text always gets the same vector and similar spellings land near each other. It
counts requests and texts, and can misbehave on demand:

- `fail_next(status, times)`: the next requests get that HTTP status;
- `dim` can be changed while running (a server that starts returning another dimension);
- `max_batch`: requests with more inputs than this are refused with 413;
- `reported_model`: the `model` named in responses (default: the one requested).

    with ScriptedEmbeddingServer(dim=64) as server:
        embedder = connect_http(Endpoint(url=server.url), model=None, dim=None)
        embedder.embed(["a", "b"])
        assert server.count == 2          # the startup probe, then one batch

Uses only the standard library and lcg's own numpy-based hash embedder (no extras).
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from lcg.embedding.hashing import HashEmbedder

__all__ = ["ScriptedEmbeddingServer"]


class ScriptedEmbeddingServer:
    """Deterministic `/v1/embeddings` over TCP (`url`) and/or a Unix socket (`uds_path`)."""

    def __init__(
        self,
        dim: int = 384,
        *,
        tcp: bool = True,
        uds_path: Path | str | None = None,
        reported_model: str | None = None,
        max_batch: int | None = None,
    ) -> None:
        self.dim = dim
        self.reported_model = reported_model
        self.max_batch = max_batch
        self._tcp = tcp
        self._uds_path = Path(uds_path) if uds_path is not None else None
        self._lock = threading.Lock()
        self._failures: deque[int] = deque()
        self.batches: list[list[str]] = []  # the inputs of every embeddings request, in order
        self.models: list[str] = []  # the model each request named
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self._port: int | None = None

    # -- inspection and control --------------------------------------------------------------

    @property
    def count(self) -> int:
        """Embeddings requests received (failed ones included)."""
        with self._lock:
            return len(self.batches)

    @property
    def texts(self) -> int:
        """Texts received over all requests."""
        with self._lock:
            return sum(len(b) for b in self.batches)

    def fail_next(self, status: int = 500, times: int = 1) -> None:
        """Answer the next `times` requests with HTTP `status`."""
        with self._lock:
            self._failures.extend([status] * times)

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT` (the client appends `/v1/embeddings`)."""
        if self._port is None:
            raise RuntimeError("the server has no TCP listener (tcp=False, or not started)")
        return f"http://127.0.0.1:{self._port}"

    @property
    def uds_path(self) -> Path:
        if self._uds_path is None:
            raise RuntimeError("the server has no Unix socket (uds_path not given)")
        return self._uds_path

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ScriptedEmbeddingServer:
        handler = _make_handler(self)
        if self._tcp:
            tcp_server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            tcp_server.daemon_threads = True
            self._port = int(tcp_server.server_address[1])
            self._servers.append(tcp_server)
        if self._uds_path is not None:
            if self._uds_path.exists():
                self._uds_path.unlink()
            self._servers.append(_UnixHTTPServer(str(self._uds_path), handler))
        for server in self._servers:
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop listening: later connections are refused."""
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers.clear()
        self._threads.clear()
        if self._uds_path is not None and self._uds_path.exists():
            self._uds_path.unlink()

    def __enter__(self) -> ScriptedEmbeddingServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- request handling (server threads) -----------------------------------------------------

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        raw = body.get("input")
        inputs = [raw] if isinstance(raw, str) else raw
        model = body.get("model")
        with self._lock:
            self.batches.append(list(inputs) if isinstance(inputs, list) else [])
            self.models.append(str(model))
            failure = self._failures.popleft() if self._failures else None
            dim = self.dim
        if failure is not None:
            return failure, {"error": {"message": f"scripted failure {failure}"}}
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            return 400, {"error": {"message": "input must be a string or an array of strings"}}
        if self.max_batch is not None and len(inputs) > self.max_batch:
            return 413, {"error": {"message": f"at most {self.max_batch} inputs per request"}}
        vectors: Any = HashEmbedder(dim).embed(inputs) if inputs else []
        data = [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
            for i, v in enumerate(vectors)
        ]
        data.reverse()  # clients must order by `index`, not by position
        return 200, {
            "object": "list",
            "data": data,
            "model": self.reported_model or str(model),
            "usage": {"prompt_tokens": sum(len(t.split()) for t in inputs), "total_tokens": 0},
        }


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _make_handler(owner: ScriptedEmbeddingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            if self.connection.family != socket.AF_UNIX:  # no 40 ms Nagle/delayed-ACK stalls
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

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not self.path.rstrip("/").endswith("/embeddings"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, {"error": {"message": "the body is not JSON"}})
                return
            status, payload = owner._answer(body if isinstance(body, dict) else {})
            self._send(status, payload)

    return Handler
