"""Cross-group pointers (docs/api.md §curation): edges of one group whose endpoints are named in
others.

A side given as `{"source_group_id", "endpoint_name"}` becomes a pointer stored in the fact's
`attributes.cross_group_pointers[src|dst]`: the normalised name, the group it is looked up in,
its `binding_state` (`bound` / `unbound` / `ambiguous`), the `resolved_uuid` when bound and
`bound_at_seq`, the source group's applied WAL position when it was resolved. The fact's
`source_uuid`/`target_uuid` hold the resolved uuid or `""`; an unresolved side has no hop, so the
two-hop reads never see the edge until a rebind binds it.

Every change is an ordinary `fact.upsert` / `fact.invalidate` in the stream of the group that
owns the fact, so the WAL reproduces pointers exactly.
"""

from __future__ import annotations

import json
import unicodedata
import uuid as uuidlib
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from lcg.engine.follow import retrying
from lcg.engine.replay import applied_seq
from lcg.errors import InvalidRequestError, NotFoundError
from lcg.models import Fact
from lcg.storage import crossgroup
from lcg.storage.backend import GraphReader
from lcg.timeutil import now, to_wal
from lcg.wal.records import Op, fact_op

if TYPE_CHECKING:
    from lcg.engine import Engine, Writer

__all__ = [
    "Endpoint",
    "Pointer",
    "add_cross_group_edge",
    "counts_by_state",
    "normalize_endpoint",
    "rebind",
    "rebind_locked",
    "unbind_plan",
]

SIDES = ("src", "dst")
STATES = ("bound", "unbound", "ambiguous")


def normalize_endpoint(name: str) -> str:
    """Control characters removed, trimmed, lower-cased (docs/api.md §records)."""
    return "".join(c for c in name if unicodedata.category(c) != "Cc").strip().lower()


@dataclass(frozen=True)
class Pointer:
    source_group_id: str
    endpoint_name: str
    binding_state: str
    resolved_uuid: str | None = None
    bound_at_seq: int | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source_group_id": self.source_group_id,
            "endpoint_name": self.endpoint_name,
        }
        if self.resolved_uuid is not None:
            out["resolved_uuid"] = self.resolved_uuid
        if self.bound_at_seq is not None:
            out["bound_at_seq"] = self.bound_at_seq
        out["binding_state"] = self.binding_state
        return out

    @classmethod
    def from_wire(cls, value: Any) -> Pointer | None:
        if not isinstance(value, dict):
            return None
        seq = value.get("bound_at_seq")
        resolved = value.get("resolved_uuid")
        return cls(
            source_group_id=str(value.get("source_group_id", "")),
            endpoint_name=str(value.get("endpoint_name", "")),
            binding_state=str(value.get("binding_state", "unbound")),
            resolved_uuid=resolved if isinstance(resolved, str) else None,
            bound_at_seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        )


@dataclass(frozen=True)
class Endpoint:
    """One side of `knowledge_add_cross_group_edge`: a uuid in the edge's group, or a name."""

    uuid: str | None = None
    source_group_id: str | None = None
    endpoint_name: str | None = None


