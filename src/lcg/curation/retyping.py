"""The typing maintenance passes over one group (docs/api.md §ontology).

- `reprocess_entity_types`: LLM re-classification of entity types, then ancestor re-stamping.
- `canonicalize_relations`: lexical (name/alias/keyword) mapping of edges onto the ontology's
  relation types, with an embedding fallback against the types' descriptions.
- `backfill_relation_types` (deprecated): pseudo-types derived from edge names or facts.
- `reprocess_relation_types`: LLM classification of edge facts into the relation types.

Every pass reads its candidates from a reader snapshot, classifies them with no lock held (LLM
and embedding calls included), then writes in batches, each under the write lock: the batch's
rows are re-read there and only the typing field is changed, so an edit made meanwhile survives
(in server mode, a batch whose commit lost the race to another process is re-read and
committed again: `follow.retrying`).
Changes are ordinary `entity.upsert` / `fact.upsert` WAL operations (the whole row, new labels
or relation_type), so a rebuild from the WAL reproduces them. Domain failures of the two LLM
passes are `{"success": false, ...}` results; the other two raise (docs/api.md §error-styles).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio.to_thread
import numpy as np

from lcg.engine import Engine
from lcg.engine.follow import retrying
from lcg.errors import InvalidRequestError, LcgError
from lcg.extraction.llm import LlmClient, LlmRequest
from lcg.models import Entity, Fact
from lcg.ontology.classify import entity_types_prompt, relation_types_prompt, verdicts
from lcg.ontology.loader import load_ontology
from lcg.ontology.model import (
    UNCLASSIFIED_RELATION,
    Ontology,
    RelationType,
    normalize_entity_type,
)
from lcg.ontology.model import normalize_relation_type as normalize_rt
from lcg.storage.backend import GraphReader
from lcg.wal.records import entity_op, fact_op

__all__ = [
    "SCOPES",
    "backfill_relation_types",
    "canonicalize_relations",
    "reprocess_entity_types",
    "reprocess_relation_types",
]

SCOPES = ("untyped", "off_ontology", "all")
LLM_BATCH = 50
ENTITY_WRITE_BATCH = 50
EDGE_WRITE_BATCH = 250
EMBED_BATCH = 500
PROGRESS_EVERY = 5000
NO_RELATION_ONTOLOGY = (
    "requires a resolved ontology with relation_types defined — either a per-group "
    ".lcg/ontology/<group_id>.yaml for this group or a workspace-wide .lcg/ontology.yaml"
)
# A co-occurrence label, not a predicate: "ALICE → BOB" / "ALICE -> BOB" (capitals, digits, spaces).
_NOISE = re.compile(r"^[A-Z][A-Z0-9 ]*\s*(→|->)\s*[A-Z][A-Z0-9 ]*$")

Progress = Callable[[dict[str, Any]], None] | None
ClientFactory = Callable[[], LlmClient]


def _emit(progress: Progress, **frame: Any) -> None:
    if progress is not None:
        progress({"type": "progress", **frame})


def _scope_error(scope: str) -> dict[str, Any] | None:
    if scope in SCOPES:
        return None
    return {
        "success": False,
        "error": f"unknown scope '{scope}'; valid values: {', '.join(SCOPES)}",
    }


def _batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _write_batch(
    engine: Engine, group_id: str, revise: Callable[[GraphReader], tuple[list[Entity], list[Fact]]]
) -> int:
    """Under the write lock: re-derive rows from their current state and commit them (thread).
    In server mode a commit that lost the race to another process is re-derived from the
    caught-up graph and committed again (`follow.retrying`; no model call under the lock)."""

    def attempt() -> int:
        with engine.writer() as w:
            entities, facts = w.read(revise)
            ops = [entity_op(e) for e in entities] + [fact_op(f) for f in facts]
            if ops:
                w.commit([(group_id, ops)])
            return len(ops)

    return retrying(attempt)


async def _classify(
    client: ClientFactory,
    candidates: Sequence[Any],
    prompt: Callable[[Sequence[Any]], LlmRequest],
    progress: Progress,
) -> list[str]:
    """One verdict per candidate, asked in batches of LLM_BATCH (no lock held).

    Raises:
        LcgError: the client cannot be built or a call failed.
    """
    llm = client()
    answers: list[str] = []
    for batch in _batches(candidates, LLM_BATCH):
        answers += verdicts(await llm.complete(prompt(batch)), len(batch))
        if len(answers) % PROGRESS_EVERY == 0:
            _emit(progress, processed=len(answers), total=len(candidates), phase="classifying")
    return answers


async def _write_fact_types(
    engine: Engine,
    group_id: str,
    changes: Sequence[tuple[str, str]],
    progress: Progress,
    only_if_blank: bool = False,
) -> int:
    """Set `relation_type` on facts, in batches; `only_if_blank`: where it is still empty."""
    written = processed = 0
    for batch in _batches(changes, EDGE_WRITE_BATCH):
        wanted = dict(batch)

        def revise(
            conn: GraphReader, wanted: dict[str, str] = wanted
        ) -> tuple[list[Entity], list[Fact]]:
            rows = conn.facts_by_uuids(list(wanted))
            out = []
            for uuid, new_type in wanted.items():
                fact = rows.get(uuid)
                if fact is None or fact.group_id != group_id or fact.relation_type == new_type:
                    continue
                if only_if_blank and (fact.relation_type or "").strip():
                    continue
                out.append(replace(fact, relation_type=new_type))
            return [], out

        written += await anyio.to_thread.run_sync(_write_batch, engine, group_id, revise)
        processed += len(batch)
        if processed % PROGRESS_EVERY == 0:
            _emit(progress, processed=processed, total=len(changes), phase="writing")
    return written


async def _facts(engine: Engine, group_id: str) -> list[Fact]:
    return await engine.read(lambda conn: conn.facts_with_hops([group_id]))


# -- entity types ---------------------------------------------------------------------------


def _leaf(entity: Entity, ontology: Ontology) -> str | None:
    """The entity's most specific declared type, if exactly one; else its last own label."""
    declared = set(ontology.entity_type_names())
    typed = [lbl for lbl in entity.labels if lbl in declared]
    leaves = [t for t in typed if not any(t in ontology.ancestors(o)[:-1] for o in typed if o != t)]
    if len(leaves) == 1:
        return leaves[0]
    own = [lbl for lbl in entity.labels if lbl not in ("Entity", "Merged")]
    return own[-1] if own else None


