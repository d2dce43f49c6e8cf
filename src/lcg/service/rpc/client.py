"""A small synchronous JSON-RPC client for the socket service (tests, the CLI, scripts).

One `RpcClient` holds one connection, opened on first use; calls on it are sequential, as the
protocol requires (docs/api.md §transport). Progress frames of a streaming call are handed to the
`progress` callback in order, before `call` returns the result.
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from lcg.errors import LcgError

__all__ = ["RpcClient", "RpcError", "ServiceGoneError"]


class RpcError(LcgError):
    """The service answered a call with a JSON-RPC error (`code`, `data` as received)."""

    wire_prefix = ""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


class ServiceGoneError(LcgError):
    """The connection closed before the response arrived."""


class RpcClient:
    """A connection to an lcg service socket."""

    def __init__(self, socket_path: str | Path, *, timeout: float | None = 60.0) -> None:
        self.socket_path = Path(socket_path)
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._file: Any = None
        self._ids = itertools.count(1)

    def connect(self) -> None:
        """Open the connection now (otherwise the first call does).

        Raises:
            OSError: nothing listens on the socket.
        """
        if self._sock is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.socket_path))
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self._file = sock.makefile("rb")

    def set_timeout(self, seconds: float | None) -> None:
        """Change the socket timeout for later calls (None: wait as long as a call takes)."""
        self.timeout = seconds
        if self._sock is not None:
            self._sock.settimeout(seconds)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Call `method` and return its result.

        With `progress`, the call is made in streaming mode (`_progress_token`) and every
        progress frame is passed to it.

        Raises:
            RpcError: the service answered with an error.
            ServiceGoneError: the connection closed before the answer.
            OSError: the socket could not be reached or timed out.
        """
        self.connect()
        assert self._sock is not None
        body = dict(params or {})
        if progress is not None:
            body["_progress_token"] = body.get("_progress_token", True)
        request_id = next(self._ids)
        line = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": body})
        self._sock.sendall(line + b"\n")
        while True:
            raw = self._file.readline()
            if not raw:
                self.close()
                raise ServiceGoneError(f"the service closed the connection during {method}")
            message = orjson.loads(raw)
            if message.get("type") == "progress" and "id" not in message:
                if progress is not None:
                    progress(message)
                continue
            if "error" in message:
                err = message["error"]
                raise RpcError(err.get("code", -32000), err.get("message", ""), err.get("data"))
            result: dict[str, Any] = message["result"]
            return result
