"""WAL administration: named marks, preparing for a backup, and compacted dumps
(docs/api.md §admin).

- `mark_create` records a group's applied position under a name (`lcg.wal.marks`); restoring it
  is `knowledge_rebuild_from_wal {from_seq: 0, to_seq: seq, force_clear: true}`.
- `mark_list` / `mark_delete` touch only the filesystem, so they work without a database.
- `prepare_checkpoint` ends every open WAL file and checkpoints Kuzu's journal, under the write
  lock, so a copy of `.lcg/` taken next is consistent.
- `dump_wal` writes the current graph as a fresh WAL in lcg's own semantic format: per group,
  `entity.upsert`, `fact.upsert`, `episode.add`, then `mentions.add` lines, seq from 0, batches
  of up to 500 lines (one fsync each), a new `.wal-generation.json`, no marks. Replaying it
  reproduces the graph's rows.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread

from lcg.engine import Engine, exclusive
from lcg.engine.replay import position_key
from lcg.errors import ConflictError, InvalidRequestError, LcgError
from lcg.fsmodes import private_dir
from lcg.models import DEFAULT_GROUP_ID
from lcg.storage.backend import GraphReader
from lcg.wal import marks
from lcg.wal.layout import encode_group, fsync_dir, group_dir, list_groups
from lcg.wal.records import Op, entity_op, episode_op, fact_op
from lcg.wal.writer import GroupStream

__all__ = ["DUMP_PAGE", "dump_wal", "mark_create", "mark_delete", "mark_list", "prepare_checkpoint"]

DUMP_PAGE = 500


def _group(group_id: str) -> str:
    return group_id or DEFAULT_GROUP_ID


def _existing_group_dir(engine: Engine, group_id: str) -> Path:
    """The group's WAL directory for reading; refuses an id that cannot be a directory and a
    missing directory that a sibling differs from only by case.

    Raises:
        InvalidRequestError, ConflictError.
    """
    root = engine.parts.wal.root
    directory = group_dir(root, group_id)
    if not directory.exists() and root.is_dir():
        clash = [c.name for c in root.iterdir() if c.name.lower() == directory.name.lower()]
        if clash:
            raise ConflictError(
                f'group_id "{group_id}": WAL directory collides case-insensitively with {clash[0]!r}'
            )
    return directory


# -- marks ---------------------------------------------------------------------------------------


async def mark_create(engine: Engine, name: str, group_id: str) -> dict[str, Any]:
    """`knowledge_wal_mark_create`: record the group's applied position under `name`."""
    group = _group(group_id)
    marks.validate_name(name)
    encode_group(group)

    def run() -> dict[str, Any]:
        # Under the write lock no commit is half done, so the recorded position is the graph's.
        with engine.writer() as writer:
            with writer.connection() as conn:
                raw = conn.get_meta(position_key(group))
                has_data = any(conn.group_counts(group).values())
            applied, recorded_generation = _position(raw)
            on_disk = engine.parts.wal.generation(group)
            if not has_data:
                seq = None  # nothing applied that a restore must reproduce: the group is empty
            elif applied is None:
                raise InvalidRequestError(
                    "knowledge_wal_mark_create: applied_seq is unknown (null) — the group's WAL "
                    "position was never recorded; run knowledge_rebuild_from_wal for the group "
                    "first so its position is known",
                    field="group_id",
                )
            elif recorded_generation != on_disk:
                raise InvalidRequestError(
                    f'knowledge_wal_mark_create: the applied position of group "{group}" '
                    "belongs to another WAL stream generation than the one on disk (the stream "
                    "was replaced); run knowledge_rebuild_from_wal for the group first",
                    field="group_id",
                )
            else:
                seq = applied
            stream = engine.parts.wal.stream(group)  # creates the directory and generation if new
            generation = engine.parts.wal.generation(group) or stream.generation
            mark = marks.create_mark(stream.directory, name, seq, generation)
        return {
            "success": True,
            "name": mark.name,
            "group_id": group,
            "seq": mark.seq,
            "generation": mark.wal_generation,
        }

    return await anyio.to_thread.run_sync(run)


def _position(raw: str | None) -> tuple[int | None, str | None]:
    """(applied_seq, generation) of a recorded WAL position (None, None when unrecorded)."""
    if raw is None:
        return None, None
    value = json.loads(raw)
    seq, generation = value.get("applied_seq"), value.get("generation")
    return (
        seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        generation if isinstance(generation, str) else None,
    )


async def mark_list(engine: Engine, group_id: str) -> dict[str, Any]:
    """`knowledge_wal_mark_list`: the group's active marks with reachability (no database)."""
    group = _group(group_id)

    def run() -> dict[str, Any]:
        directory = _existing_group_dir(engine, group)
        return {
            "group_id": group,
            "checkpoints": [m.to_wire() for m in marks.list_marks(directory)],
        }

    return await anyio.to_thread.run_sync(run)


async def mark_delete(engine: Engine, name: str, group_id: str) -> dict[str, Any]:
    """`knowledge_wal_mark_delete`: tombstone the active mark `name` (no database)."""
    group = _group(group_id)

    def run() -> dict[str, Any]:
        directory = _existing_group_dir(engine, group)
        marks.delete_mark(directory, name)
        return {"success": True, "name": name, "group_id": group}

    return await anyio.to_thread.run_sync(run)


# -- prepare checkpoint --------------------------------------------------------------------------


