"""Attached MCP mode's forwarding client: one JSON-RPC connection to a running lcg service.

Invariants (docs/api.md §mcp-attached):

- One persistent connection to the service's Unix socket; calls are serialised (one in flight),
  with request ids 1, 2, 3, ... per client.
- Every line read is bounded by the idle timeout (`LCG_ATTACHED_CALL_TIMEOUT_MS`); a progress
  line resets it. Lines with `type == "progress"` go to the caller's progress sink, lines whose
  `id` is not the current request's are stale replies and are dropped.
- A request is sent a second time only when the connection broke while *writing* it: redial the
  same path once and write once more. Nothing is retried once the request was fully written (the
  service may have acted on it); the connection is dropped instead and the next call redials.

This module does not import the MCP SDK; `lcg.service.mcp` builds the tools on top of it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from lcg.errors import LcgError

__all__ = ["AttachedClient", "AttachedServiceError"]

logger = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT_MS = 30_000
MAX_LINE_BYTES = 1 << 30  # one response line; results of list calls can be large

ProgressSink = Callable[[dict[str, Any]], Awaitable[None]]

# What a broken or closed Unix socket raises, through anyio or the OS.
_STREAM_ERRORS = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)


class AttachedServiceError(LcgError):
    """A forwarded call failed: the service answered with an error, or the connection failed.

    `code`, `message` and `data` are what the MCP tool error carries. A service error is passed
    through verbatim (its message already has the service's prefix), so the prefix is empty.
    """

    wire_prefix: ClassVar[str] = ""

    def __init__(self, message: str, code: int = -32000, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data

    def wire_data(self) -> dict[str, Any] | None:
        return self.data if isinstance(self.data, dict) else None


class AttachedClient:
    """A serialised JSON-RPC client for one lcg service socket.

    Args:
        path: the service's Unix socket.
        timeout_ms: the idle timeout of one line read.
    """

    def __init__(self, path: str, timeout_ms: int = DEFAULT_CALL_TIMEOUT_MS) -> None:
        self.path = path
        self.timeout_ms = timeout_ms
        self._stream: SocketStream | None = None
        self._reader: BufferedByteReceiveStream | None = None
        self._lock = anyio.Lock()
        self._next_id = 0

    async def connect(self) -> None:
        """Dial the socket (at startup, and again after the connection was dropped).

        Raises:
            AttachedServiceError: the socket cannot be reached.
        """
        await self._drop()
        try:
            stream = await anyio.connect_unix(self.path)
        except OSError as exc:
            raise AttachedServiceError(
                f"failed to connect to attached service at '{self.path}': {exc}"
            ) from exc
        self._stream = stream
        self._reader = BufferedByteReceiveStream(stream)

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        await self._drop()

    async def _drop(self) -> None:
        stream, self._stream, self._reader = self._stream, None, None
        if stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    async def call(
        self, method: str, params: Any, progress: ProgressSink | None = None
    ) -> dict[str, Any]:
        """Forward one request and return its `result`.

        With a progress sink, `_progress_token: true` is added to `params` (unless the caller set
        one) and every progress frame is awaited on the sink before the next line is read.

        Raises:
            AttachedServiceError: the service answered with an error (its code, message and data),
                or the connection failed, timed out or carried malformed data.
        """
        async with self._lock:
            self._next_id += 1
            request_id = self._next_id
            if progress is not None:
                params = dict(params) if isinstance(params, dict) else {}
                params.setdefault("_progress_token", True)
            line = (
                json.dumps(
                    {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
                    ensure_ascii=False,
                    separators=(",", ":"),
                ).encode()
                + b"\n"
            )
            await self._send(line)
            try:
                message = await self._receive(request_id, progress)
            except AttachedServiceError:
                await self._drop()  # the connection's state is unknown: the next call redials
                raise
            return _result_of(message)

    async def _send(self, line: bytes) -> None:
        if self._stream is None:
            await self.connect()  # dropped by an earlier failure: redial first, no retry of that
        try:
            assert self._stream is not None
            await self._stream.send(line)
            return
        except _STREAM_ERRORS as first:
            # Only a failed write is retried: the service cannot have read a request we could not
            # write, so sending it once more cannot apply it twice.
            logger.warning(
                "attached service: write failed (%s); redialling %s once", first, self.path
            )
            try:
                await self.connect()
                assert self._stream is not None
                await self._stream.send(line)
            except (*_STREAM_ERRORS, AttachedServiceError) as second:
                await self._drop()
                raise AttachedServiceError(
                    f"failed to send the request to attached service at '{self.path}': {_text(first)}; "
                    f"the retry after redialling failed too: {_text(second)}"
                ) from second

    async def _receive(self, request_id: int, progress: ProgressSink | None) -> dict[str, Any]:
        while True:
            text = (await self._read_line()).strip()
            if not text:
                continue
            try:
                message = json.loads(text)
            except ValueError as exc:
                raise AttachedServiceError(f"attached service sent malformed JSON: {exc}") from exc
            if not isinstance(message, dict):
                raise AttachedServiceError("attached service sent a line that is not a JSON object")
            if message.get("type") == "progress":
                if progress is not None:
                    await progress(message)
                continue
            if message.get("id") != request_id:
                logger.warning(
                    "attached service: dropping a stale reply (id %r)", message.get("id")
                )
                continue
            return message

    async def _read_line(self) -> bytes:
        assert self._reader is not None
        try:
            with anyio.fail_after(self.timeout_ms / 1000):
                return await self._reader.receive_until(b"\n", MAX_LINE_BYTES)
        except TimeoutError:
            raise AttachedServiceError(
                f"attached service call timed out after {self.timeout_ms}ms with no response "
                f"(LCG_ATTACHED_CALL_TIMEOUT_MS); the connection was dropped and the next call "
                f"reconnects to '{self.path}'"
            ) from None
        except (anyio.IncompleteRead, anyio.EndOfStream):
            raise AttachedServiceError(
                "attached service closed the connection unexpectedly"
            ) from None
        except anyio.DelimiterNotFound:
            raise AttachedServiceError(
                f"attached service sent a line longer than {MAX_LINE_BYTES} bytes"
            ) from None
        except _STREAM_ERRORS as exc:
            raise AttachedServiceError(
                f"failed to read from attached service: {_text(exc)}"
            ) from exc


def _result_of(message: dict[str, Any]) -> dict[str, Any]:
    error = message.get("error")
    if error is not None:
        if not isinstance(error, dict):
            error = {"message": str(error)}
        code = error.get("code")
        raise AttachedServiceError(
            str(error.get("message", "")),
            code if isinstance(code, int) and not isinstance(code, bool) else -32000,
            error.get("data"),
        )
    result = message.get("result")
    if not isinstance(result, dict):
        raise AttachedServiceError("attached service answered without a result object")
    return result


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
