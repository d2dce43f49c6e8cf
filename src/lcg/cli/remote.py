"""Finding the workspace a CLI command works on: a running service, or the files themselves.

Kuzu allows one process per database: while `lcg serve` owns the
workspace, `lcg status` and `lcg cypher` must go through its socket instead of opening the files.
Commands that only read open the files through `existing_settings`, which refuses a workspace
that does not exist instead of letting the engine create an empty one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

from lcg.config import Settings, load_settings
from lcg.errors import LcgError
from lcg.service.rpc.client import RpcClient, RpcError

__all__ = ["NoWorkspaceError", "existing_settings", "service_client", "socket_path_for"]

# How long a command waits for a service that is still opening its database.
_SETTLE_SECONDS = 60.0
_PROBE_SECONDS = 5.0


def socket_path_for(home: str | None, socket_path: str | None) -> Path:
    """The socket a command should try: `--socket`, else the configured one."""
    if socket_path:
        return Path(socket_path).resolve()
    overrides: dict[str, Any] = {"home": home} if home else {}
    return load_settings(overrides=overrides).socket_path


def service_client(home: str | None, socket_path: str | None = None) -> RpcClient | None:
    """A client connected to a service that answers `health_check` on the socket, or None.

    A service that is still initializing is waited for (up to a minute), so the command's
    call does not fail with "initializing".
    """
    path = socket_path_for(home, socket_path)
    if not path.exists():
        return None
    # A short timeout while probing: a hung process on the socket must not hang the command.
    client = RpcClient(path, timeout=_PROBE_SECONDS)
    deadline = time.monotonic() + _SETTLE_SECONDS
    try:
        while True:
            health = client.call("health_check")
            if health.get("state") != "initializing" or time.monotonic() > deadline:
                client.set_timeout(None)  # the command's own call may legitimately take long
                return client
            time.sleep(0.1)
    except (OSError, RpcError, ValueError):
        client.close()
        return None


class NoWorkspaceError(LcgError):
    """A read-only command was pointed at a directory that holds no workspace."""

    wire_prefix: ClassVar[str] = ""


def existing_settings(home: str | None) -> Settings:
    """The settings of a workspace that exists (a database or a WAL is there).

    Raises:
        NoWorkspaceError: there is none; nothing was created.
    """
    settings = load_settings(overrides={"home": home} if home else {})
    if settings.db_path.exists() or settings.wal_dir.is_dir():
        return settings
    raise NoWorkspaceError(
        f"no lcg workspace at {settings.home} (no database, no WAL), and this command does not "
        "create one. Name the workspace with --home DIR or LCG_HOME (`lcg demo` makes "
        "`.lcg-demo`), or create one there with `lcg ingest` or `lcg serve`."
    )
