"""HTTP transport: the method registry as a REST mirror, plus the browser UI (docs/design.md).

The one module that imports FastAPI. It owns:

- routes derived from the registry: `POST /api/<method>` for every method whose scope the server
  enables (`LCG_HTTP_SCOPE` / `--http-scope`, default `read,write`; `cypher` and `admin` only
  when named), with the JSON-RPC params as the request body and the JSON-RPC `result` as the
  response body; `GET /api/health` (health_check plus the enabled scopes and methods);
- one error shape for everything that fails, `{"error": {"code", "message", "data"?}}`, built by
  the JSON-RPC transport's own mapping (`protocol.error_object`), with an HTTP status;
- the security model: loopback by default; any other bind address is refused at startup unless
  `LCG_API_TOKEN` is set; every `/api/` request needs `Authorization: Bearer <token>`, on
  loopback too (any local user can connect to 127.0.0.1): `LCG_API_TOKEN`, else the workspace's
  own token (`<home>/http-token`, generated on first start, 0600; `workspace_token`), unless the
  user opts out on loopback (`LCG_HTTP_AUTH=none`, `lcg serve --http-no-token`). The UI's
  address carries the token in its fragment (`browser_url`), which the page keeps for the tab;
  a `Host` allow-list (loopback names, the bound address, `LCG_HTTP_ALLOWED_HOSTS`) against DNS
  rebinding; a cross-origin `Origin` is refused unless listed in `LCG_HTTP_CORS_ORIGINS` (no
  CORS headers otherwise); a Content-Security-Policy that lets pages load nothing from elsewhere;
- the UI: static files from `lcg/service/ui/` at `/` and `/ui/`, and `/ui/first-graph.js`, the
  graph of the first view as a script the page loads while it is parsed, so its load event
  waits for the graph (a plain `chromium --headless --screenshot` captures it). A script can
  be included by any page, so it answers `null` unless the browser says the request is
  same-origin (`Sec-Fetch-Site`), and always `null` when a token is required (a script sends
  no `Authorization`); the UI then reads the graph with `fetch`.

`HttpService` runs uvicorn on a socket it binds itself (so a refused or busy address is a
`ConfigError`, not uvicorn's `sys.exit`), in the caller's event loop, without installing signal
handlers: `lcg serve --http` (`serve_with_http`) runs it beside the socket service, sharing its
engine, and stops it before that engine is closed.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Generator, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import anyio
import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import lcg
from lcg.config import Settings
from lcg.engine import Engine
from lcg.errors import (
    ConfigError,
    ConflictError,
    InvalidRequestError,
    LcgError,
    NotFoundError,
    UnavailableError,
)
from lcg.fsmodes import open_private, private_dir
from lcg.service.mcp import parse_scopes
from lcg.service.registry import REGISTRY, check_params, dispatch
from lcg.service.rpc import protocol
from lcg.service.rpc.server import RpcServer
from lcg.telemetry import EventSink, NullSink

__all__ = [
    "UI_DIR",
    "Backend",
    "EngineBackend",
    "HttpService",
    "allowed_hosts",
    "build_app",
    "error_body",
    "host_allowed",
    "is_loopback",
    "parse_host_header",
    "serve_with_http",
    "workspace_token",
]

logger = logging.getLogger(__name__)

UI_DIR = Path(__file__).resolve().parent / "ui"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
MAX_BODY_BYTES = protocol.MAX_LINE_BYTES
TOKEN_FILE = "http-token"
CLOSE_METHOD = "knowledge_close"

# The UI is plain files from this origin: nothing may be loaded from anywhere else.
_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_SECURITY_HEADERS = [
    (b"content-security-policy", _CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


class Backend(Protocol):
    """Where calls go: the socket service's engine (`RpcServer`) or an engine the caller owns."""

    async def call(self, method: str, params: Any) -> dict[str, Any]: ...

    def request_shutdown(self) -> None: ...


