"""The JSON-RPC service on a Unix socket (docs/api.md §transport, §startup, §shutdown; docs/design.md).

Lifecycle:
1. **Bind first.** The socket's parent directory is created (0700), a stale socket file is
   unlinked (a live one — something answers on it — is a fatal conflict), the socket is bound
   with mode 0600, and connections are accepted at once.
2. **Open the engine in a worker thread** while clients connect. Until it is open only
   `health_check` (`state: "initializing"`), `knowledge_status` and `knowledge_close` answer;
   every other method gets -32001 with `data.reason == "initializing"`.
3. **Degraded and self-recovery.** If the database files cannot be opened the service serves a
   degraded engine (the registry's guard answers -32001 with the reason) and, in a worker
   thread, moves the broken files aside and derives a fresh database from the WAL
   (`lcg.engine.recovery`), then swaps it in: `health_check` goes `degraded` -> `healthy`.
4. **Shutdown** on SIGTERM/SIGINT or after answering `knowledge_close`: stop accepting, close
   idle connections, let in-flight requests finish within `shutdown_timeout_ms` (then cancel
   them — a call running in a worker thread still completes: no write is cut mid-commit), close
   the engine (WAL flushed, Kuzu checkpointed), remove the socket file. `service_state`
   telemetry: `shutting_down`, then `stopped` with `drained`/`cancelled` counts.

Per connection, requests are read and answered strictly in order; connections run concurrently.
A request whose params carry a non-null `_progress_token` streams progress frames (written as
the handler reports them, from whatever thread) before its response. Every request, including
unparseable ones, produces one `ipc_call` telemetry event.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import socket
import stat
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from lcg.config import Settings
from lcg.embedding import stamp
from lcg.embedding.base import Embedder
from lcg.engine import Engine
from lcg.engine.recovery import open_or_degraded, rebuild_database
from lcg.errors import ConfigError, ConflictError, InvalidRequestError, UnavailableError
from lcg.fsmodes import private_dir
from lcg.ontology import no_ontology
from lcg.service.registry import REGISTRY, Context, dispatch
from lcg.service.rpc import protocol
from lcg.telemetry import EventSink, JsonlSink

__all__ = ["INITIALIZING", "RpcServer", "bind_unix_socket", "serve"]

logger = logging.getLogger(__name__)

INITIALIZING = "initializing"
_READ_CHUNK = 256 * 1024
_LISTEN_BACKLOG = 512
_TELEMETRY_TEXT_CAP = 200


class _ReembedStopped(Exception):
    """Raised from the background re-embed's progress callback when the service shuts down."""


class _TooLong:
    """Marker returned by the line reader for a line beyond the size limit (already skipped)."""


_TOO_LONG = _TooLong()


