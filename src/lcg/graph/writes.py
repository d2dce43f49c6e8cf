"""Direct writes: one entity or one fact asserted by a caller, without extraction (docs/api.md
§knowledge_assert_entity, §knowledge_assert_relationship). Each is one `Engine.write`: its texts are
embedded first (no lock held), then the plan resolves names and decides on the writer under the
write lock, and the kernel commits the one WAL batch it returns.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import anyio.to_thread

from lcg.embedding.base import Vectors
from lcg.embedding.vectors import text_hash
from lcg.engine import Batch, Engine
from lcg.errors import ConflictError, InvalidRequestError, NotFoundError
from lcg.models import (
    EmbeddingRow,
    Entity,
    Fact,
    canonical_attributes,
    normalize_labels,
    normalize_name,
)
from lcg.ontology import Ontology, load_ontology
from lcg.ontology.supersession import Reason, contradicted, rule_for
from lcg.storage.backend import GraphReader
from lcg.timeutil import now, to_read_format, to_wal
from lcg.wal.records import Op, entity_op, fact_op

__all__ = ["assert_entity", "assert_relationship"]


async def assert_entity(
    engine: Engine,
    name: str,
    group_id: str,
    entity_uuid: str | None = None,
    labels: list[str] | None = None,
    summary: str = "",
    attributes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Create or update one entity by name (or uuid) in a group. See
    docs/api.md §knowledge_assert_entity."""
    name = name.strip()
    label_tuple = normalize_labels(labels)
    attrs = canonical_attributes(attributes or {})
    vectors = await anyio.to_thread.run_sync(
        engine.parts.embedder.embed, [name, summary] if summary else [name]
    )

    def plan(conn: GraphReader) -> tuple[dict[str, Any], list[Batch]]:
        if entity_uuid is not None:
            found = conn.entity_by_uuid(entity_uuid)
            if found is None or found.group_id != group_id:
                raise NotFoundError(
                    "entity",
                    entity_uuid,
                    f"entity_uuid '{entity_uuid}' does not exist in group '{group_id}'",
                )
            current: Entity | None = engine.names.follow_merged(
                conn, found, f"entity_uuid '{entity_uuid}'"
            )
        else:
            current = engine.names.resolve(conn, group_id, name)
        if current is not None and normalize_name(current.name) != normalize_name(name):
            for other, merged in engine.names.lookup(group_id, name):
                if other != current.uuid and not merged:
                    raise ConflictError(
                        f"cannot rename entity '{current.uuid}' to '{name}': an active "
                        f"entity in group '{group_id}' already uses that name"
                    )
        if current is None:
            row = Entity(
                uuid=str(uuidlib.uuid4()),
                group_id=group_id,
                name=name,
                labels=label_tuple,
                summary=summary,
                attributes=attrs,
                created_at=now(),
            )
        else:
            row = replace(current, name=name, labels=label_tuple, summary=summary, attributes=attrs)
        if current is not None and current == row:
            return {"entity_uuid": row.uuid, "created": False, "embedding_warning": None}, []
        batch = Batch(group_id, [entity_op(row)], *_vectors_for_entity(engine, row, vectors))
        return {
            "entity_uuid": row.uuid,
            "created": current is None,
            "embedding_warning": None,
        }, [batch]

    return await engine.write(plan)


def _vectors_for_entity(
    engine: Engine, e: Entity, vectors: Vectors
) -> tuple[list[EmbeddingRow], list[str]]:
    model = engine.parts.embedder.identity.model
    rows = [EmbeddingRow("entity_name", e.uuid, e.group_id, text_hash(model, e.name), vectors[0])]
    stale = []
    if e.summary:
        rows.append(
            EmbeddingRow(
                "entity_summary", e.uuid, e.group_id, text_hash(model, e.summary), vectors[1]
            )
        )
    else:
        stale.append(f"entity_summary:{e.uuid}")
    return rows, stale