class EngineBackend:
    """Calls straight into an open engine (tests, benchmarks, embedding lcg in an app).

    The caller owns the engine and the server's lifetime: `knowledge_close` answers but stops
    nothing (call `HttpService.stop`).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        return await dispatch(self.engine, method, params)

    def request_shutdown(self) -> None:
        return None


# -- pure checks ---------------------------------------------------------------------------------


def _split_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _host_name(value: str) -> str:
    """A host (from a Host header or a bind address) without port, brackets or trailing dot."""
    text = value.strip().lower()
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    return text.rstrip(".")


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine."""
    name = _host_name(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts(bound_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """Host header names the server answers: loopback names, the bound address (unless it is a
    wildcard), and the configured extras."""
    names = set(LOOPBACK_NAMES)
    bound = _host_name(bound_host)
    if bound not in ("", "0.0.0.0", "::"):
        names.add(bound)
    names.update(_host_name(h) for h in extra if h.strip())
    return frozenset(names)


# RFC 9110 Host: uri-host [ ":" port ] — a bracketed IPv6 literal or a name/IPv4 address, then
# an optional numeric port; no userinfo, path or whitespace. Anything else names no server.
_HOST_HEADER = re.compile(
    r"(?:\[(?P<literal>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::(?P<port>[0-9]{0,5}))?"
)


def parse_host_header(header: str) -> str | None:
    """The host name of a Host header (lower case, no port, brackets or trailing dot), or None
    when the header is not strictly `host[:port]` (e.g. `127.0.0.1:80@evil.example`)."""
    match = _HOST_HEADER.fullmatch(header)
    if match is None:
        return None
    port = match.group("port")
    if port and int(port) > 65535:
        return None
    name = match.group("literal") or match.group("name")
    return name.lower().rstrip(".")


def host_allowed(header: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request's Host header names this server (DNS-rebinding defence)."""
    if not header:
        return False
    name = parse_host_header(header)
    if name is None:
        return False
    return "*" in allowed or name in allowed


def error_body(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """The one error shape of the HTTP API, mirroring a JSON-RPC error object."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"error": error}


def _status_for(exc: BaseException) -> int:
    if isinstance(exc, InvalidRequestError):
        return 400
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, UnavailableError):
        return 503
    return 500


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    content = orjson.dumps(body, default=str, option=orjson.OPT_NON_STR_KEYS)
    return Response(content, status, headers=headers, media_type="application/json")


def _refusal(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _json(error_body(protocol.INTERNAL_ERROR, message), status, headers)


def workspace_token(home: Path) -> str:
    """The HTTP API's token of the workspace at `home`: read from `<home>/http-token`, or
    generated there (0600, 256 random bits) on first use.

    Raises:
        ConfigError: the file exists but holds no token, or cannot be written.
    """
    path = home / TOKEN_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    else:
        if not text:
            raise ConfigError(f"{path} is empty: delete it to have a new token generated")
        return text
    token = secrets.token_urlsafe(32)
    try:
        private_dir(home)
        fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:  # another process wrote it first: use theirs
        return workspace_token(home)
    except OSError as exc:
        raise ConfigError(f"cannot write the HTTP token to {path}: {exc}") from exc
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    return token


# -- the guard middleware ------------------------------------------------------------------------


class _Guard:
    """Host allow-list, bearer token, same-origin rule and security headers, before any route.

    Pure ASGI (no BaseHTTPMiddleware) so it adds no task hops to each request.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: frozenset[str],
        token: str | None,
        cors_origins: frozenset[str],
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token
        self.cors_origins = cors_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._check(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _check(self, scope: Scope, headers: dict[str, str]) -> Response | None:
        host = headers.get("host")
        if not host_allowed(host, self.hosts):
            return _refusal(400, f"Host header {host!r} is not served here")
        path: str = scope["path"]
        if not path.startswith("/api/"):
            return None
        origin = headers.get("origin")
        own = (f"http://{host}", f"https://{host}")  # https: behind a TLS proxy
        if origin and origin not in own and origin not in self.cors_origins:
            return _refusal(403, f"cross-origin request from {origin!r} refused")
        if scope["method"] == "OPTIONS":
            return None  # a CORS preflight carries no credentials; CORSMiddleware answers it
        if self.token is not None:
            auth = headers.get("authorization", "")
            scheme, _, given = auth.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), self.token.encode()
            ):
                return _refusal(
                    401, "missing or invalid bearer token", {"www-authenticate": "Bearer"}
                )
        return None


# -- the application -----------------------------------------------------------------------------


def enabled_methods(scopes: frozenset[str]) -> list[str]:
    """Registered methods served under `scopes`, in registry order (health_check is separate).

    lcg's own grouping (`Method.scope_for`): a destructive method needs `admin` over HTTP.
    """
    return [m.name for m in REGISTRY.values() if m.scope_for(False) in scopes]


def build_app(
    backend: Backend,
    *,
    scopes: frozenset[str],
    hosts: frozenset[str],
    token: str | None = None,
    cors_origins: Iterable[str] = (),
    events: EventSink | None = None,
) -> FastAPI:
    """The ASGI application: API routes from the registry, the UI, and the guard around both."""
    sink: EventSink = events or NullSink()
    methods = enabled_methods(scopes)
    app = FastAPI(
        title="lcg",
        version=lcg.__version__,
        docs_url=None,  # the interactive docs pages load their scripts from a CDN
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )

    async def call(name: str, request: Request) -> Response:
        started = time.perf_counter()
        params: Any = {}
        status, code = 200, None
        try:
            body = bytearray()
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_BODY_BYTES:  # refused without buffering the rest
                    raise _ParseError(f"request body exceeds {MAX_BODY_BYTES} bytes")
            if body.strip():
                try:
                    params = orjson.loads(body)
                except orjson.JSONDecodeError as exc:
                    raise _ParseError(str(exc)) from None
            check_params(name, params, strict=True)  # HTTP refuses unknown members
            result = await backend.call(name, params)
        except _ParseError as exc:
            status, code = 400, protocol.PARSE_ERROR
            response = _json(error_body(code, f"Parse error: {exc}"), status)
        except Exception as exc:  # the transport's one error mapping point (STYLE §3)
            status = _status_for(exc)
            error = protocol.error_object(exc)
            code = error["code"]
            response = _json({"error": error}, status)
        else:
            task = BackgroundTask(backend.request_shutdown) if name == CLOSE_METHOD else None
            response = _json(result)
            if len(response.body) > protocol.MAX_ANSWER_BYTES:
                status = 400
                error = protocol.error_object(protocol.answer_too_large(len(response.body)))
                code = error["code"]
                response = _json({"error": error}, status)
            response.background = task
        group = params.get("group_id") if isinstance(params, dict) else None
        sink.emit(
            "http_call",
            method=name,
            group_id=group if isinstance(group, str) else None,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            status=status,
            success=code is None,
            error_code=code,
        )
        return response

    def route_for(name: str) -> Callable[[Request], Awaitable[Response]]:
        # A closure, not a default argument: FastAPI would expose that as a query parameter.
        async def route(request: Request) -> Response:
            return await call(name, request)

        return route

    for name in methods:
        method = REGISTRY[name]
        app.add_api_route(
            f"/api/{name}",
            route_for(name),
            methods=["POST"],
            name=name,
            summary=name,
            description=method.description,
            openapi_extra={
                "requestBody": {
                    "content": {"application/json": {"schema": method.params.model_json_schema()}}
                }
            },
        )

    @app.get("/api/health")
    async def health() -> Response:
        try:
            state = await backend.call("health_check", {})
        except Exception as exc:  # the same mapping as every other route
            return _json({"error": protocol.error_object(exc)}, _status_for(exc))
        return _json(
            {
                **state,
                "version": lcg.__version__,
                "scopes": sorted(scopes),
                "methods": methods,
                "auth": token is not None,
            }
        )

    @app.api_route(
        "/api/{name}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False
    )
    async def unknown(name: str, request: Request) -> Response:
        if request.method == "POST":
            return _refusal(404, f"IPC error: Method not found: {name}")
        return _refusal(405, f"use POST /api/{name}")

    first_graph_methods = {"knowledge_get_nodes_by_group", "knowledge_get_edges_by_group"}

    @app.get("/ui/first-graph.js", include_in_schema=False)
    async def first_graph(request: Request) -> Response:
        body: Any = None
        same_origin = request.headers.get("sec-fetch-site") == "same-origin"
        if token is None and same_origin and first_graph_methods <= set(methods):
            known_at = datetime.now(UTC) + timedelta(seconds=1)  # what the UI's "now" asks
            try:
                nodes = await backend.call("knowledge_get_nodes_by_group", {})
                edges = await backend.call(
                    "knowledge_get_edges_by_group",
                    {"known_at": known_at.isoformat(), "include_invalidated": True},
                )
            except Exception:  # the page reads the graph itself, and reports what fails
                logger.exception("the UI's first graph could not be read")
            else:
                body = {"nodes": nodes, "edges": edges}
        return Response(
            b"window.LCG_FIRST_GRAPH = " + orjson.dumps(body) + b";\n",
            media_type="text/javascript",
            headers={"cache-control": "no-store"},
        )

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(UI_DIR / "index.html", headers={"cache-control": "no-cache"})

    app.mount("/ui", StaticFiles(directory=UI_DIR), name="ui")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return _refusal(exc.status_code, str(exc.detail), dict(exc.headers or {}))

    origins = frozenset(cors_origins)
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=sorted(origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
        )
    app.add_middleware(_Guard, hosts=hosts, token=token, cors_origins=origins)
    return app


class _ParseError(Exception):
    """The request body is not JSON (answered like JSON-RPC's -32700)."""


# -- the server ----------------------------------------------------------------------------------


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers: the process's owner (RpcServer) handles signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class HttpService:
    """The HTTP API and UI on one TCP address, serving calls through `backend`."""

    def __init__(
        self,
        settings: Settings,
        backend: Backend,
        *,
        host: str | None = None,
        port: int | None = None,
        scopes: str | None = None,
        events: EventSink | None = None,
    ) -> None:
        """Check the configuration; nothing is bound yet.

        Raises:
            ConfigError: an unknown scope, a non-loopback host without `LCG_API_TOKEN`, or the
                workspace's token cannot be read or written.
        """
        self.host = host if host is not None else settings.http_host
        self.port = port if port is not None else settings.http_port
        self.scopes = parse_scopes(scopes if scopes is not None else settings.http_scope)
        if not is_loopback(self.host) and not settings.api_token:
            raise ConfigError(
                f"refusing to serve HTTP on {self.host}, which is not a loopback address, "
                "without a token: set LCG_API_TOKEN (clients then send "
                "'Authorization: Bearer <token>')"
            )
        extra = _split_list(settings.http_allowed_hosts)
        if "*" in extra and not settings.api_token:
            raise ConfigError("LCG_HTTP_ALLOWED_HOSTS='*' needs LCG_API_TOKEN")
        # Where the token comes from: the user's LCG_API_TOKEN, the workspace's file, or none.
        self.token_file: Path | None = None
        self.token: str | None
        if settings.api_token:
            self.token = settings.api_token
        elif settings.http_auth == "none":
            self.token = None
        else:
            self.token_file = settings.home / TOKEN_FILE
            self.token = workspace_token(settings.home)
        self.hosts = allowed_hosts(self.host, extra)
        self.app = build_app(
            backend,
            scopes=self.scopes,
            hosts=self.hosts,
            token=self.token,
            cors_origins=_split_list(settings.http_cors_origins),
            events=events,
        )
        self._graceful_seconds = settings.shutdown_timeout_ms / 1000
        self._socket: socket.socket | None = None
        self._server: _Uvicorn | None = None
        self._stop_requested = False
        self._stopped: anyio.Event | None = None

    @property
    def url(self) -> str:
        """The base URL clients use (the loopback name for a wildcard bind)."""
        host = self.host if self.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}"

    @property
    def browser_url(self) -> str:
        """The UI's address to open: with the workspace's token in the fragment, which the
        browser sends to no server; the page keeps it for its tab and drops it from the address
        bar. A token the user chose (`LCG_API_TOKEN`) is never printed: the page asks for it."""
        if self.token is None or self.token_file is None:
            return self.url + "/"
        return f"{self.url}/#token={self.token}"

    def bind(self) -> None:
        """Bind and listen now, so a busy port fails before anything else starts.

        Raises:
            ConfigError: the address cannot be bound.
        """
        if self._socket is not None:
            return
        try:
            infos = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except OSError as exc:
            raise ConfigError(f"cannot resolve HTTP host {self.host!r}: {exc}") from exc
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(512)
        except OSError as exc:
            sock.close()
            raise ConfigError(f"cannot listen on {self.host}:{self.port}: {exc}") from exc
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        self._socket = sock

    async def serve(self) -> None:
        """Serve until `stop` (binding first if `bind` was not called)."""
        self._stopped = anyio.Event()
        self.bind()
        assert self._socket is not None
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=max(1, round(self._graceful_seconds)),
        )
        self._server = _Uvicorn(config)
        self._server.should_exit = self._stop_requested
        logger.info("HTTP API and UI on %s (scopes: %s)", self.url, ",".join(sorted(self.scopes)))
        try:
            await self._server.serve(sockets=[self._socket])
        finally:
            self._socket.close()
            self._stopped.set()

    def stop(self) -> None:
        """Ask the server to finish in-flight requests and stop (safe from any thread)."""
        self._stop_requested = True
        if self._server is not None:
            self._server.should_exit = True

    async def drain(self) -> None:
        """Stop and wait until the last response is written."""
        self.stop()
        if self._stopped is not None:
            await self._stopped.wait()


async def serve_with_http(
    settings: Settings,
    *,
    host: str | None = None,
    port: int | None = None,
    scopes: str | None = None,
    socket_path: Path | None = None,
    events: EventSink | None = None,
    handle_signals: bool = True,
    ready: Callable[[HttpService], None] | None = None,
) -> None:
    """`lcg serve --http`: the socket service and the HTTP API in one process, one engine.

    The HTTP address is checked and bound first; then both serve. On shutdown (signal or
    `knowledge_close` on either transport) HTTP stops before the engine is closed.

    Raises:
        ConfigError: the HTTP configuration is refused or its address cannot be bound.
        ConflictError, StorageError: the socket service could not start.
    """
    rpc = RpcServer(settings, socket_path=socket_path, events=events, handle_signals=handle_signals)
    http = HttpService(settings, rpc, host=host, port=port, scopes=scopes, events=rpc.events)
    http.bind()
    rpc.drain_hooks.append(http.drain)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(http.serve)
            if ready is not None:
                ready(http)  # the bound port is known now (port 0 picks a free one)
            try:
                await rpc.serve()
            finally:
                http.stop()
    except BaseExceptionGroup as group:
        # A start-up failure (the workspace is busy, the socket is taken) is one LcgError: let
        # the caller print its one line instead of the task group's traceback.
        raise _first_lcg_error(group) or group from None


def _first_lcg_error(group: BaseExceptionGroup[BaseException]) -> LcgError | None:
    for exc in group.exceptions:
        if isinstance(exc, LcgError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_lcg_error(exc)
            if found is not None:
                return found
    return None
