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
import threading
from collections import deque
from pathlib import Path
from typing import Any

from lcg.embedding.hashing import HashEmbedder
from lcg.testing.listener import JsonHandler, Listener

__all__ = ["ScriptedEmbeddingServer"]


class ScriptedEmbeddingServer(Listener):
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
        super().__init__(tcp=tcp, uds_path=uds_path)
        self.dim = dim
        self.reported_model = reported_model
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._failures: deque[int] = deque()
        self.batches: list[list[str]] = []  # the inputs of every embeddings request, in order
        self.models: list[str] = []  # the model each request named

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
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle -----------------------------------------------------------------------------

    def _handler(self) -> type[JsonHandler]:
        return _make_handler(self)

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


def _make_handler(owner: ScriptedEmbeddingServer) -> type[JsonHandler]:
    class Handler(JsonHandler):
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
