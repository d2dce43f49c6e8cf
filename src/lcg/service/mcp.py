"""MCP over stdio, built with the official SDK: one tool per registered method (docs/api.md §mcp).

The only module that imports `mcp`. It owns:

- the tool table: tool name = method name, description from the registry, input schema from the
  params model (tidied for an LLM reader; `required` as the reference advertises it);
- `--scope` filtering (`parse_scopes`) in lcg's grouping (destructive methods need `admin`) or,
  with `reference_scopes`, the reference's (`Method.scope_for`); `health_check` is never a tool;
- `tools/call` mapping (§4.4): an unknown or hidden tool is a JSON-RPC error `-32601`; a missing
  required argument, and every `LcgError`, is a tool result with `isError: true` and
  `structuredContent: {code, message, data?}`; success is the method's result as structured
  content plus the same JSON as text;
- progress (§4.5): for long-running methods, each progress frame becomes one
  `notifications/progress` (progress 1, 2, 3, ..., the frame's `message`). Engine frames arrive
  on worker threads and are handed to the event loop through a memory stream;
- the two modes: standalone (`run_standalone`, owns the database: opened before serving, closed
  on stdin EOF, SIGTERM/SIGINT or `knowledge_close`) and attached (`run_attached`, forwards every
  call over a running service's socket through `lcg.service.attach.AttachedClient`).

stdout carries only MCP messages: the SDK's stdio transport points fd 1 at stderr while it
serves, and this module logs through `logging` only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp import MCPError, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import SessionMessage

import lcg
from lcg.config import Settings
from lcg.engine import Engine, open_engine
from lcg.errors import ConfigError, LcgError
from lcg.service.attach import AttachedClient, AttachedServiceError
from lcg.service.registry import REGISTRY, Context, Method, dispatch
from lcg.service.rpc import protocol
from lcg.telemetry import JsonlSink

__all__ = [
    "SCOPES",
    "AttachedBackend",
    "LocalBackend",
    "McpTool",
    "build_server",
    "parse_scopes",
    "run_attached",
    "run_standalone",
    "serve_streams",
    "tool_table",
]

logger = logging.getLogger(__name__)

SERVER_NAME = "liminis-context-graph"
SCOPES: tuple[str, ...] = ("read", "write", "cypher", "admin")
METHOD_NOT_FOUND = -32601
MISSING_ARGUMENT = -32602
CLOSE_TOOL = "knowledge_close"


# Property hints for an LLM reader; the params models carry none of their own.
_HINTS: dict[str, str] = {
    "group_id": 'Graph partition to use (default "liminis").',
    "group_ids": "Graph partitions to include.",
    "num_results": "Maximum number of items to return.",
    "entity_uuid": "uuid of an entity, as returned by the listing and assert tools.",
    "attributes": "Free-form JSON object of extra properties, merged into the stored ones.",
    "confirm": "Must be true: this call deletes data.",
    "preserve_wal": "Keep the write-ahead log so the graph can be rebuilt (default true).",
    "overwrite": "Replace the file if it exists (default false: an existing file is an error).",
    "path": "A file in the service's export directory (relative) or workspace (absolute).",
    "target_dir": "A new or empty directory in the service's export directory or workspace.",
    "dry_run": "Only report what would happen; change nothing.",
    "valid_at": "When the fact became true (RFC 3339, e.g. 2024-05-01T00:00:00Z).",
    "from_seq": "First WAL sequence number to replay (0: the whole stream).",
    "to_seq": "Last WAL sequence number to replay (inclusive; omit for the end).",
    "force_clear": "Purge the group first when from_seq is 0 and the group holds data.",
    "strategy": "drop_lbug_wal, rebuild_from_workspace_wal or restore_from_backup.",
}

_CLOSE_DESCRIPTION = (
    "Shut the lcg service down gracefully: in-flight calls finish, the database "
    "is closed. Use only when asked to stop the service."
)

_INSTRUCTIONS = (
    "lcg is a local bi-temporal knowledge graph (entities, facts between them, and "
    "the episodes they came from). Only the tools of the scopes this server was "
    "started with are listed (--scope {scopes}); calling any other tool fails with "
    "'Unknown tool'."
)


def parse_scopes(text: str) -> frozenset[str]:
    """Parse a `--scope` list: comma separated, trimmed, empty tokens ignored, `all` = every scope.

    Raises:
        ConfigError: an unknown token, or no token at all (docs/api.md §cli wording).
    """
    found: set[str] = set()
    for raw in text.split(","):
        token = raw.strip()
        if not token:
            continue
        if token == "all":
            found.update(SCOPES)
        elif token in SCOPES:
            found.add(token)
        else:
            raise ConfigError(
                f"unknown scope '{token}'; valid values: read, write, cypher, admin, all"
            )
    if not found:
        raise ConfigError(
            "--scope needs at least one value; valid values: read, write, cypher, admin, all"
        )
    return frozenset(found)


# -- the tool table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class McpTool:
    """One advertised tool: the registry method it forwards to and its MCP declaration."""

    name: str
    description: str
    input_schema: dict[str, Any]
    required: tuple[str, ...]
    long_running: bool = False

    def to_sdk(self) -> types.Tool:
        return types.Tool(
            name=self.name, description=self.description, input_schema=self.input_schema
        )


def _tidy(schema: Any) -> Any:
    """Drop pydantic's titles and fold `anyOf [X, null]` into X: null means absent anyway."""
    if isinstance(schema, list):
        return [_tidy(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _tidy(v) for k, v in schema.items() if k != "title"}
    options = out.get("anyOf")
    if isinstance(options, list):
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == 1 and isinstance(rest[0], dict):
            del out["anyOf"]
            out = {**rest[0], **out}
            if out.get("default", 0) is None:
                del out["default"]
    return out


def input_schema(method: Method) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The advertised JSON schema of a method and its `required` list."""
    raw = method.params.model_json_schema()
    properties: dict[str, Any] = {
        name: _tidy(prop) for name, prop in raw.get("properties", {}).items()
    }
    required = method.required if method.required is not None else tuple(raw.get("required", ()))
    for name, prop in properties.items():
        if name in _HINTS and "description" not in prop:
            prop["description"] = _HINTS[name]
        if name == "num_results":
            prop["minimum"] = 1
        if name in ("from_seq", "to_seq", "last_n"):
            prop["minimum"] = 0
        if name == "group_ids" and name in required:
            prop["minItems"] = 1
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema, required


def tool_table(
    scopes: Iterable[str], *, expose_close: bool = True, reference_scopes: bool = False
) -> dict[str, McpTool]:
    """The visible tools in registry order: methods of the given scopes, never `health_check`.

    A method's scope is its declared one in the reference's grouping (`reference_scopes`), else
    lcg's (`Method.scope_for`: destructive methods need `admin`).

    `knowledge_close` is listed (scope admin) when `expose_close` is set, from the registry when
    it declares one, otherwise as a built-in (the service answers it; standalone handles it here).
    """
    wanted = set(scopes)
    table: dict[str, McpTool] = {}
    for method in REGISTRY.values():
        scope = method.scope_for(reference_scopes)
        if scope is None or scope not in wanted:
            continue
        if method.name == CLOSE_TOOL and not expose_close:
            continue
        schema, required = input_schema(method)
        table[method.name] = McpTool(
            method.name, method.description, schema, required, method.long_running
        )
    if expose_close and "admin" in wanted and CLOSE_TOOL not in REGISTRY:
        table[CLOSE_TOOL] = McpTool(
            CLOSE_TOOL, _CLOSE_DESCRIPTION, {"type": "object", "properties": {}}, ()
        )
    return table


# -- backends: where a call goes -----------------------------------------------------------------

ProgressSink = Callable[[dict[str, Any]], Awaitable[None]]


class Backend(Protocol):
    async def call(
        self, name: str, arguments: dict[str, Any], progress: ProgressSink | None
    ) -> dict[str, Any]: ...


@dataclass
class LocalBackend:
    """Standalone mode: dispatch in-process on an engine this process owns."""

    engine: Engine
    closed: anyio.Event = field(default_factory=anyio.Event)

    async def call(
        self, name: str, arguments: dict[str, Any], progress: ProgressSink | None
    ) -> dict[str, Any]:
        if name == CLOSE_TOOL and CLOSE_TOOL not in REGISTRY:
            self.closed.set()
            return {"status": "closed"}
        if progress is None:
            result = await dispatch(self.engine, name, arguments)
        else:
            result = await _dispatch_with_progress(self.engine, name, arguments, progress)
        if name == CLOSE_TOOL:
            self.closed.set()
        return result


async def _dispatch_with_progress(
    engine: Engine, name: str, arguments: dict[str, Any], progress: ProgressSink
) -> dict[str, Any]:
    """Dispatch, delivering the handler's progress frames to `progress` on this event loop.

    The engine calls the registry's progress callback on its worker threads. Each frame is put on
    an unbounded memory stream from there (through the loop's token, so the worker never touches
    the stream directly), and a pump task awaits the sink; the stream is drained before the
    result is returned, so every notification precedes the response.
    """
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
    token = anyio.lowlevel.current_token()
    loop_thread = threading.get_ident()

    def put(frame: dict[str, Any]) -> None:
        try:
            if threading.get_ident() == loop_thread:
                send.send_nowait(dict(frame))
            else:
                anyio.from_thread.run_sync(send.send_nowait, dict(frame), token=token)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.RunFinishedError):
            logger.debug("progress frame after the call ended; dropped")

    async def pump() -> None:
        async with receive:
            async for frame in receive:
                await progress(frame)

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        async with send:
            result = await dispatch(engine, name, arguments, Context(progress=put))
    return result


@dataclass
class AttachedBackend:
    """Attached mode: forward every call to a running service over its socket."""

    client: AttachedClient

    async def call(
        self, name: str, arguments: dict[str, Any], progress: ProgressSink | None
    ) -> dict[str, Any]:
        return await self.client.call(name, arguments, progress)


# -- the server ----------------------------------------------------------------------------------


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _result(payload: dict[str, Any], is_error: bool) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=_json_text(payload))],
        structured_content=payload,
        is_error=is_error,
    )


def error_payload(exc: LcgError) -> dict[str, Any]:
    """The `{code, message, data?}` of a failed call (the JSON-RPC error the socket would send)."""
    if isinstance(exc, AttachedServiceError):
        payload: dict[str, Any] = {"code": exc.code, "message": exc.message}
        data: Any = exc.data
    else:
        payload = {"code": exc.rpc_code, "message": exc.wire_message()}
        data = exc.wire_data()
    if data is not None:
        payload["data"] = data
    return payload


def _progress_requested(ctx: ServerRequestContext[Any, Any]) -> bool:
    return progress_token_from_params(ctx.params) is not None


def build_server(
    backend: Backend,
    tools: dict[str, McpTool],
    *,
    scopes: Iterable[str] = SCOPES,
    always_bridge_progress: bool = True,
) -> Server[Any]:
    """An SDK server whose tools are `tools`, each call going to `backend`.

    Args:
        backend: where calls go (`LocalBackend` or `AttachedBackend`).
        tools: the visible tools (`tool_table`); anything else is `Unknown tool`.
        scopes: the active scopes, named in the server's instructions.
        always_bridge_progress: bridge progress even when the request shows no progress token.
            The SDK drops a report when the client asked for none, so this costs nothing
            locally; it lets in-process clients (which pass a callback, not a token) see
            progress. Attached mode sets it False: there a token changes what the service does.
    """

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool.to_sdk() for tool in tools.values()])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            raise MCPError(METHOD_NOT_FOUND, f"Unknown tool: '{params.name}'")
        arguments = dict(params.arguments or {})
        missing = [name for name in tool.required if arguments.get(name) is None]
        if missing:
            return _result(
                {
                    "code": MISSING_ARGUMENT,
                    "message": f"Missing required argument(s) for '{tool.name}': {', '.join(missing)}",
                },
                is_error=True,
            )
        sink: ProgressSink | None = None
        if tool.long_running and (always_bridge_progress or _progress_requested(ctx)):
            count = 0

            async def sink(frame: dict[str, Any]) -> None:
                nonlocal count
                count += 1
                message = frame.get("message")
                await ctx.session.report_progress(
                    count, None, message if isinstance(message, str) else None
                )

        try:
            result = await backend.call(tool.name, arguments, sink)
        except LcgError as exc:
            logger.info("tool %s failed: %s", tool.name, exc.wire_message())
            return _result(error_payload(exc), is_error=True)
        except Exception:  # the transport's top-level handler: a bug must not kill the session
            logger.exception("tool call raised an unexpected error")
            return _result(
                {"code": -32000, "message": f"IPC error: internal error in {tool.name}"},
                is_error=True,
            )
        size = len(_json_text(result).encode())
        if size > protocol.MAX_ANSWER_BYTES:
            return _result(error_payload(protocol.answer_too_large(size)), is_error=True)
        return _result(result, is_error=False)

    scope_list = ",".join(s for s in SCOPES if s in set(scopes))
    return Server(
        SERVER_NAME,
        version=lcg.__version__,
        instructions=_INSTRUCTIONS.format(scopes=scope_list),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_streams(
    server: Server[Any],
    read_stream: Any,
    write_stream: Any,
    *,
    stop: anyio.Event | None = None,
    shutdown_timeout_ms: int = 5000,
    stop_input: Callable[[], None] | None = None,
) -> None:
    """Serve one MCP connection; on EOF, `stop` or SIGTERM/SIGINT, drain before closing.

    The SDK cancels in-flight requests as soon as its input ends, so the input is relayed: when
    it ends (or a stop is asked for) reading stops, requests already read get up to
    `shutdown_timeout_ms` to be answered, and only then does the server see EOF. A second signal
    cancels at once. Both streams are closed on return; `stop_input` is called when reading
    stops, so a transport can end its own reader.
    """
    inflight: set[Any] = set()
    draining = False
    drained = anyio.Event()
    reading = anyio.CancelScope()
    in_send, in_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    out_send, out_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_in() -> None:
        nonlocal draining
        async with in_send:
            with reading:
                async for item in read_stream:
                    if isinstance(item, SessionMessage) and isinstance(
                        item.message, types.JSONRPCRequest
                    ):
                        inflight.add(item.message.id)
                    elif isinstance(item, Exception):  # a line that is not a JSON-RPC message
                        await _parse_error(out_send, item)
                    try:
                        await in_send.send(item)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        break  # the server stopped reading
            draining = True
            if stop_input is not None:
                stop_input()
            if inflight:
                logger.info("MCP: input ended; waiting for %d call(s) in flight", len(inflight))
                with anyio.move_on_after(shutdown_timeout_ms / 1000):
                    await drained.wait()
        # Whatever the transport still holds; its input ends soon after stop_input.
        with anyio.move_on_after(1):
            async for _ in read_stream:
                pass
        await read_stream.aclose()

    async def pump_out() -> None:
        try:
            async with out_recv:
                async for item in out_recv:
                    await write_stream.send(item)
                    if isinstance(item.message, types.JSONRPCResponse | types.JSONRPCError):
                        inflight.discard(item.message.id)
                        if draining and not inflight:
                            drained.set()
        finally:
            with anyio.CancelScope(shield=True):
                await write_stream.aclose()

    async def watch_signals(everything: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                if reading.cancel_called:
                    everything.cancel()
                    return
                logger.warning("received signal %d; shutting down", signum)
                reading.cancel()

    async def watch_stop(event: anyio.Event) -> None:
        await event.wait()
        logger.warning("knowledge_close: shutting down")
        reading.cancel()

    async with anyio.create_task_group() as tg:
        watchers = anyio.CancelScope()

        async def watch() -> None:
            with watchers:
                async with anyio.create_task_group() as wtg:
                    if threading.current_thread() is threading.main_thread():
                        wtg.start_soon(watch_signals, tg.cancel_scope)
                    if stop is not None:
                        wtg.start_soon(watch_stop, stop)

        tg.start_soon(watch)
        tg.start_soon(pump_in)
        tg.start_soon(pump_out)
        try:
            await server.run(in_recv, out_send, server.create_initialization_options())
        finally:
            watchers.cancel()
            reading.cancel()


_TOO_LONG_LINE = f"message refused: longer than {protocol.MAX_LINE_BYTES} bytes\n"


async def _parse_error(out: Any, exc: Exception) -> None:
    """Answer a line that is not a JSON-RPC message as JSON-RPC 2.0 says: a Parse error with a
    null id (its own id could not be read), so the client learns why it got no answer; the SDK
    itself only logs it. A line over the limit (`_StdinLines`) says so."""
    too_long = _TOO_LONG_LINE.strip() in str(exc)
    message = _TOO_LONG_LINE.strip() if too_long else "Parse error: not a JSON-RPC message"
    error = types.JSONRPCError(
        jsonrpc="2.0", id=None, error=types.ErrorData(code=types.PARSE_ERROR, message=message)
    )
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await out.send(SessionMessage(error))


class _StdinLines:
    """stdin as an async iterator of lines, read by a daemon thread; a line over the socket's
    limit (`protocol.MAX_LINE_BYTES`) is dropped as it arrives, never buffered whole.

    The SDK's own stdin reader blocks in a worker thread that cannot be cancelled, so a shutdown
    by signal or `knowledge_close` would wait for the client's next line. A daemon thread reading
    a duplicate of fd 0 with `os.read` (no Python-level lock held at exit) can be left behind.
    """

    def __init__(self) -> None:
        self._send, self._recv = anyio.create_memory_object_stream[str](16)

    def start(self) -> None:
        token = anyio.lowlevel.current_token()
        fd = os.dup(0)
        threading.Thread(
            target=self._run, args=(fd, token), name="lcg-mcp-stdin", daemon=True
        ).start()

    def _run(self, fd: int, token: Any) -> None:
        pending = bytearray()
        discarding = False  # inside a line longer than the limit: dropped up to its newline
        try:
            while chunk := os.read(fd, 65536):
                start = 0
                while (at := chunk.find(b"\n", start)) >= 0:
                    if not discarding:
                        pending += chunk[start:at]
                    if discarding or len(pending) > protocol.MAX_LINE_BYTES:
                        self._refuse(token)
                    else:
                        line = pending.decode("utf-8", "replace") + "\n"
                        anyio.from_thread.run(self._send.send, line, token=token)
                    pending.clear()
                    discarding = False
                    start = at + 1
                if not discarding:
                    pending += chunk[start:]
                    if len(pending) > protocol.MAX_LINE_BYTES:
                        discarding = True
                        pending.clear()
            if discarding or len(pending) > protocol.MAX_LINE_BYTES:
                self._refuse(token)
            elif pending:
                anyio.from_thread.run(
                    self._send.send, pending.decode("utf-8", "replace"), token=token
                )
            anyio.from_thread.run_sync(self._send.close, token=token)
        except (
            OSError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            anyio.RunFinishedError,
        ):
            logger.debug("stdin reader stopped")
        finally:
            os.close(fd)

    def _refuse(self, token: Any) -> None:
        """A message over the line limit was dropped unread (never buffered whole): say so on
        stderr and hand the SDK a line that is not JSON, which it reports like any malformed
        message; the session goes on with the next line."""
        logger.warning(
            "MCP: a message longer than %d bytes was refused unread", protocol.MAX_LINE_BYTES
        )
        anyio.from_thread.run(self._send.send, _TOO_LONG_LINE, token=token)

    def stop(self) -> None:
        """End the iteration (the thread, if still reading, exits at its next line)."""
        self._send.close()

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        try:
            return await self._recv.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


async def _serve_stdio(
    server: Server[Any], stop: anyio.Event | None, shutdown_timeout_ms: int
) -> None:
    lines = _StdinLines()
    lines.start()
    try:
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines)) as (
            read_stream,
            write_stream,
        ):
            await serve_streams(
                server,
                read_stream,
                write_stream,
                stop=stop,
                shutdown_timeout_ms=shutdown_timeout_ms,
                stop_input=lines.stop,
            )
    finally:
        lines.stop()


def run_standalone(
    settings: Settings, scopes: frozenset[str], *, reference_scopes: bool = False
) -> None:
    """Standalone MCP: open the database, serve on stdio, close the database on the way out.

    Raises:
        LcgError: the database cannot be opened (startup is fatal).
    """
    events = JsonlSink()  # stderr: stdout belongs to the protocol
    events.emit("service_state", state="starting", mode="mcp_stdio")
    engine = open_engine(settings, events=events)
    events.emit("service_state", state="healthy", mode="mcp_stdio")
    logger.info("MCP standalone: serving %s over stdio", settings.db_path)
    try:
        backend = LocalBackend(engine)
        tools = tool_table(scopes, reference_scopes=reference_scopes)
        server = build_server(backend, tools, scopes=scopes)
        anyio.run(_serve_stdio, server, backend.closed, settings.shutdown_timeout_ms)
    finally:
        events.emit("service_state", state="shutting_down", mode="mcp_stdio")
        engine.close()
        events.emit("service_state", state="stopped", mode="mcp_stdio")
        logger.info("MCP standalone: database closed")


def run_attached(
    socket_path: str,
    scopes: frozenset[str],
    *,
    allow_remote_close: bool = False,
    timeout_ms: int = 30_000,
    shutdown_timeout_ms: int = 5000,
    reference_scopes: bool = False,
) -> None:
    """Attached MCP: connect to a running service once (fatal if it fails), then forward calls.

    Raises:
        AttachedServiceError: the service's socket cannot be reached at startup.
    """

    async def main() -> None:
        client = AttachedClient(socket_path, timeout_ms)
        await client.connect()
        logger.info("MCP attached to %s", socket_path)
        try:
            server = build_server(
                AttachedBackend(client),
                tool_table(
                    scopes, expose_close=allow_remote_close, reference_scopes=reference_scopes
                ),
                scopes=scopes,
                always_bridge_progress=False,
            )
            await _serve_stdio(server, None, shutdown_timeout_ms)
        finally:
            await client.aclose()

    anyio.run(main)