async def assert_relationship(
    engine: Engine,
    source_name: str,
    target_name: str,
    predicate: str,
    group_id: str,
    fact: str | None = None,
    attributes: dict[str, Any] | None = None,
    valid_at: datetime | None = None,
    relation_type: str | None = None,
    supersedes: Sequence[str] = (),
) -> dict[str, Any]:
    """Create or update one directed fact between two entities of a group. See
    docs/api.md §knowledge_assert_relationship.

    lcg extension: the fact retires the current facts named in `supersedes`, else those the
    group's ontology (`cardinality: one`) or lcg's built-in single-valued families say it
    contradicts (`lcg.ontology.supersession`); they end at its `valid_at` (the time of the call when
    it has none) and are listed in `edges_superseded` with the reason.
    """
    predicate = predicate.strip()
    text = fact if fact and fact.strip() else f"{source_name} {predicate} {target_name}"
    attrs = canonical_attributes(attributes or {})
    ontology = load_ontology(engine.settings, group_id)
    vectors = await anyio.to_thread.run_sync(engine.parts.embedder.embed, [text])

    def plan(conn: GraphReader) -> tuple[dict[str, Any], list[Batch]]:
        ends = []
        for name in (source_name, target_name):
            entity = engine.names.resolve(conn, group_id, name)
            if entity is None:
                raise NotFoundError(
                    "entity",
                    name,
                    f"'{name}' does not exist in group '{group_id}' — knowledge_assert_relationship "
                    "only resolves endpoints within its own group_id and never falls back to a "
                    "cross-group search; use knowledge_add_cross_group_edge to connect entities "
                    "across groups",
                )
            ends.append(entity)
        current = conn.find_active_fact(group_id, ends[0].uuid, predicate, ends[1].uuid)
        if current is None:
            row = Fact(
                uuid=str(uuidlib.uuid4()),
                group_id=group_id,
                source_uuid=ends[0].uuid,
                target_uuid=ends[1].uuid,
                name=predicate,
                fact=text,
                relation_type=relation_type,
                attributes=attrs,
                valid_at=valid_at,
                created_at=now(),
            )
        else:
            row = replace(
                current,
                fact=text,
                valid_at=valid_at,
                relation_type=relation_type,
                attributes=attrs,
            )
        row, retired = _retired_by(conn, ontology, row, ends, supersedes)
        if current is not None and current == row and not retired:
            return {
                "edge_uuid": row.uuid,
                "created": False,
                "embedding_warning": None,
                "edges_superseded": [],
            }, []
        vec = EmbeddingRow(
            "fact",
            row.uuid,
            group_id,
            text_hash(engine.parts.embedder.identity.model, text),
            vectors[0],
        )
        stamp = now()
        ends_at = row.valid_at or stamp
        ops = [fact_op(row)] + [
            Op(
                "fact.invalidate",
                {
                    "uuid": old.uuid,
                    "invalid_at": to_wal(ends_at),
                    "expired_at": to_wal(stamp),
                },
            )
            for old, _ in retired
        ]
        return {
            "edge_uuid": row.uuid,
            "created": current is None,
            "embedding_warning": None,
            "edges_superseded": [
                {
                    "uuid": old.uuid,
                    "fact": old.fact,
                    "invalid_at": to_read_format(ends_at),
                    "reason": reason,
                    "superseded_by": row.uuid,
                }
                for old, reason in retired
            ],
        }, [Batch(group_id, ops, [vec])]

    return await engine.write(plan)


def _retired_by(
    conn: GraphReader,
    ontology: Ontology,
    row: Fact,
    ends: Sequence[Entity],
    supersedes: Sequence[str],
) -> tuple[Fact, list[tuple[Fact, Reason]]]:
    """The facts a directly asserted fact retires (lock held), and the row itself — ended
    at the stored fact's start instead when it is the older truth (as in ingestion)."""
    if row.invalid_at is not None:
        return row, []
    named = conn.facts_by_uuids(supersedes) if supersedes else {}
    out: list[tuple[Fact, Reason]] = []
    for i, uuid in enumerate(supersedes):
        old = named.get(uuid)
        if old is None or old.group_id != row.group_id or old.invalid_at is not None:
            raise InvalidRequestError(
                f"supersedes[{i}]: '{uuid}' is not a current fact of group '{row.group_id}'",
                field="supersedes",
            )
        out.append((old, "caller"))
    rule = rule_for(
        ontology,
        row,
        builtin=not supersedes,
        target_name=ends[1].name,
        target_labels=ends[1].labels,
    )
    if rule is not None:
        held = row.source_uuid if rule.side == "source" else row.target_uuid
        active = [
            f for f in conn.neighbor_facts(held, [row.group_id], 100_000) if f.invalid_at is None
        ]
        others = conn.entities_by_uuids({f.target_uuid for f in active})

        def describe(uuid: str) -> tuple[str, tuple[str, ...]]:
            e = others.get(uuid)
            return (e.name, e.labels) if e is not None else ("", ())

        out += [(old, rule.reason) for old in contradicted(rule, row, active, ontology, describe)]
    kept: list[tuple[Fact, Reason]] = []
    for old, reason in out:
        if old.uuid == row.uuid or any(old.uuid == k.uuid for k, _ in kept):
            continue
        if old.valid_at is not None and row.valid_at is not None and row.valid_at < old.valid_at:
            return replace(row, invalid_at=old.valid_at), []
        kept.append((old, reason))
    return row, kept
