"""A portable JSONL copy of the graph: `lcg export` / `lcg import`.

The file is one JSON object per line: a header (`{"kind": "header", "format": "lcg-portable",
"version": 1, "schema_version": n, "groups": [...]}`), then per group its episodes, entities,
facts and mentions (`kind` = `episode` / `entity` / `fact` / `mentions`, `group_id`, and the
row in the WAL's own field names). Embeddings are left out: they are derived and re-computed.

Import goes through the WAL-first commit path (each page of rows is one WAL batch of its group),
so the WAL stays the source of truth. It skips rows the graph already holds unchanged, so
importing the same file twice changes nothing the second time. In server mode a page whose
commit lost the race to another process is compared with the caught-up graph again and its
changes committed (`follow.retrying`).
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import orjson

from lcg.embedding.vectors import embed_plan, plan_for_changes
from lcg.engine.follow import retrying
from lcg.errors import ConflictError, InvalidRequestError
from lcg.fsmodes import private_dir
from lcg.storage.backend import schema_version
from lcg.wal.changes import decode_all
from lcg.wal.records import (
    Op,
    data_to_entity,
    data_to_episode,
    data_to_fact,
    entity_op,
    episode_op,
    fact_op,
)

if TYPE_CHECKING:
    from lcg.engine import Engine

__all__ = ["FORMAT", "VERSION", "export_graph", "import_graph"]

FORMAT = "lcg-portable"
VERSION = 1
PAGE = 500
Progress = Callable[[dict[str, Any]], None]


def _line(kind: str, group_id: str, data: dict[str, Any]) -> bytes:
    return orjson.dumps({"kind": kind, "group_id": group_id, **data}) + b"\n"


async def export_graph(
    engine: Engine,
    path: str,
    group_ids: list[str] | None = None,
    progress: Progress | None = None,
    *,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write the graph (or some groups) to `path` (mode 0600), through a temporary file in the
    same directory: an existing file is replaced atomically with `overwrite`, else refused.

    Raises:
        ConflictError: `path` exists and `overwrite` is false (nothing was written).
    """

    def run() -> dict[str, Any]:
        target = Path(path).expanduser().resolve()
        if not overwrite and target.exists():
            raise _exists(target)
        counts = dict.fromkeys(("episodes", "entities", "facts", "mentions"), 0)
        private_dir(target.parent)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)  # created 0600; reopened below
        tmp = Path(tmp_name)
        try:
            groups = _write_rows(engine, tmp, group_ids, counts, progress)
            _publish(tmp, target, overwrite)
        finally:
            tmp.unlink(missing_ok=True)
        return {"success": True, "path": str(target), "groups": groups, **counts}

    return await anyio.to_thread.run_sync(run)


def _exists(target: Path) -> ConflictError:
    return ConflictError(
        f"{target} already exists; pass overwrite: true to replace it (or choose another path)"
    )


def _publish(tmp: Path, target: Path, overwrite: bool) -> None:
    """Move the finished file into place: replacing (`overwrite`) or only if still absent."""
    if overwrite:
        tmp.replace(target)
        return
    try:
        os.link(tmp, target)  # atomic, and never replaces a file created meanwhile
    except FileExistsError:
        raise _exists(target) from None


def _write_rows(
    engine: Engine,
    tmp: Path,
    group_ids: list[str] | None,
    counts: dict[str, int],
    progress: Progress | None,
) -> list[str]:
    """The header and every row of the chosen groups into `tmp`; returns the groups written."""
    with engine.reader() as conn, tmp.open("wb") as out:
        groups = [g for g in conn.group_ids() if group_ids is None or g in group_ids]
        header = {
            "kind": "header",
            "format": FORMAT,
            "version": VERSION,
            "schema_version": schema_version(conn),
            "groups": groups,
        }
        out.write(orjson.dumps(header) + b"\n")
        for g in groups:
            for page in conn.episode_pages(g, PAGE):
                out.writelines(_line("episode", g, episode_op(e).data) for e in page)
                counts["episodes"] += len(page)
            for entities in conn.entity_pages(g, PAGE):
                out.writelines(_line("entity", g, entity_op(e).data) for e in entities)
                counts["entities"] += len(entities)
            for facts in conn.fact_pages(g, PAGE):
                out.writelines(_line("fact", g, fact_op(f).data) for f in facts)
                counts["facts"] += len(facts)
            for pairs in conn.mention_pages(g, PAGE):
                out.writelines(
                    _line("mentions", g, {"episode": ep, "entities": ents}) for ep, ents in pairs
                )
                counts["mentions"] += sum(len(ents) for _, ents in pairs)
            if progress is not None:
                progress({"message": f"exported group {g}", **counts})
    return groups


@dataclass
class _Group:
    episodes: list[dict[str, Any]] = field(default_factory=list)
    entities: list[dict[str, Any]] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    mentions: list[dict[str, Any]] = field(default_factory=list)