def _typed_labels(ontology: Ontology, type_name: str, current: Entity) -> tuple[str, ...]:
    """Labels for `current` retyped as `type_name`: Entity, ancestors, the type; a tombstone
    stays one (its `Merged` label is kept)."""
    labels = ["Entity", *ontology.ancestors(type_name)]
    if "Merged" in current.labels:
        labels.append("Merged")
    return tuple(dict.fromkeys(labels))


def _restamped(ontology: Ontology, entity: Entity) -> tuple[str, ...] | None:
    """The labels the hierarchy now expects for an entity with one declared leaf type (None:
    no such leaf, or nothing to change). Labels that are not declared types are kept."""
    declared = set(ontology.entity_type_names())
    typed = [lbl for lbl in entity.labels if lbl in declared]
    leaves = [t for t in typed if not any(t in ontology.ancestors(o)[:-1] for o in typed if o != t)]
    if len(leaves) != 1:
        return None
    other = [lbl for lbl in entity.labels if lbl not in declared and lbl != "Entity"]
    expected = tuple(dict.fromkeys(["Entity", *ontology.ancestors(leaves[0]), *other]))
    return expected if set(expected) != set(entity.labels) else None


def _entity_candidates(entities: list[Entity], scope: str, ontology: Ontology) -> list[Entity]:
    if scope == "untyped":
        return [e for e in entities if e.labels == ("Entity",)]
    if scope == "off_ontology":
        declared = set(ontology.entity_type_names())
        return [
            e
            for e in entities
            if e.labels == ("Entity",)
            or any(lbl != "Entity" and lbl not in declared for lbl in e.labels)
        ]
    return [e for e in entities if "Entity" in e.labels]


