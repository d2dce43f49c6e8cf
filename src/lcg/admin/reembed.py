"""Re-embedding: bring every vector row of a group up to the embedder in use.

`knowledge_backfill_summary_embeddings`. A vector row (`Embedding`, one per `<kind>:<owner>`)
records the hash of (model, text) it was made from (lcg.embedding.vectors), so a row is *current* when
that hash equals the hash of its owner's text under the embedder in use, and *missing* or
*stale* otherwise (an older model, a text edited by raw Cypher, a row never written). The pass:

1. reads each group's texts and rows on a reader connection (no lock);
2. embeds what is missing or stale in batches of `batch_size`, outside the write lock, through
   the embedding cache (a second run, or a later rebuild, embeds nothing again);
3. writes each batch's rows in its own short transaction under the write lock, after re-reading
   the owners' texts: a row whose text changed meanwhile is skipped (the write that changed it
   embedded it already). Rows that should not exist (a summary or content that became empty)
   are removed, and the group is restamped with the embedder in use (lcg.embedding.stamp).

Search keeps answering from the old vectors while this runs: a workspace stamped by another
model is searched with that model (`lcg.engine.warmup.SearchWarmup.settle_embedder`, when the
model loads offline), and only once every group is restamped does the search index swap to the new
vectors, all at once (`SearchIndex.swap_embedder`) — never a half-old, half-new index.

Vectors are derived data: nothing is appended to the WAL (a rebuild derives the same rows).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from lcg.embedding import stamp
from lcg.embedding.vectors import EmbeddingPlan, plan_for_rows, text_hash
from lcg.engine import Engine, exclusive
from lcg.models import EmbeddingRow, Entity, Episode, Fact
from lcg.storage.backend import GraphReader

__all__ = ["backfill_embeddings"]

Progress = Callable[[dict[str, Any]], None]

_GROUPS = (
    "MATCH (e:Entity) RETURN DISTINCT e.group_id AS g UNION MATCH (f:Fact) RETURN DISTINCT "
    "f.group_id AS g UNION MATCH (ep:Episode) RETURN DISTINCT ep.group_id AS g"
)


@dataclass
class _GroupPlan:
    """What one group needs: rows to (re-)embed, rows to remove, and what is current."""

    group_id: str
    todo: list[tuple[str, str, str]] = field(default_factory=list)  # (key, text, digest)
    remove: list[str] = field(default_factory=list)
    scanned: int = 0
    missing: int = 0
    stale: int = 0
    current: int = 0


def _group_plan(conn: GraphReader, group_id: str, owners: list[str] | None = None) -> EmbeddingPlan:
    """The vectors the group's rows (or only `owners`) should have, by lcg.embedding.vectors' rules."""
    p: dict[str, Any] = {"g": group_id}
    where = "WHERE n.group_id = $g"
    if owners is not None:
        p["u"] = owners
        where += " AND n.uuid IN $u"
    entities = [
        Entity(uuid=r[0], group_id=group_id, name=r[1] or "", summary=r[2] or "")
        for r in conn.rows(f"MATCH (n:Entity) {where} RETURN n.uuid, n.name, n.summary", p)
    ]
    facts = [
        Fact(r[0], group_id, "", "", name=r[2] or "", fact=r[1] or "")
        for r in conn.rows(f"MATCH (n:Fact) {where} RETURN n.uuid, n.fact, n.name", p)
    ]
    episodes = [
        Episode(uuid=r[0], group_id=group_id, name="", content=r[1] or "")
        for r in conn.rows(f"MATCH (n:Episode) {where} RETURN n.uuid, n.content", p)
    ]
    return plan_for_rows(entities, facts, episodes)


def _stored(conn: GraphReader, group_id: str) -> dict[str, str]:
    rows = conn.rows(
        "MATCH (v:Embedding) WHERE v.group_id = $g RETURN v.key, v.text_hash", {"g": group_id}
    )
    return {r[0]: r[1] for r in rows}


def _scan(conn: GraphReader, group_id: str, model: str) -> _GroupPlan:
    plan = _group_plan(conn, group_id)
    stored = _stored(conn, group_id)
    out = _GroupPlan(group_id)
    for kind, owner, _, text in plan.wanted:
        key, digest = f"{kind}:{owner}", text_hash(model, text)
        out.scanned += 1
        have = stored.get(key)
        if have == digest:
            out.current += 1
            continue
        if have is None:
            out.missing += 1
        else:
            out.stale += 1
        out.todo.append((key, text, digest))
    out.remove = [k for k in plan.stale if k in stored]
    return out


def _write_batch(
    engine: Engine,
    group_id: str,
    batch: list[tuple[str, str, str]],
    vectors: Any,
    last: bool,
    remove: list[str],
) -> int:
    """Write one batch's rows (those whose text is unchanged) under the write lock."""
    model = engine.parts.embedder.identity.model
    owners = list(dict.fromkeys(key.split(":", 1)[1] for key, _, _ in batch))
    with exclusive.write_lock(engine), exclusive.store(engine).transaction() as tx:
        now_wanted = {
            f"{kind}:{owner}": text_hash(model, text)
            for kind, owner, _, text in _group_plan(tx, group_id, owners).wanted
        }
        rows = [
            EmbeddingRow(key.split(":", 1)[0], key.split(":", 1)[1], group_id, digest, vectors[i])
            for i, (key, _, digest) in enumerate(batch)
            if now_wanted.get(key) == digest
        ]
        tx.put_embeddings(rows)
        if last:
            tx.delete_embeddings(remove)
            stamp.restamp_group(tx, group_id, engine.parts.embedder.identity)
    return len(rows)


