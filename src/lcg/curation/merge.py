"""Merging alias entities into a canonical one (docs/api.md §knowledge_merge_entities), the core of
curation.

A merge is one WAL batch in the merge group's stream, committed in one transaction, made of
existing operations only: each active fact of the group touching an alias is either copied onto
the canonical (`fact.upsert`, new uuid, same text, times, attributes and relation type) and the
original invalidated, or — when the copy would be a self-loop or duplicate an active fact
(same source, target, name) — only invalidated (`fact.invalidate`, `invalid_at` = now). The alias
becomes a tombstone (`entity.upsert` with label `Merged` and `merged_into`, also in its
attributes), the canonical takes the earliest `created_at`, and the episodes that mentioned an
alias mention the canonical too (`mentions.add`). Facts owned by another group are never written.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from lcg.engine.follow import retrying
from lcg.models import DEFAULT_GROUP_ID, Entity, Fact
from lcg.storage.backend import GraphReader
from lcg.timeutil import now
from lcg.wal.changes import FactInvalidate, MentionsAdd, encode
from lcg.wal.records import Op, entity_op, fact_op

if TYPE_CHECKING:
    from lcg.engine import Engine, Writer

__all__ = ["MergeRequest", "exact_name_matches", "merge_entities", "merge_locked"]


@dataclass(frozen=True)
class MergeRequest:
    canonical_uuid: str | None = None
    canonical_name: str | None = None
    alias_uuids: tuple[str, ...] = ()
    alias_names: tuple[str, ...] = ()
    merge_all_by_name: bool = False
    group_id: str = DEFAULT_GROUP_ID
    dry_run: bool = False
    check_self_loops: bool = True


@dataclass
class _Outcome:
    canonical_uuid: str = ""
    merged_count: int = 0
    skipped: int = 0
    edges_rewritten: int = 0
    edges_deduplicated: int = 0
    foreign_edges_skipped: int = 0
    errors: list[str] = field(default_factory=list)
    plan: list[dict[str, Any]] = field(default_factory=list)

    def to_wire(self, dry_run: bool) -> dict[str, Any]:
        soft = ("not found", "matches no entities")
        out: dict[str, Any] = {
            "success": all(any(s in e for s in soft) for e in self.errors),
            "canonical_uuid": self.canonical_uuid,
            "merged_count": self.merged_count,
            "skipped": self.skipped,
            "edges_rewritten": self.edges_rewritten,
            "edges_deduplicated": self.edges_deduplicated,
            "foreign_edges_skipped": self.foreign_edges_skipped,
            "errors": self.errors,
        }
        if dry_run:
            out["plan"] = {
                "aliases": self.plan,
                "total_edges_rewritten": self.edges_rewritten,
                "total_edges_collapsed": self.edges_deduplicated,
                "total_foreign_edges_skipped": self.foreign_edges_skipped,
            }
        return out


def _fail(message: str, canonical_uuid: str = "") -> dict[str, Any]:
    return _Outcome(canonical_uuid=canonical_uuid, errors=[message]).to_wire(False) | {
        "success": False
    }


def exact_name_matches(conn: GraphReader, engine: Engine, group: str, name: str) -> list[Entity]:
    """Entities of the group named exactly `name` (case-sensitive), by (created_at, uuid)."""
    uuids = [u for u, _ in engine.names.lookup(group, name)]
    found = conn.entities_by_uuids(uuids)
    return [found[u] for u in uuids if u in found and found[u].name == name]


async def merge_entities(engine: Engine, request: MergeRequest) -> dict[str, Any]:
    """`knowledge_merge_entities`: always a result; domain failures are `success: false`."""

    def run() -> dict[str, Any]:
        with engine.writer() as w:
            return merge_locked(engine, w, request)

    return await anyio.to_thread.run_sync(retrying, run)  # server mode: a lost race plans again


def merge_locked(engine: Engine, w: Writer, request: MergeRequest) -> dict[str, Any]:
    """The merge, inside a pass that holds the writer `w`."""
    group = request.group_id or DEFAULT_GROUP_ID
    if not request.canonical_uuid and not request.canonical_name:
        return _fail("at least one of canonical_uuid or canonical_name must be provided")
    if not (request.alias_uuids or request.alias_names or request.merge_all_by_name):
        return _fail(
            "at least one of alias_uuids, alias_names, or merge_all_by_name must be provided"
        )
    with w.connection() as conn:
        if request.canonical_uuid:
            canonical = conn.entity_by_uuid(request.canonical_uuid)
            if canonical is None:
                return _fail(f"canonical entity not found: uuid={request.canonical_uuid}")
        else:
            assert request.canonical_name is not None
            live = [
                e
                for e in exact_name_matches(conn, engine, group, request.canonical_name)
                if "Merged" not in e.labels
            ]
            if not live:
                return _fail(
                    f"canonical entity not found: name={request.canonical_name}, group={group}"
                )
            canonical = live[0]
        if "Merged" in canonical.labels:
            return _fail(f"canonical entity {canonical.uuid} is already merged", canonical.uuid)
        if canonical.group_id != group:
            return _fail(
                f"canonical entity {canonical.uuid} belongs to group '{canonical.group_id}', "
                f"not '{group}'",
                canonical.uuid,
            )
        out = _Outcome(canonical_uuid=canonical.uuid)
        aliases: dict[str, Entity] = {}
        found = conn.entities_by_uuids(request.alias_uuids)
        for u in request.alias_uuids:
            entity = found.get(u)
            if entity is None:
                out.errors.append(f"alias uuid not found: {u}")
            elif entity.group_id != group:
                out.errors.append(
                    f"alias uuid {u} belongs to group '{entity.group_id}', not '{group}'"
                )
            else:
                aliases[u] = entity
        for name in request.alias_names:
            named = exact_name_matches(conn, engine, group, name)
            if not named:
                out.errors.append(f"alias name '{name}' matches no entities in group '{group}'")
            aliases.update((e.uuid, e) for e in named)
        if request.merge_all_by_name:
            aliases.update(
                (e.uuid, e) for e in exact_name_matches(conn, engine, group, canonical.name)
            )
        aliases.pop(canonical.uuid, None)
        ops = _plan(conn, engine, canonical, [aliases[u] for u in sorted(aliases)], request, out)
    if not request.dry_run and ops:
        w.commit([(group, ops)])
    return out.to_wire(request.dry_run)


def _plan(
    conn: GraphReader,
    engine: Engine,
    canonical: Entity,
    aliases: list[Entity],
    request: MergeRequest,
    out: _Outcome,
) -> list[Op]:
    """The merge's operations, counting what they do into `out`."""
    group = canonical.group_id
    active = [a for a in aliases if "Merged" not in a.labels]
    out.skipped = len(aliases) - len(active)
    out.merged_count = len(active)
    at = now()
    ids = {a.uuid for a in active}
    facts = {f.uuid: f for f in conn.active_facts_touching(ids | {canonical.uuid})}
    live = {(f.source_uuid, f.target_uuid, f.name) for f in facts.values() if f.group_id == group}
    copies: list[Fact] = []
    invalidated: list[str] = []
    earliest = canonical.created_at
    for alias in active:
        rewritten = duplicates = foreign = 0
        touching = [
            f
            for f in [*facts.values(), *copies]
            if alias.uuid in (f.source_uuid, f.target_uuid) and f.uuid not in invalidated
        ]
        for f in touching:
            if f.group_id != group:
                foreign += 1
                continue
            src = canonical.uuid if f.source_uuid == alias.uuid else f.source_uuid
            dst = canonical.uuid if f.target_uuid == alias.uuid else f.target_uuid
            invalidated.append(f.uuid)
            live.discard((f.source_uuid, f.target_uuid, f.name))
            if (request.check_self_loops and src == dst) or (src, dst, f.name) in live:
                duplicates += 1
                continue
            rewritten += 1
            live.add((src, dst, f.name))
            copies.append(replace(f, uuid=str(uuidlib.uuid4()), source_uuid=src, target_uuid=dst))
        out.edges_rewritten += rewritten
        out.edges_deduplicated += duplicates
        out.foreign_edges_skipped += foreign
        out.plan.append(
            {
                "uuid": alias.uuid,
                "name": alias.name,
                "active_edges": rewritten + duplicates,
                "duplicate_edges": duplicates,
                "foreign_edges_skipped": foreign,
            }
        )
        if alias.created_at is not None and (earliest is None or alias.created_at < earliest):
            earliest = alias.created_at
    if not active:
        return []
    ops: list[Op] = []
    if earliest != canonical.created_at:
        ops.append(entity_op(replace(canonical, created_at=earliest)))
    live_copies = [c for c in copies if c.uuid not in invalidated]
    ops += [fact_op(c) for c in live_copies]
    ops += [encode(FactInvalidate(u, at, at)) for u in invalidated if u in facts]
    for alias in active:
        attrs = json.loads(alias.attributes or "{}")
        attrs["merged_into"] = canonical.uuid
        ops.append(
            entity_op(
                replace(
                    alias,
                    labels=(*alias.labels, "Merged"),
                    merged_into=canonical.uuid,
                    attributes=json.dumps(
                        attrs, separators=(",", ":"), ensure_ascii=False, sort_keys=True
                    ),
                )
            )
        )
    mentions = conn.episodes_mentioning([a.uuid for a in active], group)
    ops += [encode(MentionsAdd(ep, (canonical.uuid,))) for ep in mentions]
    return ops