async def _relabel(
    engine: Engine,
    group_id: str,
    new_labels: Callable[[Entity], tuple[str, ...] | None],
    uuids: Sequence[str],
    progress: Progress,
    phase: str,
) -> int:
    """Write `new_labels(current row)` for each entity, in batches under the write lock."""
    written = processed = 0
    for batch in _batches(uuids, ENTITY_WRITE_BATCH):

        def revise(
            conn: GraphReader, batch: Sequence[str] = batch
        ) -> tuple[list[Entity], list[Fact]]:
            rows = conn.entities_by_uuids(batch)
            out = []
            for uuid in batch:
                entity = rows.get(uuid)
                if entity is None or entity.group_id != group_id:
                    continue
                labels = new_labels(entity)
                if labels is not None and labels != entity.labels:
                    out.append(replace(entity, labels=labels))
            return out, []

        written += await anyio.to_thread.run_sync(_write_batch, engine, group_id, revise)
        processed += len(batch)
        if processed % PROGRESS_EVERY == 0:
            _emit(progress, processed=processed, total=len(uuids), phase=phase)
    return written


async def reprocess_entity_types(
    engine: Engine,
    group_id: str,
    scope: str,
    dry_run: bool,
    client: ClientFactory,
    progress: Progress = None,
) -> dict[str, Any]:
    """`knowledge_reprocess_entity_types` (docs/api.md §knowledge_reprocess_entity_types)."""
    failed = _scope_error(scope)
    if failed is not None:
        return failed
    ontology = load_ontology(engine.settings, group_id)
    if scope != "untyped" and not ontology.present:
        return {"success": False, "error": f"scope '{scope}' requires an ontology to be configured"}
    if scope != "untyped" and not ontology.entity_types:
        return {
            "success": False,
            "error": "the configured ontology declares no entity types; "
            f"scope '{scope}' needs at least one to classify into",
        }
    entities = await engine.read(lambda conn: conn.entities_in_groups([group_id]))
    candidates = _entity_candidates(entities, scope, ontology)
    if not candidates:
        if dry_run:
            return {"would_reclassify_count": 0, "plan": []}
        return {
            "success": True,
            "reclassified_count": 0,
            "unchanged_count": 0,
            "group_id": group_id,
        }

    _emit(progress, phase="classifying", processed=0, total=len(candidates))
    menu = ontology if scope != "untyped" else None
    try:
        answers = await _classify(
            client,
            candidates,
            lambda b: entity_types_prompt([(e.name, e.summary) for e in b], menu),
            progress,
        )
    except LcgError as exc:
        return {
            "success": False,
            "group_id": group_id,
            "error": f"Failed to reprocess entity types: {exc.wire_message()}",
        }

    plan: list[tuple[Entity, str | None, str]] = []
    for entity, verdict in zip(candidates, answers, strict=True):
        new = ontology.canonical_entity_type(verdict) if verdict else None
        if new is None and menu is None and normalize_entity_type(verdict) != "Entity":
            new = normalize_entity_type(verdict) or None
        old = _leaf(entity, ontology)
        if new is not None and new != old:
            plan.append((entity, old, new))
    if dry_run:
        return {
            "would_reclassify_count": len(plan),
            "plan": [
                {"entity_id": e.uuid, "entity_name": e.name, "old_type": old, "new_type": new}
                for e, old, new in plan
            ],
        }

    _emit(progress, phase="writing", total_mutations=len(plan))
    targets = {e.uuid: new for e, _, new in plan}
    await _relabel(
        engine,
        group_id,
        lambda e: _typed_labels(ontology, targets[e.uuid], e),
        list(targets),
        progress,
        "writing",
    )
    restamped = 0
    if ontology.has_hierarchy:
        _emit(progress, phase="restamping")
        current = await engine.read(lambda conn: conn.entities_in_groups([group_id]))
        stale = [e.uuid for e in current if _restamped(ontology, e) is not None]
        restamped = await _relabel(
            engine, group_id, lambda e: _restamped(ontology, e), stale, progress, "restamping"
        )
    return {
        "success": True,
        "reclassified_count": len(plan),
        "unchanged_count": len(candidates) - len(plan),
        "restamped_count": restamped,
        "group_id": group_id,
    }


# -- relation types -------------------------------------------------------------------------


def _blank(value: str | None) -> bool:
    return not (value or "").strip()


@dataclass(frozen=True)
class _EdgeClass:
    kind: str  # "mapped", "noise" or "residual"
    target: str | None = None


def _classify_lexically(fact: Fact, ontology: Ontology) -> _EdgeClass:
    """Noise, Mapped(T) by name / alias / keyword of the edge name, then of its current
    relation type, or Residual."""
    current = fact.relation_type
    if _NOISE.match(fact.name.strip()) or (current and _NOISE.match(current.strip())):
        return _EdgeClass("noise")
    for text in (fact.name, current or ""):
        mapped = ontology.canonical_relation_type(text, keywords=True) if text else None
        if mapped is not None:
            return _EdgeClass("mapped", mapped)
    return _EdgeClass("residual")