def _run(
    engine: Engine,
    group_ids: list[str] | None,
    batch_size: int,
    dry_run: bool,
    progress: Progress | None,
) -> dict[str, Any]:
    model = engine.parts.embedder.identity.model
    with engine.reader() as conn:
        groups = group_ids if group_ids is not None else sorted(r[0] for r in conn.rows(_GROUPS))
        plans = [_scan(conn, g, model) for g in dict.fromkeys(groups)]
    total = sum(len(p.todo) for p in plans)
    done = 0
    per_group: dict[str, dict[str, int]] = {}
    for plan in plans:
        embedded = written = 0
        if not dry_run:
            # At least one (possibly empty) batch: the last one removes rows and restamps.
            batches = [
                plan.todo[i : i + batch_size] for i in range(0, len(plan.todo), batch_size)
            ] or [[]]
            for n, batch in enumerate(batches):
                # Embedding happens here, before `_write_batch` takes the write lock.
                vectors: Any = (
                    engine.parts.embedder.embed([t for _, t, _ in batch]) if batch else []
                )
                embedded += len(batch)
                last = n == len(batches) - 1
                written += _write_batch(engine, plan.group_id, batch, vectors, last, plan.remove)
                done += len(batch)
                if progress is not None and batch:
                    progress(
                        {
                            "phase": "embedding",
                            "group_id": plan.group_id,
                            "processed": done,
                            "total": total,
                            "message": f"embedded {done} of {total} vectors",
                        }
                    )
        per_group[plan.group_id] = {
            "scanned": plan.scanned,
            "missing": plan.missing,
            "stale": plan.stale,
            "already_current": plan.current,
            "embedded": embedded,
            "written": written,
            "skipped_changed": embedded - written,
            "removed": 0 if dry_run else len(plan.remove),
        }
    if not dry_run:
        # Every group restamped: search swaps to the new vectors now (they are all cached).
        exclusive.warmup(engine).settle_embedder()
    totals = {
        key: sum(g[key] for g in per_group.values())
        for key in ("scanned", "embedded", "already_current", "missing", "stale", "removed")
    }
    return {
        "success": True,
        "dry_run": dry_run,
        "embedding_model": model,
        "embedding_dim": engine.parts.embedder.identity.dim,
        **totals,
        "groups": per_group,
    }


async def backfill_embeddings(
    engine: Engine,
    group_ids: list[str] | None = None,
    batch_size: int = 256,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Embed every missing or stale vector row of the groups (default: every group with data).

    Returns counts: `scanned` (rows that should have a vector), `already_current`, `missing`,
    `stale`, `embedded` (0 in a dry run), `removed`, and the same per group.

    Raises:
        ExtractionError: the embedder failed (the batches written before stay written).
        StorageError: the database failed.
    """
    return await anyio.to_thread.run_sync(
        functools.partial(_run, engine, group_ids, batch_size, dry_run, progress)
    )