def _attributes(fact: Fact) -> dict[str, Any]:
    try:
        value = json.loads(fact.attributes or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def pointers_of(fact: Fact) -> dict[str, Pointer]:
    raw = _attributes(fact).get(crossgroup.POINTER_KEY)
    if isinstance(raw, str):  # written by a client through canonical_attributes
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = None
    if not isinstance(raw, dict):
        return {}
    out = {}
    for side in SIDES:
        pointer = Pointer.from_wire(raw.get(side))
        if pointer is not None:
            out[side] = pointer
    return out


def _with_pointers(fact: Fact, pointers: dict[str, Pointer]) -> str:
    attrs = _attributes(fact)
    attrs[crossgroup.POINTER_KEY] = {s: p.to_wire() for s, p in pointers.items()}
    return json.dumps(attrs, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def counts_by_state(conn: GraphReader) -> dict[str, int]:
    """`knowledge_status.cross_group_pointers`: pointers of non-invalidated facts by state."""
    out = dict.fromkeys(STATES, 0)
    for fact in conn.pointer_facts():
        for pointer in pointers_of(fact).values():
            if pointer.binding_state in out:
                out[pointer.binding_state] += 1
    return out


def resolve(engine: Engine, conn: GraphReader, group_id: str, name: str) -> tuple[str, str | None]:
    """(binding_state, resolved uuid) of a normalised name in a group
    (docs/api.md §knowledge_add_cross_group_edge)."""
    hits = engine.names.lookup(group_id, name)
    active = [u for u, merged in hits if not merged]
    if len(active) > 1:
        return "ambiguous", None
    if not hits:
        return "unbound", None
    winner = conn.entity_by_uuid(hits[0][0])
    if winner is None:
        return "unbound", None
    try:
        live = engine.names.follow_merged(conn, winner, f"endpoint '{name}'")
    except InvalidRequestError:
        return "unbound", None
    return "bound", live.uuid


def _pointer(engine: Engine, conn: GraphReader, group_id: str, name: str) -> Pointer:
    state, resolved = resolve(engine, conn, group_id, name)
    return Pointer(group_id, name, state, resolved, applied_seq(conn, group_id))


def _invalidate(fact: Fact, at: datetime) -> Op:
    return Op(
        "fact.invalidate", {"uuid": fact.uuid, "invalid_at": to_wal(at), "expired_at": to_wal(at)}
    )


async def add_cross_group_edge(
    engine: Engine,
    name: str,
    source: Endpoint,
    target: Endpoint,
    group_id: str,
    fact: str,
    valid_at: datetime | None,
    relation_type: str | None,
) -> dict[str, Any]:
    """`knowledge_add_cross_group_edge`: the fact is written even when a side stays unbound."""
    for ep in (source, target):
        if ep.uuid is None and not (
            (ep.source_group_id or "").strip() and (ep.endpoint_name or "").strip()
        ):
            raise InvalidRequestError(
                "cross-group edge endpoint requires non-empty source_group_id and "
                "endpoint_name (FR-002)",
                field="source" if ep is source else "target",
            )
    text = fact or name
    # Embedded before the lock: the commit below then finds the vector in the cache.
    await anyio.to_thread.run_sync(engine.parts.embedder.embed, [text])

    def write() -> dict[str, Any]:
        with engine.writer() as w, w.connection() as conn:
            ends: list[str] = []
            pointers: dict[str, Pointer] = {}
            for side, ep in zip(SIDES, (source, target), strict=True):
                if ep.uuid is not None:
                    entity = conn.entity_by_uuid(ep.uuid)
                    if entity is None:
                        raise NotFoundError(
                            "entity", ep.uuid, f"cross-group edge endpoint {ep.uuid} does not exist"
                        )
                    if entity.group_id != group_id:
                        raise InvalidRequestError(
                            f"endpoint {ep.uuid} belongs to group '{entity.group_id}', foreign to "
                            f"this edge's own group '{group_id}' — name it as "
                            "{source_group_id, endpoint_name} instead",
                            field="source" if side == "src" else "target",
                        )
                    ends.append(ep.uuid)
                else:
                    assert ep.source_group_id is not None and ep.endpoint_name is not None
                    pointer = _pointer(
                        engine, conn, ep.source_group_id, normalize_endpoint(ep.endpoint_name)
                    )
                    pointers[side] = pointer
                    ends.append(pointer.resolved_uuid or "")
            row = Fact(
                uuid=str(uuidlib.uuid4()),
                group_id=group_id,
                source_uuid=ends[0],
                target_uuid=ends[1],
                name=name,
                fact=fact,
                relation_type=relation_type,
                valid_at=valid_at,
                created_at=now(),
            )
            row = replace(row, attributes=_with_pointers(row, pointers))
            w.commit([(group_id, [fact_op(row)])])
            return {
                "uuid": row.uuid,
                "name": row.name,
                "group_id": group_id,
                "source_node_uuid": row.source_uuid,
                "target_node_uuid": row.target_uuid,
                "fact": row.fact,
                "cross_group_pointers": {
                    s: (pointers[s].to_wire() if s in pointers else None) for s in SIDES
                },
            }

    return await anyio.to_thread.run_sync(retrying, write)  # server mode: a lost race plans again


async def rebind(engine: Engine, source_group_id: str) -> dict[str, int]:
    """`knowledge_rebind_pointers`: re-resolve the pointers naming `source_group_id`."""

    def run() -> dict[str, int]:
        with engine.writer() as w:
            return rebind_locked(engine, w, source_group_id)

    return await anyio.to_thread.run_sync(retrying, run)  # server mode: a lost race plans again


def rebind_locked(
    engine: Engine, w: Writer, source_group_id: str, *, force: bool = False
) -> dict[str, int]:
    """The rebind pass, holding the writer `w`; `force` ignores the staleness gate (docs/api.md
    §knowledge_rebind_pointers)."""
    counts = dict.fromkeys(
        (
            "checked",
            "bound",
            "unbound",
            "ambiguous",
            "invalidated_self_loop",
            "invalidated_duplicate",
            "staleness_skipped",
        ),
        0,
    )
    ops: dict[str, list[Op]] = {}
    at = now()
    with w.connection() as conn:
        current = applied_seq(conn, source_group_id)
        facts = conn.pointer_facts()
        live = {(f.group_id, f.source_uuid, f.target_uuid, f.name) for f in facts}
        for fact in facts:
            pointers = pointers_of(fact)
            fresh = dict(pointers)
            for side, p in pointers.items():
                if p.source_group_id != source_group_id:
                    continue
                gated = (
                    p.binding_state == "bound"
                    and p.bound_at_seq is not None
                    and current is not None
                    and p.bound_at_seq >= current
                )
                if gated and not force:
                    counts["staleness_skipped"] += 1
                    continue
                counts["checked"] += 1
                fresh[side] = _pointer(engine, conn, source_group_id, p.endpoint_name)
                counts[fresh[side].binding_state] += 1
            if fresh == pointers:
                continue
            src = (fresh["src"].resolved_uuid or "") if "src" in fresh else fact.source_uuid
            dst = (fresh["dst"].resolved_uuid or "") if "dst" in fresh else fact.target_uuid
            moved = (src, dst) != (fact.source_uuid, fact.target_uuid)
            key = (fact.group_id, src, dst, fact.name)
            batch = ops.setdefault(fact.group_id, [])
            if moved and src and src == dst:
                batch.append(_invalidate(fact, at))
                counts["invalidated_self_loop"] += 1
            elif (
                moved
                and src
                and dst
                and (key in live or conn.find_active_fact(fact.group_id, src, fact.name, dst))
            ):
                batch.append(_invalidate(fact, at))
                counts["invalidated_duplicate"] += 1
            else:
                live.add(key)
                row = replace(fact, source_uuid=src, target_uuid=dst)
                batch.append(fact_op(replace(row, attributes=_with_pointers(row, fresh))))
    w.commit(list(ops.items()))
    return counts


def unbind_plan(
    engine: Engine, conn: GraphReader, purged: list[str]
) -> tuple[list[dict[str, Any]], dict[str, list[Op]]]:
    """For `knowledge_delete_by_group`: the impact on other groups' pointers into the purged
    groups, and the operations that leave those pointers unbound
    (docs/api.md §knowledge_delete_by_group)."""
    impacts: dict[str, int] = {}
    ops: dict[str, list[Op]] = {}
    for fact in conn.pointer_facts():
        if fact.group_id in purged:
            continue
        pointers = pointers_of(fact)
        fresh = dict(pointers)
        for side, p in pointers.items():
            if p.source_group_id in purged:
                impacts[fact.group_id] = impacts.get(fact.group_id, 0) + 1
            if p.source_group_id in purged and p.resolved_uuid is not None:
                fresh[side] = Pointer(
                    p.source_group_id,
                    p.endpoint_name,
                    "unbound",
                    None,
                    applied_seq(conn, p.source_group_id),
                )
        if fresh != pointers:
            src = "" if "src" in fresh and fresh["src"].resolved_uuid is None else fact.source_uuid
            dst = "" if "dst" in fresh and fresh["dst"].resolved_uuid is None else fact.target_uuid
            row = replace(fact, source_uuid=src, target_uuid=dst)
            row = replace(row, attributes=_with_pointers(row, fresh))
            ops.setdefault(fact.group_id, []).append(fact_op(row))
    return [{"group_id": g, "pointer_count": n} for g, n in sorted(impacts.items())], ops