async def prepare_checkpoint(engine: Engine) -> dict[str, Any]:
    """`knowledge_prepare_checkpoint`: end every open WAL file and fold Kuzu's journal into the
    database file, under the write lock."""

    def run() -> dict[str, Any]:
        with exclusive.write_lock(engine):
            store = exclusive.store(engine)
            flushed = engine.parts.wal.close_files()
            checkpointed = store.checkpoint()
            root = engine.parts.wal.root
            total = sum(1 for g in list_groups(root) for _ in group_dir(root, g).glob("*.jsonl"))
        return {
            "success": True,
            "files_flushed": flushed,
            "files_total": total,
            "database_checkpointed": checkpointed,
        }

    return await anyio.to_thread.run_sync(run)


# -- dump ----------------------------------------------------------------------------------------


def _default_target(engine: Engine) -> Path:
    return engine.settings.db_path.parent.parent / "wal-compacted"


def _check_target(target: Path, wal_root: Path) -> None:
    resolved, root = target.resolve(), wal_root.resolve()
    if resolved == root or root in resolved.parents or resolved in root.parents:
        # A stream written there would be replayed as a live group at the next open.
        raise InvalidRequestError(
            f"knowledge_dump_wal: target_dir '{target}' overlaps the live WAL directory "
            f"'{wal_root}'; choose a path outside it",
            field="target_dir",
        )
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidRequestError(
            f"knowledge_dump_wal: target_dir '{target}' already exists and is not empty; supply "
            "a clean path or remove existing files first",
            field="target_dir",
        )


def _group_ops(conn: GraphReader, group: str, counts: dict[str, int]) -> Iterator[list[Op]]:
    """The group's rows as pages of operations: entities, facts, episodes, mentions."""
    entity_ids: set[str] = set()
    for entities in conn.entity_pages(group, DUMP_PAGE):
        entity_ids.update(e.uuid for e in entities)
        counts["entities"] += len(entities)
        yield [entity_op(e) for e in entities]
    for facts in conn.fact_pages(group, DUMP_PAGE):
        counts["facts"] += len(facts)
        counts["hops"] += sum(
            2 for f in facts if f.source_uuid in entity_ids and f.target_uuid in entity_ids
        )
        yield [fact_op(f) for f in facts]
    for episodes in conn.episode_pages(group, DUMP_PAGE):
        counts["episodes"] += len(episodes)
        yield [episode_op(ep) for ep in episodes]
    for page in conn.mention_pages(group, DUMP_PAGE):
        counts["mentions"] += sum(len(ents) for _, ents in page)
        yield [Op("mentions.add", {"episode": ep, "entities": ents}) for ep, ents in page]


async def dump_wal(engine: Engine, group_id: str | None, target_dir: str | None) -> dict[str, Any]:
    """`knowledge_dump_wal`: the current graph as a fresh, compacted WAL.

    With `group_id`, `target_dir` is that group's stream (copy it to `<wal root>/<group>/`).
    Without, `target_dir` is a WAL root holding one stream directory per group (lcg's WAL lines
    carry no group id, so groups cannot share one stream as the reference's do).
    """
    target = Path(target_dir) if target_dir is not None else _default_target(engine)
    if group_id is not None:
        encode_group(group_id)
    _check_target(target, engine.parts.wal.root)

    def run() -> dict[str, Any]:
        with engine.writer() as writer:
            _check_target(target, engine.parts.wal.root)
            created = not target.exists()
            streams: list[GroupStream] = []
            counts = dict.fromkeys(("entities", "facts", "episodes", "mentions", "hops"), 0)
            lines = 0
            skipped: list[str] = []
            try:
                private_dir(target)
                with writer.connection() as conn:
                    groups = [group_id] if group_id is not None else conn.group_ids()
                    for group in groups:
                        if group_id is None:
                            try:
                                directory = target / encode_group(group)
                            except InvalidRequestError:
                                skipped.append(group)  # e.g. "": no stream can hold it
                                continue
                        else:
                            directory = target
                        stream = GroupStream(
                            group, directory, 0, engine.settings.wal_max_events_per_file
                        )
                        streams.append(stream)
                        for ops in _group_ops(conn, group, counts):
                            stream.append(ops)
                            lines += len(ops)
                        stream.close()
                fsync_dir(target)
            except BaseException:
                for stream in streams:
                    stream.close()
                _remove_partial(target, created)
                raise
            files = sorted(target.rglob("*.jsonl"))
        out: dict[str, Any] = {
            "success": True,
            "nodes_dumped": counts["entities"] + counts["facts"] + counts["episodes"],
            "edges_dumped": counts["hops"] + counts["mentions"],
            "files_written": len(files),
            "target_dir": str(target),
            "entities_dumped": counts["entities"],
            "facts_dumped": counts["facts"],
            "episodes_dumped": counts["episodes"],
            "mentions_dumped": counts["mentions"],
            "lines_written": lines,
            "groups": [s.group_id for s in streams],
        }
        if skipped:
            out["skipped_groups"] = skipped
        return out

    try:
        return await anyio.to_thread.run_sync(run)
    except LcgError:
        raise
    except OSError as exc:
        raise InvalidRequestError(
            f"knowledge_dump_wal: failed to create WalWriter: {exc}", field="target_dir"
        ) from exc


def _remove_partial(target: Path, created: bool) -> None:
    """Undo a failed dump: the whole directory if this call made it, else only WAL files."""
    with contextlib.suppress(OSError):
        if created:
            shutil.rmtree(target)
            return
        for path in target.rglob("*.jsonl"):
            path.unlink()
