"""Serving MCP on stdin/stdout, for both `lcg mcp` and `liminis-context-graph --mcp-stdio`.

Its own module so that neither command line imports the other: `cli.main` and `cli.compat` both
import this one (the MCP SDK itself is imported only when a server starts).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from lcg.config import load_settings

__all__ = ["serve_mcp"]


def serve_mcp(
    scope: str,
    socket_path: str | None,
    allow_remote_close: bool,
    overrides: dict[str, Any] | None = None,
    *,
    prog: str,
    reference_scopes: bool = True,
) -> None:
    """Run MCP on stdio: attached when `socket_path` is given, standalone otherwise.

    `reference_scopes`: group the tools by the reference's scopes (this entry point's promise:
    a config that ran the reference sees the same tools); `lcg mcp` passes False unless asked,
    so destructive tools need `admin` there.

    Raises:
        ConfigError: a bad scope list or setting.
        LcgError: the database (standalone) or the service (attached) cannot be reached.
    """
    from lcg.service import mcp

    _log_to_stderr()
    scopes = mcp.parse_scopes(scope)
    settings = load_settings(overrides=overrides)
    if socket_path is not None:
        mcp.run_attached(
            socket_path,
            scopes,
            allow_remote_close=allow_remote_close,
            timeout_ms=settings.attached_call_timeout_ms,
            shutdown_timeout_ms=settings.shutdown_timeout_ms,
            reference_scopes=reference_scopes,
        )
        return
    if allow_remote_close:
        print(
            f"{prog}: warning: --allow-remote-close only applies with --connect; ignored",
            file=sys.stderr,
        )
    mcp.run_standalone(settings, scopes, reference_scopes=reference_scopes)


def _log_to_stderr() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.WARNING,
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
