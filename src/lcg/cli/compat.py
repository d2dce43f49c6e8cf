"""`liminis-context-graph`: the reference service's command line, so existing configs keep working.

An MCP client config that ran the reference binary works by changing only the command name.
Flags follow docs/api.md §cli exactly: arguments are scanned left to right, a flag that takes a
value consumes the next argument, only `--scope` also accepts `--scope=LIST`, `-h/--help` wins
over everything. Usage errors print `liminis-context-graph: <message>` to stderr and exit 2;
fatal startup errors exit 1. stdout carries only `--help`/`--version` text or MCP messages.

Modes: `--mcp-stdio` (standalone MCP), `--mcp-stdio --connect SOCKET` (attached MCP), neither
(the JSON-RPC socket service, when this build has it).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import lcg
from lcg.cli.mcp_stdio import serve_mcp
from lcg.config import load_settings
from lcg.errors import ConfigError, LcgError
from lcg.fsmodes import private_umask

__all__ = ["Options", "main", "parse_args"]

PROG = "liminis-context-graph"
REFERENCE_SIDECAR = "/tmp/liminis-inference.sock"  # the reference's default embedding sidecar

USAGE = f"""Usage: {PROG} [OPTIONS]

Runs the lcg context graph: the JSON-RPC socket service by default, or an MCP server on
stdin/stdout with --mcp-stdio.

Options:
  --mcp-stdio              Serve MCP on stdin/stdout instead of the socket service.
  --scope LIST             MCP tools to expose: comma list of read, write, cypher, admin, all
                           (default all). Also --scope=LIST.
  --connect SOCKET         MCP attached mode: forward every call to the service on SOCKET.
  --allow-remote-close     Attached mode: expose knowledge_close (stops the remote service).
  --embedder-uds SOCKET    OpenAI-compatible /v1/embeddings endpoint on a Unix socket.
  --embedder-http URL      OpenAI-compatible /v1/embeddings endpoint over HTTP.
  --extractor-uds SOCKET   OpenAI-compatible chat-completions endpoint on a Unix socket
                           (extraction).
  --extractor-http URL     OpenAI-compatible chat-completions endpoint over HTTP (extraction).
  -h, --help               Print this help and exit.
  -V, --version            Print the version and exit.