def _require_relation_ontology(ontology: Ontology, method: str) -> None:
    if not ontology.present:
        raise InvalidRequestError(f"{method} {NO_RELATION_ONTOLOGY}")
    if not ontology.relation_types:
        raise InvalidRequestError(f"{method} requires at least one relation_type in the ontology")


async def _promote_by_embedding(
    engine: Engine,
    facts: Sequence[Fact],
    classes: list[_EdgeClass],
    residual: Sequence[int],
    glossed: Sequence[RelationType],
    threshold: float,
    progress: Progress,
) -> int:
    """Map residual edges whose fact is close enough to a type's description; how many.

    Raises:
        LcgError: the embedder failed (nothing has been changed then).
    """
    embed = engine.parts.embedder.embed
    glosses = np.asarray(
        await anyio.to_thread.run_sync(embed, [r.description for r in glossed]), dtype=np.float32
    )
    promotions: list[tuple[int, str]] = []
    for start in range(0, len(residual), EMBED_BATCH):
        if start and start % PROGRESS_EVERY == 0:
            _emit(progress, processed=start, total=len(residual), phase="embedding_fallback")
        chunk = residual[start : start + EMBED_BATCH]
        vectors = await anyio.to_thread.run_sync(embed, [facts[i].fact for i in chunk])
        scores = np.asarray(vectors, dtype=np.float32) @ glosses.T
        for row, i in enumerate(chunk):
            best = int(np.argmax(scores[row]))
            score = float(scores[row, best])
            if math.isfinite(score) and score >= threshold:
                promotions.append((i, glossed[best].name))
    for i, name in promotions:
        classes[i] = _EdgeClass("mapped", name)
    return len(promotions)


async def canonicalize_relations(
    engine: Engine,
    group_id: str,
    dry_run: bool,
    embedding_threshold: float,
    progress: Progress = None,
) -> dict[str, Any]:
    """`knowledge_canonicalize_relations` (docs/api.md §knowledge_canonicalize_relations).

    Raises:
        InvalidRequestError: the group resolves no ontology, or one without relation types.
    """
    ontology = load_ontology(engine.settings, group_id)
    _require_relation_ontology(ontology, "knowledge_canonicalize_relations")
    facts = await _facts(engine, group_id)
    classes: list[_EdgeClass] = []
    for i, fact in enumerate(facts):
        if i and i % PROGRESS_EVERY == 0:
            _emit(progress, processed=i, total=len(facts), phase="lexical")
        classes.append(_classify_lexically(fact, ontology))

    glossed = [r for r in ontology.relation_types if r.description.strip()]
    residual = [i for i, c in enumerate(classes) if c.kind == "residual" and facts[i].fact.strip()]
    warning: str | None = None
    promoted = 0
    if not glossed:
        warning = "embedding fallback skipped: no canonical types have description glosses"
    elif residual:
        try:
            promoted = await _promote_by_embedding(
                engine, facts, classes, residual, glossed, embedding_threshold, progress
            )
        except LcgError as exc:
            warning = f"embedding fallback skipped: embedder error: {exc.message}"

    counts = Counter(c.kind for c in classes)
    total = len(facts)

    def pct(n: int) -> float:
        return float(round(n / total * 100)) if total else 0.0

    result: dict[str, Any] = {
        "group_id": group_id,
        "total_edges": total,
        "mapped_count": counts["mapped"],
        "noise_count": counts["noise"],
        "residual_count": counts["residual"],
        "embedding_fallback_promoted": promoted,
        "mapped_pct": pct(counts["mapped"]),
        "noise_pct": pct(counts["noise"]),
        "residual_pct": pct(counts["residual"]),
        "dry_run": dry_run,
    }
    if dry_run:
        return result
    _emit(progress, phase="writing", total_mutations=total)
    changes = []
    noise = []
    for fact, c in zip(facts, classes, strict=True):
        if c.kind == "mapped" and c.target is not None and fact.relation_type != c.target:
            changes.append((fact.uuid, c.target))
        elif c.kind == "residual" and fact.relation_type != UNCLASSIFIED_RELATION:
            changes.append((fact.uuid, UNCLASSIFIED_RELATION))
        elif c.kind == "noise" and _blank(fact.relation_type):
            noise.append((fact.uuid, UNCLASSIFIED_RELATION))
    await _write_fact_types(engine, group_id, changes, progress)
    await _write_fact_types(engine, group_id, noise, progress, only_if_blank=True)
    if warning is not None:
        result["embedding_warning"] = warning
    return result


