"""Reads the portable import needs to skip rows the graph already holds (lcg.curation.portable)."""

from __future__ import annotations

from collections.abc import Iterable

from lcg.models import Episode
from lcg.storage.graph import EPISODE_COLS, _episode
from lcg.storage.store import Conn

__all__ = ["episodes_by_uuids"]


def episodes_by_uuids(conn: Conn, uuids: Iterable[str]) -> dict[str, Episode]:
    rows = conn.rows(
        f"UNWIND $uuids AS u MATCH (ep:Episode {{uuid: u}}) RETURN {EPISODE_COLS}",
        {"uuids": list(uuids)},
    )
    return {row[0]: _episode(row) for row in rows}