"""

_VALUE_FLAGS = (
    "--scope",
    "--connect",
    "--embedder-uds",
    "--embedder-http",
    "--extractor-uds",
    "--extractor-http",
)


class UsageError(Exception):
    """A command-line mistake: printed with the program name, exit status 2."""


@dataclass
class Options:
    mcp_stdio: bool = False
    scope: str | None = None
    connect: str | None = None
    allow_remote_close: bool = False
    embedder_uds: str | None = None
    embedder_http: str | None = None
    extractor_uds: str | None = None
    extractor_http: str | None = None
    version: bool = False


def parse_args(argv: Sequence[str]) -> Options:
    """Parse the reference's flags (help is handled by the caller, before this).

    Raises:
        UsageError: unknown argument, missing value, mutually exclusive or MCP-only flags,
            a bad scope list, or a malformed URL.
    """
    opts = Options()
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--mcp-stdio":
            opts.mcp_stdio = True
        elif arg == "--allow-remote-close":
            opts.allow_remote_close = True
        elif arg in ("-V", "--version"):
            opts.version = True
            return opts
        elif arg.startswith("--scope="):
            opts.scope = arg.removeprefix("--scope=")
        elif arg in _VALUE_FLAGS:
            if i >= len(args):
                raise UsageError(f"{arg} requires a value")
            setattr(opts, arg.removeprefix("--").replace("-", "_"), args[i])
            i += 1
        else:
            raise UsageError(f"unknown argument '{arg}'\n\n{USAGE}")
    for a, b in (("embedder_uds", "embedder_http"), ("extractor_uds", "extractor_http")):
        if getattr(opts, a) is not None and getattr(opts, b) is not None:
            raise UsageError(
                f"--{a.replace('_', '-')} and --{b.replace('_', '-')} are mutually exclusive"
            )
    if not opts.mcp_stdio:
        for name in ("connect", "scope"):
            if getattr(opts, name) is not None:
                raise UsageError(f"--{name} requires --mcp-stdio")
    if opts.scope is not None:
        from lcg.service.mcp import parse_scopes

        try:
            parse_scopes(opts.scope)
        except ConfigError as exc:
            raise UsageError(exc.message) from None
    for name in ("embedder_http", "extractor_http"):
        url = getattr(opts, name)
        if url is not None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise UsageError(
                    f"--{name.replace('_', '-')} must be an http:// or https:// URL with a "
                    f"host, got '{url}'"
                )
    return opts


def _fail(message: str, status: int) -> NoReturn:
    print(f"{PROG}: {message}", file=sys.stderr)
    sys.exit(status)


def _check_sidecars(opts: Options) -> None:
    """Validate the embedder/extractor flags: a socket must exist (unless attached)."""
    given = [
        (flag, value)
        for flag, value in (
            ("--embedder-uds", opts.embedder_uds),
            ("--embedder-http", opts.embedder_http),
            ("--extractor-uds", opts.extractor_uds),
            ("--extractor-http", opts.extractor_http),
        )
        if value is not None
    ]
    if not given:
        return
    if opts.connect is not None:
        return  # attached mode: accepted and ignored, like the reference
    for flag, value in given:
        if flag.endswith("-uds") and not Path(value).exists():
            _fail(f"{flag}: socket '{value}' does not exist", 1)


def extractor_overrides(opts: Options) -> dict[str, str]:
    """The extractor flags as settings overrides (attached mode ignores them)."""
    if opts.connect is not None:
        return {}
    given = (("extractor_uds", opts.extractor_uds), ("extractor_http", opts.extractor_http))
    return {name: value for name, value in given if value is not None}


def embedder_endpoint(opts: Options) -> tuple[str, str] | None:
    """The embedding endpoint as ("uds" | "http", where), in the reference's order
    (docs/api.md §startup, the embedding endpoint): `--embedder-uds`, `--embedder-http`, then
    `/tmp/liminis-inference.sock` if it exists and no endpoint or embedder is configured otherwise.
    None: lcg's own selection (`LCG_EMBEDDER`, README "Embeddings") applies. Attached mode ignores
    the flags.

    Raises:
        ConfigError: the settings are invalid.
    """
    if opts.connect is not None:
        return None
    if opts.embedder_uds is not None:
        return "uds", str(Path(opts.embedder_uds).resolve())
    if opts.embedder_http is not None:
        return "http", opts.embedder_http
    settings = load_settings()
    if (
        settings.embedder == "auto"
        and not (settings.embedding_url or settings.embedding_uds)
        and Path(REFERENCE_SIDECAR).exists()
    ):
        return "uds", REFERENCE_SIDECAR
    return None


def _run_socket_service(extra_args: Sequence[str] = ()) -> None:
    if (
        importlib.util.find_spec("lcg.service.rpc") is None
        or importlib.util.find_spec("lcg.service.rpc.server") is None
    ):
        _fail(
            "the JSON-RPC socket service is not available in this build (lcg.service.rpc.server is "
            "missing); run with --mcp-stdio for MCP over stdio",
            1,
        )
    from lcg.cli.main import cli

    if "serve" not in cli.commands:
        _fail(
            "the JSON-RPC socket service is not available in this build (no `lcg serve` command); "
            "run with --mcp-stdio for MCP over stdio",
            1,
        )
    cli.main(args=["serve", *extra_args], prog_name=PROG, standalone_mode=False)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `liminis-context-graph` script."""
    private_umask()  # the database's own files too: nothing lcg creates is for other users
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        print(USAGE, end="")
        sys.exit(0)
    try:
        opts = parse_args(args)
    except UsageError as exc:
        _fail(str(exc), 2)
    if opts.version:
        print(f"{PROG} {lcg.__version__}")
        sys.exit(0)
    _check_sidecars(opts)
    try:
        endpoint = embedder_endpoint(opts)
        if opts.mcp_stdio:
            overrides: dict[str, Any] = dict(extractor_overrides(opts))
            if endpoint is not None:
                kind, where = endpoint
                key = "embedding_uds" if kind == "uds" else "embedding_url"
                overrides.update({key: where, "embedder": "http"})
            serve_mcp(
                opts.scope or "all", opts.connect, opts.allow_remote_close, overrides, prog=PROG
            )
        else:
            flags = [f"--{k.replace('_', '-')}={v}" for k, v in extractor_overrides(opts).items()]
            if endpoint is not None:
                flags.append(f"--embedder-{endpoint[0]}={endpoint[1]}")
            _run_socket_service(flags)
    except LcgError as exc:
        _fail(exc.wire_message(), exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