def _pseudo_type(fact: Fact) -> str:
    """The deprecated backfill's derivation: the edge name, else the fact's first four words."""
    name = fact.name.strip()
    if name and "→" not in name and "->" not in name:
        derived = normalize_rt(name)
    else:
        derived = normalize_rt(" ".join(fact.fact.split()[:4]))
    return derived or UNCLASSIFIED_RELATION


async def backfill_relation_types(
    engine: Engine, group_id: str, dry_run: bool, progress: Progress = None
) -> dict[str, Any]:
    """`knowledge_backfill_relation_types` (docs/api.md §knowledge_backfill_relation_types,
    deprecated): no ontology involved."""
    facts = await _facts(engine, group_id)
    candidates = [f for f in facts if _blank(f.relation_type)]
    if not dry_run and candidates:
        _emit(progress, phase="writing", total_mutations=len(candidates))
        changes = [(f.uuid, _pseudo_type(f)) for f in candidates]
        await _write_fact_types(engine, group_id, changes, progress, only_if_blank=True)
    return {
        "group_id": group_id,
        "total_edges": len(facts),
        "backfilled": len(candidates),
        "dry_run": dry_run,
    }


def _edge_candidates(facts: list[Fact], scope: str, ontology: Ontology) -> list[Fact]:
    if scope == "untyped":
        return [f for f in facts if _blank(f.relation_type)]
    if scope == "off_ontology":
        declared = set(ontology.relation_type_names())
        return [f for f in facts if _blank(f.relation_type) or f.relation_type not in declared]
    return list(facts)


async def reprocess_relation_types(
    engine: Engine,
    group_id: str,
    scope: str,
    dry_run: bool,
    client: ClientFactory,
    progress: Progress = None,
) -> dict[str, Any]:
    """`knowledge_reprocess_relation_types` (docs/api.md §knowledge_reprocess_relation_types)."""
    failed = _scope_error(scope)
    if failed is not None:
        return failed
    ontology = load_ontology(engine.settings, group_id)
    if not ontology.present:
        return {
            "success": False,
            "error": f"knowledge_reprocess_relation_types {NO_RELATION_ONTOLOGY}",
        }
    if not ontology.relation_types:
        return {
            "success": False,
            "error": "the configured ontology declares no relation types; "
            "knowledge_reprocess_relation_types requires at least one",
        }
    candidates = _edge_candidates(await _facts(engine, group_id), scope, ontology)
    if not candidates:
        if dry_run:
            return {"would_reclassify_count": 0, "plan": [], "breakdown": {}}
        return {
            "success": True,
            "reclassified_count": 0,
            "unchanged_count": 0,
            "group_id": group_id,
            "breakdown": {},
        }
    try:
        answers = await _classify(
            client,
            candidates,
            lambda b: relation_types_prompt([(f.fact, f.relation_type) for f in b], ontology),
            progress,
        )
    except LcgError as exc:
        return {
            "success": False,
            "group_id": group_id,
            "error": f"Failed to reprocess relation types: {exc.wire_message()}",
        }
    plan = []
    for fact, verdict in zip(candidates, answers, strict=True):
        new = (ontology.canonical_relation_type(verdict) if verdict else None) or (
            UNCLASSIFIED_RELATION
        )
        if new != fact.relation_type:
            plan.append((fact, new))
    breakdown = dict(sorted(Counter(new for _, new in plan).items()))
    if dry_run:
        return {
            "would_reclassify_count": len(plan),
            "plan": [
                {"edge_id": f.uuid, "fact": f.fact, "old_type": f.relation_type, "new_type": new}
                for f, new in plan
            ],
            "breakdown": breakdown,
        }
    _emit(progress, phase="writing", total_mutations=len(plan))
    await _write_fact_types(engine, group_id, [(f.uuid, new) for f, new in plan], progress)
    return {
        "success": True,
        "reclassified_count": len(plan),
        "unchanged_count": len(candidates) - len(plan),
        "group_id": group_id,
        "breakdown": breakdown,
    }