def _read(target: Path) -> tuple[dict[str, Any], dict[str, _Group]]:
    """The header and the rows by group, validated before anything is written.

    Raises:
        InvalidRequestError: naming the line that is not a valid portable record.
    """
    groups: dict[str, _Group] = {}
    header: dict[str, Any] | None = None
    try:
        handle = target.open("rb")
    except OSError as exc:
        raise InvalidRequestError(f"cannot read {target}: {exc}", field="path") from exc
    with handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                row = orjson.loads(raw)
                kind = row.pop("kind")
                if header is None:
                    if kind != "header" or row.get("format") != FORMAT:
                        raise ValueError(f"the first line must be an {FORMAT} header")
                    if row.get("version") != VERSION:
                        raise ValueError(f"unsupported version {row.get('version')!r}")
                    header = row
                    continue
                group = row.pop("group_id")
                if not isinstance(group, str) or not group:
                    raise ValueError("group_id must be a non-empty string")
                bucket = groups.setdefault(group, _Group())
                if kind == "episode":
                    data_to_episode(row, group)
                    bucket.episodes.append(row)
                elif kind == "entity":
                    data_to_entity(row, group)
                    bucket.entities.append(row)
                elif kind == "fact":
                    data_to_fact(row, group)
                    bucket.facts.append(row)
                elif kind == "mentions":
                    if not isinstance(row.get("episode"), str) or not isinstance(
                        row.get("entities"), list
                    ):
                        raise ValueError("mentions need an episode and a list of entities")
                    bucket.mentions.append(row)
                else:
                    raise ValueError(f"unknown kind {kind!r}")
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise InvalidRequestError(f"{target}:{number}: {exc}", field="path") from exc
    if header is None:
        raise InvalidRequestError(f"{target} is empty: no {FORMAT} header", field="path")
    return header, groups


def _pages(items: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(items), PAGE):
        yield items[start : start + PAGE]


async def import_graph(
    engine: Engine, path: str, progress: Progress | None = None
) -> dict[str, Any]:
    """Import a portable file; rows already present unchanged are skipped (idempotent)."""

    def run() -> dict[str, Any]:
        target = Path(path).expanduser().resolve()
        header, groups = _read(target)
        written = dict.fromkeys(("episodes", "entities", "facts", "mentions"), 0)
        unchanged = 0
        total = sum(
            len(b.episodes) + len(b.entities) + len(b.facts) + len(b.mentions)
            for b in groups.values()
        )
        done = 0
        # Every group's entities first: facts (also cross-group ones) and mentions need both
        # ends present to get their hops and links.
        for kind in ("entities", "episodes", "facts", "mentions"):
            for group, bucket in groups.items():
                for page in _pages(getattr(bucket, kind)):
                    ops = _page_ops(kind, page)
                    # Embedded before the lock (the commit then reads the embedding cache).
                    embed_plan(plan_for_changes(decode_all(ops, group)), engine.parts.embedder)
                    # A lost race (server mode): the page is compared again and re-committed.
                    fresh = retrying(functools.partial(_commit_page, engine, group, kind, ops))
                    unchanged += len(ops) - len(fresh)
                    written[kind] += len(fresh)
                    done += len(page)
                    if progress is not None:
                        progress(
                            {"message": f"imported {kind} of {group}", "done": done, "total": total}
                        )
        return {
            "success": True,
            "path": str(target),
            "schema_version": header.get("schema_version"),
            "groups": sorted(groups),
            "written": written,
            "unchanged": unchanged,
        }

    return await anyio.to_thread.run_sync(run)


def _commit_page(engine: Engine, group: str, kind: str, ops: list[Op]) -> list[Op]:
    """Under the write lock: commit what of the page the graph lacks; that part."""
    with engine.writer() as w, w.connection() as conn:
        fresh = _changed(conn, group, kind, ops)
        w.commit([(group, fresh)])
    return fresh


def _page_ops(kind: str, page: list[dict[str, Any]]) -> list[Op]:
    name = {
        "entities": "entity.upsert",
        "episodes": "episode.add",
        "facts": "fact.upsert",
        "mentions": "mentions.add",
    }[kind]
    return [Op(name, row) for row in page]


def _changed(conn: Any, group: str, kind: str, ops: list[Op]) -> list[Op]:
    """The operations that would change the graph (the rest are already applied)."""
    if kind == "entities":
        have_e = conn.entities_by_uuids([op.data["uuid"] for op in ops])
        return [op for op in ops if have_e.get(op.data["uuid"]) != data_to_entity(op.data, group)]
    if kind == "facts":
        have_f = conn.facts_by_uuids([op.data["uuid"] for op in ops])
        return [op for op in ops if have_f.get(op.data["uuid"]) != data_to_fact(op.data, group)]
    if kind == "episodes":
        have_ep = conn.episodes_by_uuids([op.data["uuid"] for op in ops])
        return [op for op in ops if have_ep.get(op.data["uuid"]) != data_to_episode(op.data, group)]
    linked = conn.episode_mentions([op.data["episode"] for op in ops])
    out = []
    for op in ops:
        missing = [u for u in op.data["entities"] if u not in linked.get(op.data["episode"], [])]
        if missing:
            out.append(Op("mentions.add", {"episode": op.data["episode"], "entities": missing}))
    return out
