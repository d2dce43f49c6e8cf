"""The FalkorDB backend of the storage protocol (server mode, docs/design.md).

One FalkorDB graph per group (key `lcg:<group>`), the group's WAL as a Redis stream next to it
(`{lcg:<group>}:wal`, the same hash slot), every commit one MULTI/EXEC of the stream append
and the group's Cypher statements, guarded by the group's position (docs/server-mode-design.md).

This package is the only one that imports the Redis client (`redis`, from the optional `server`
extra); `keys` and `cypher` do not, so `lcg` imports without the extra, and only
`lcg.storage.falkordb.backend` needs it.
"""

from __future__ import annotations

import importlib.util

__all__ = ["available"]


def available() -> bool:
    """Whether the client the backend needs is installed (`pip install 'lcg[server]'`)."""
    return importlib.util.find_spec("redis") is not None