class _LineReader:
    """Splits a byte stream into lines; a line over `limit` bytes is skipped, not buffered."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._buf = bytearray()
        self._scan = 0
        self._eof = False

    async def next_line(self) -> bytes | _TooLong | None:
        """The next line without its newline; `_TOO_LONG` for an oversized one; None at EOF."""
        discarding = False
        while True:
            at = self._buf.find(b"\n", self._scan)
            if at >= 0:
                line = bytes(self._buf[:at])
                del self._buf[: at + 1]
                self._scan = 0
                return _TOO_LONG if discarding or len(line) > self._limit else line
            if len(self._buf) > self._limit:
                discarding = True
                self._buf.clear()
            self._scan = len(self._buf)
            if self._eof:
                if discarding:
                    return _TOO_LONG
                if self._buf:  # a final line without its newline still counts
                    line = bytes(self._buf)
                    self._buf.clear()
                    return line
                return None
            try:
                chunk = await self._stream.receive(_READ_CHUNK)
            except (
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                ConnectionError,
            ):
                self._eof = True
                continue
            self._buf += chunk


@dataclass(eq=False)
class _Connection:
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    busy: bool = False


def _answers(path: Path) -> bool:
    """Whether a process accepts connections on the socket at `path`."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def bind_unix_socket(path: Path) -> socket.socket:
    """Create the parent directory (0700), replace a stale socket, bind and listen (mode 0600).

    Raises:
        ConflictError: a live service already answers on `path`, or `path` is not a socket.
        ConfigError: the socket cannot be created there (e.g. the path is too long).
    """
    try:
        private_dir(path.parent)
    except OSError as exc:
        raise ConfigError(f"cannot create {path.parent}: {exc}") from exc
    if path.is_symlink() or path.exists():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise ConflictError(f"{path} exists and is not a socket; refusing to replace it")
        if _answers(path):
            raise ConflictError(f"another service is already listening on {path}")
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        # The parent directory is 0700, so nobody else can connect in the moment before chmod.
        os.chmod(path, 0o600)
        sock.listen(_LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {path}: {exc}") from exc
    return sock


def _telemetry_value(value: Any) -> Any:
    """A request id or method name as telemetry may record it: scalars kept, the rest capped."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _TELEMETRY_TEXT_CAP else text[:_TELEMETRY_TEXT_CAP] + "…"


def _initializing_status() -> dict[str, Any]:
    return {
        "running": True,
        "initializing": True,
        "degraded": False,
        "context_graph_initialized": False,
        "connected": False,
        "queryable": False,
        "indices_built": False,
        "ontology": no_ontology(),
    }


class RpcServer:
    """One service instance: a socket, an engine (opened after binding), its connections."""

    def __init__(
        self,
        settings: Settings,
        *,
        socket_path: Path | None = None,
        events: EventSink | None = None,
        embedder: Embedder | None = None,
        handle_signals: bool = True,
        self_recover: bool = True,
    ) -> None:
        self.settings = settings
        self.socket_path = socket_path or settings.socket_path
        self.events: EventSink = events or JsonlSink()
        self._embedder = embedder
        self._handle_signals = handle_signals
        self._self_recover = self_recover
        self._engine: Engine | None = None
        self._engine_lock = threading.Lock()
        self._conns: set[_Connection] = set()
        self._busy = 0
        self._closing = False
        self._idle: anyio.Event | None = None
        self._stop: anyio.Event | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._socket_inode: int | None = None
        self._fatal: BaseException | None = None
        # Set (from the event loop) once the socket is bound / the engine is settled; for tests
        # and embedders that run the server in a thread.
        self.bound = threading.Event()
        self.settled = threading.Event()
        self.stopped = threading.Event()
        # Other transports sharing this engine in the process (HTTP): each is drained after the
        # socket's connections and before the engine is closed.
        self.drain_hooks: list[Callable[[], Awaitable[None]]] = []

    # -- state ------------------------------------------------------------------------------

    @property
    def engine(self) -> Engine | None:
        with self._engine_lock:
            return self._engine

    def _swap_engine(self, engine: Engine) -> Engine | None:
        with self._engine_lock:
            old, self._engine = self._engine, engine
        return old

    def request_shutdown(self) -> None:
        """Begin graceful shutdown (call from the server's event loop)."""
        if self._stop is not None:
            self._stop.set()

    def shutdown_threadsafe(self) -> None:
        """Begin graceful shutdown from any other thread."""
        if self._token is not None and not self.stopped.is_set():
            with contextlib.suppress(RuntimeError):
                anyio.from_thread.run_sync(self.request_shutdown, token=self._token)

    # -- main -------------------------------------------------------------------------------

    async def serve(self) -> None:
        """Bind, open the engine, serve until shutdown, then clean up.

        Raises:
            ConflictError, ConfigError: the socket cannot be bound, or the engine cannot start
                for a reason self-recovery does not cover (e.g. the database is locked).
        """
        self._token = anyio.lowlevel.current_token()
        self._stop = anyio.Event()
        self._idle = anyio.Event()
        sock = bind_unix_socket(self.socket_path)
        self._socket_inode = os.stat(self.socket_path).st_ino
        listener = await anyio.abc.SocketListener.from_socket(sock)
        logger.info("listening on %s", self.socket_path)
        self.events.emit("service_state", state="starting", socket_path=str(self.socket_path))
        self.bound.set()
        drained = cancelled = 0
        try:
            async with anyio.create_task_group() as tg:
                accept_scope = anyio.CancelScope()
                tg.start_soon(self._accept_loop, listener, tg, accept_scope)
                tg.start_soon(self._start_engine)
                if self._handle_signals:
                    tg.start_soon(self._watch_signals)
                await self._stop.wait()
                self._closing = True
                accept_scope.cancel()
                self.events.emit("service_state", state="shutting_down")
                drained, cancelled = await self._drain()
                for hook in self.drain_hooks:
                    await hook()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await listener.aclose()
                await self._close_engine()
                self._remove_socket()
                self.events.emit(
                    "service_state", state="stopped", drained=drained, cancelled=cancelled
                )
                self.stopped.set()
        if self._fatal is not None:
            raise self._fatal

    async def _accept_loop(
        self, listener: anyio.abc.SocketListener, tg: anyio.abc.TaskGroup, scope: anyio.CancelScope
    ) -> None:
        with scope:
            while True:
                try:
                    stream = await listener.accept()
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
                except OSError:
                    # e.g. EMFILE under a connection flood: back off instead of spinning.
                    logger.exception("accept failed")
                    await anyio.sleep(0.05)
                    continue
                tg.start_soon(self._connection, stream)

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                logger.info("received %s: shutting down", signal.Signals(signum).name)
                self.request_shutdown()

    # -- engine lifecycle ---------------------------------------------------------------------

    def _open(self) -> Engine:
        engine = open_or_degraded(self.settings, embedder=self._embedder, events=self.events)
        self._swap_engine(engine)  # stored from the thread: a cancelled waiter cannot leak it
        return engine

    async def _start_engine(self) -> None:
        try:
            engine = await anyio.to_thread.run_sync(self._open)
        except Exception as exc:
            logger.exception("the engine could not be opened")
            self._fatal = exc
            self.settled.set()
            self.request_shutdown()
            return
        reason = engine.state.degraded_reason
        self.events.emit(
            "service_state",
            state="degraded" if reason else "healthy",
            **({"reason": reason} if reason else {}),
        )
        if reason is not None and self._self_recover:
            await anyio.to_thread.run_sync(self._recover, reason)
        self.settled.set()
        if reason is None:
            await self._offer_reembed(engine)

    async def _offer_reembed(self, engine: Engine) -> None:
        """A workspace embedded by another model than the one in use (`mismatch`): say, in one
        line, how to re-embed it; with `LCG_REEMBED=auto`, re-embed it here in the background
        (search answers from the old vectors until every group is done, lcg.admin.reembed).
        Shutdown stops it after the batch in flight; the next start resumes where it stopped
        (rows written stay current)."""
        identity = engine.parts.embedder.identity
        try:
            # The stamps alone, not a whole knowledge_status: its cross-group pointer count
            # reads every fact (at 1M facts that kept ~200 MB more of the database resident).
            status = await engine.read(lambda conn: stamp.model_status(conn, identity))
        except Exception:  # a status read: never fatal to the service
            logger.exception("could not read the embedding stamps")
            return
        found = {
            group_id: str(g["model"])
            for group_id, g in status["embedding_groups"].items()
            if g["status"] == "mismatch"
        }
        if not found:
            return
        model = identity.model
        old = ", ".join(sorted(set(found.values())))
        if self.settings.reembed != "auto":
            logger.warning(
                "vectors of %d group(s) were made by %s, not %s: run `lcg models reembed` to "
                "re-embed (or start with LCG_REEMBED=auto to do it in the background)",
                len(found),
                old,
                model,
            )
            return
        logger.info(
            "LCG_REEMBED=auto: re-embedding %d group(s) from %s to %s in the background; "
            "search answers from the old vectors until it completes",
            len(found),
            old,
            model,
        )
        self.events.emit("reembed", state="started", groups=len(found), model=model)
        logged = [0.0]

        def progress(frame: dict[str, Any]) -> None:
            if self._closing:
                raise _ReembedStopped
            done, total = frame.get("processed", 0), frame.get("total") or 0
            if total and (done == total or done / total >= logged[0] + 0.1):
                logged[0] = done / total
                logger.info("re-embedding: %d of %d vectors", done, total)

        try:
            result = await dispatch(
                engine,
                "knowledge_backfill_summary_embeddings",
                {"group_ids": sorted(found)},
                Context(progress=progress),
            )
        except _ReembedStopped:
            logger.info("re-embedding stopped by shutdown; the next start resumes it")
            self.events.emit("reembed", state="stopped")
        except Exception as exc:
            logger.exception("background re-embedding failed; `lcg models reembed` retries it")
            self.events.emit("reembed", state="failed", error=str(exc)[:_TELEMETRY_TEXT_CAP])
        else:
            logger.info("re-embedded %d vectors: search answers with %s", result["embedded"], model)
            self.events.emit("reembed", state="complete", embedded=result["embedded"])

    def _recover(self, reason: str) -> None:
        degraded = self.engine
        try:
            # The degraded engine's write lock is held while rebuilding, so a knowledge_recover
            # sent meanwhile answers "Recovery already in progress"; one that ran first and
            # reopened the database in place leaves nothing to do.
            with degraded.writer() if degraded is not None else contextlib.nullcontext():
                if degraded is not None and degraded.state.degraded_reason is None:
                    return
                fresh = rebuild_database(
                    self.settings, reason=reason, embedder=self._embedder, events=self.events
                )
        except Exception:
            logger.exception("self-recovery from the WAL failed; staying degraded")
            self.events.emit("service_state", state="degraded", reason=reason)
            return
        old = self._swap_engine(fresh)
        if old is not None:
            old.close()
        self.events.emit("service_state", state="healthy", recovered_from=reason)

    async def _close_engine(self) -> None:
        engine = self.engine
        if engine is not None:
            try:
                await anyio.to_thread.run_sync(engine.close)
            except Exception:
                logger.exception("closing the engine failed")

    def _remove_socket(self) -> None:
        """Remove the socket file — unless another process has replaced it since we bound."""
        try:
            if os.stat(self.socket_path).st_ino == self._socket_inode:
                self.socket_path.unlink()
        except OSError:
            pass

    # -- shutdown -----------------------------------------------------------------------------

    async def _drain(self) -> tuple[int, int]:
        """Close idle connections, wait for busy ones; returns (drained, cancelled) requests."""
        for conn in list(self._conns):
            if not conn.busy:
                conn.scope.cancel()
        in_flight = self._busy
        assert self._idle is not None
        if self._busy:
            with anyio.move_on_after(self.settings.shutdown_timeout_ms / 1000):
                await self._idle.wait()
        cancelled = self._busy
        for conn in list(self._conns):
            conn.scope.cancel()
        return in_flight - cancelled, cancelled

    # -- connections ----------------------------------------------------------------------------

    async def _connection(self, stream: anyio.abc.ByteStream) -> None:
        conn = _Connection()
        self._conns.add(conn)
        try:
            with conn.scope:
                async with stream:
                    await self._read_loop(stream, conn)
        except Exception:
            logger.exception("a connection failed")
        finally:
            self._conns.discard(conn)

    async def _read_loop(self, stream: anyio.abc.ByteStream, conn: _Connection) -> None:
        reader = _LineReader(stream, protocol.MAX_LINE_BYTES)
        while not self._closing:
            line = await reader.next_line()
            if line is None or self._closing:
                return
            if isinstance(line, _TooLong):
                started = time.perf_counter()
                ok = await self._send(
                    stream,
                    protocol.encode_parse_error(
                        f"request line exceeds {protocol.MAX_LINE_BYTES} bytes"
                    ),
                )
                self._log_call(None, None, started, protocol.PARSE_ERROR)
                if not ok:
                    return
                continue
            if protocol.is_blank(line):
                continue
            conn.busy = True
            self._busy += 1
            try:
                keep_reading = await self._handle(stream, line)
            finally:
                conn.busy = False
                self._busy -= 1
                if self._busy == 0 and self._closing and self._idle is not None:
                    self._idle.set()
            if not keep_reading:
                return

    async def _send(self, stream: anyio.abc.ByteStream, data: bytes) -> bool:
        try:
            await stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            return False
        return True

    def _log_call(
        self,
        method: Any,
        request_id: Any,
        started: float,
        error_code: int | None,
        params: Any = None,
    ) -> None:
        """The canonical line of one request: method, id, group, duration, outcome, code."""
        group = params.get("group_id") if isinstance(params, dict) else None
        self.events.emit(
            "ipc_call",
            method=_telemetry_value(method),
            request_id=_telemetry_value(request_id),
            group_id=_telemetry_value(group) if isinstance(group, str) else None,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            success=error_code is None,
            error_code=error_code,
        )

    async def _handle(self, stream: anyio.abc.ByteStream, line: bytes) -> bool:
        """Answer one line; returns False when this connection must stop reading."""
        started = time.perf_counter()
        try:
            request = protocol.parse_request(line)
        except protocol.ProtocolError as exc:
            ok = await self._send(stream, protocol.encode_parse_error(exc.detail))
            self._log_call(None, None, started, protocol.PARSE_ERROR)
            return ok
        try:
            if request.streaming:
                result = await self._call_streaming(stream, request)
            else:
                result = await self._call(request, None)
        except Exception as exc:  # the transport's one error mapping point (STYLE §3)
            error = protocol.error_object(exc)
            ok = await self._send(stream, protocol.encode_error(request.id, error))
            self._log_call(request.method, request.id, started, error["code"], request.params)
            return ok
        data = protocol.encode_result(request.id, result)
        code: int | None = None
        if len(data) > protocol.MAX_ANSWER_BYTES:
            error = protocol.error_object(protocol.answer_too_large(len(data)))
            data, code = protocol.encode_error(request.id, error), error["code"]
        ok = await self._send(stream, data)
        self._log_call(request.method, request.id, started, code, request.params)
        if request.method == "knowledge_close":
            self.request_shutdown()
            return False
        return ok

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        """Answer one call as the socket would, initializing state included (for HTTP)."""
        return await self._call(protocol.Request(None, method, params), None)

    async def _call(
        self, request: protocol.Request, progress: Callable[[dict[str, Any]], None] | None
    ) -> dict[str, Any]:
        engine = self.engine
        if engine is None:
            return self._call_initializing(request)
        return await dispatch(engine, request.method, request.params, Context(progress=progress))

    def _call_initializing(self, request: protocol.Request) -> dict[str, Any]:
        """Answers while the engine is still opening (only the lifecycle methods work)."""
        if request.method == "health_check":
            return {"ok": False, "healthy": False, "state": INITIALIZING}
        if request.method == "knowledge_status":
            return _initializing_status()
        if request.method == "knowledge_close":
            return {"status": "closed"}
        if request.method not in REGISTRY:
            raise InvalidRequestError(f"Method not found: {request.method}")
        raise UnavailableError(INITIALIZING)

    async def _call_streaming(
        self, stream: anyio.abc.ByteStream, request: protocol.Request
    ) -> dict[str, Any]:
        """Run a call while writing the progress frames it reports, then return its result.

        Frames may be reported from the event loop or from any worker thread; they are queued
        on the loop (thread-safely, in order) and written before the response. If the client
        goes away, later frames are dropped and the call still completes (a replay running in a
        thread cannot be interrupted safely half-way).
        """
        send_frame, receive_frame = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        token = anyio.lowlevel.current_token()
        loop_thread = threading.get_ident()

        def progress(frame: dict[str, Any]) -> None:
            try:
                if threading.get_ident() == loop_thread:
                    send_frame.send_nowait(dict(frame))
                else:
                    anyio.from_thread.run_sync(send_frame.send_nowait, dict(frame), token=token)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, RuntimeError):
                pass  # the call has ended or the loop is shutting down: nobody to tell

        async def pump() -> None:
            client_gone = False
            async with receive_frame:
                async for frame in receive_frame:
                    if not client_gone:
                        client_gone = not await self._send(stream, protocol.encode_progress(frame))

        failure: Exception | None = None
        result: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                result = await self._call(request, progress)
            except Exception as exc:
                failure = exc
            finally:
                send_frame.close()
        if failure is not None:
            raise failure
        return result


async def serve(
    settings: Settings,
    *,
    socket_path: Path | None = None,
    events: EventSink | None = None,
    embedder: Embedder | None = None,
    handle_signals: bool = True,
) -> None:
    """Run the socket service until a signal or `knowledge_close` (the `lcg serve` command).

    Raises:
        ConflictError, ConfigError, StorageError: the service could not start.
    """
    server = RpcServer(
        settings,
        socket_path=socket_path,
        events=events,
        embedder=embedder,
        handle_signals=handle_signals,
    )
    await server.serve()
