"""Graph deletes: an episode, the episodes of a source file or chunk, whole groups (docs/api.md
§graph). Each is one `Engine.write`: the rows to delete are found on the writer under the
write lock and deleted by one WAL batch per group, in one transaction. Purging a group also
unbinds the cross-group pointers that named it (`lcg.curation.pointers.unbind_plan`).
`knowledge_clear_all` replaces the database itself: `lcg.admin.clear`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lcg.curation.pointers import unbind_plan
from lcg.engine import Engine
from lcg.errors import InvalidRequestError
from lcg.storage.backend import GraphReader
from lcg.wal.changes import EpisodeDelete, GroupPurge, encode
from lcg.wal.records import Op

__all__ = ["delete_by_group", "delete_by_source", "delete_chunk_episode", "delete_episode"]

Batches = list[tuple[str, list[Op]]]


def _episode_deletes(matches: list[tuple[str, str]]) -> Batches:
    by_group: dict[str, list[Op]] = {}
    for ep_uuid, gid in matches:
        by_group.setdefault(gid, []).append(encode(EpisodeDelete(ep_uuid)))
    return list(by_group.items())


async def delete_episode(engine: Engine, episode_uuid: str) -> dict[str, Any]:
    def plan(conn: GraphReader) -> tuple[dict[str, Any], Batches]:
        groups = conn.episode_groups([episode_uuid])
        return {"status": "deleted"}, _episode_deletes(list(groups.items()))

    return await engine.write(plan)


async def delete_by_source(
    engine: Engine, source_file: str, group_ids: list[str]
) -> dict[str, Any]:
    """Delete the episodes ingested from `source_file` (or its chunks) in the groups."""
    return await _delete_matching(
        engine,
        "source_file",
        source_file,
        lambda c: c.episodes_matching(group_ids, source_file=source_file),
    )


async def delete_chunk_episode(
    engine: Engine, chunk_id: str, group_ids: list[str]
) -> dict[str, Any]:
    """Delete the episodes named `chunk_id` in the groups."""
    return await _delete_matching(
        engine,
        "chunk_id",
        chunk_id,
        lambda c: c.episodes_matching(group_ids, chunk_id=chunk_id),
    )


async def _delete_matching(
    engine: Engine, key: str, value: str, find: Callable[[GraphReader], list[tuple[str, str]]]
) -> dict[str, Any]:
    def plan(conn: GraphReader) -> tuple[dict[str, Any], Batches]:
        matches = find(conn)
        result = {
            "success": True,
            key: value,
            "deleted_count": len(matches),
            "deleted_uuids": [m[0] for m in matches],
        }
        return result, _episode_deletes(matches)

    return await engine.write(plan)


async def delete_by_group(
    engine: Engine, group_ids: list[str], dry_run: bool, confirm: bool
) -> dict[str, Any]:
    if not dry_run and not confirm:
        raise InvalidRequestError(
            "Must set 'confirm' to true to purge group data (or 'dry_run' to preview)",
            field="confirm",
        )

    def plan(conn: GraphReader) -> tuple[dict[str, Any], Batches]:
        counts = [conn.group_counts(g) for g in group_ids]
        impacts, unbind = unbind_plan(engine, conn, group_ids)
        result = {
            "success": True,
            "dry_run": dry_run,
            "groups": [{"group_id": g, **n} for g, n in zip(group_ids, counts, strict=True)],
            "unbound_impacts": impacts,
            "applied_seq_reset": False,
        }
        if dry_run:
            return result, []
        purges = [
            (g, [encode(GroupPurge())])
            for g, n in zip(group_ids, counts, strict=True)
            if any(n.values())
        ]
        return result, purges + list(unbind.items())

    return await engine.write(plan)
