"""Entity and fact resolution without a model call per entity.

Each extracted entity is matched, in this order, to
1. an earlier entity of the same episode (same key, alias or acronym),
2. an entity of the group with the same normalised name (trimmed, case-folded),
3. one whose punctuation-free name, alias or acronym equals this one's ("NASA" = "N.A.S.A." =
   "National Aeronautics and Space Administration" when that name or its summary/aliases say
   so),
4. a fuzzily similar name: Jaccard over character trigrams >= `FUZZY_JACCARD` with both names
   long enough to compare (short names and acronyms only ever match exactly),
5. a name embedding with cosine >= the configured threshold,
and 4-5 only when the digits in the names agree ("Apollo 1" is never "Apollo 11") and the types
are compatible. What remains in the band just below the embedding threshold is *ambiguous*: the
pipeline may ask the model about those pairs (`LCG_DEDUP_LLM`), otherwise they become new
entities. Fact endpoints resolve against the episode's entities, then the group; a fact whose
endpoint resolves nowhere is dropped and reported.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from lcg.embedding.base import Vectors
from lcg.extraction.heuristic import sentences
from lcg.extraction.salvage import CleanEntity, CleanFact
from lcg.ingest.index import GroupIndex, acronym, canon, is_acronym_like, numbers
from lcg.models import Entity, canonical_attributes, normalize_labels, normalize_name
from lcg.ontology import UNCLASSIFIED_ENTITY, UNCLASSIFIED_RELATION, Ontology
from lcg.ontology.model import normalize_entity_type, normalize_relation_type

__all__ = [
    "AMBIGUOUS_MARGIN",
    "FUZZY_JACCARD",
    "EntityPlan",
    "Match",
    "ResolvedFact",
    "entity_labels",
    "match_entities",
    "merge_summary",
    "plan_entities",
    "relation_type_for",
    "resolve_facts",
]

FUZZY_JACCARD = 0.8
# Cosines this far below the embedding threshold are "ambiguous" (LLM-checked when enabled).
AMBIGUOUS_MARGIN = 0.08
_MIN_FUZZY_LEN = 5
_TOP_CANDIDATES = 3
_BLAS_ROWS = 20_000
_GENERIC = frozenset({"Entity", UNCLASSIFIED_ENTITY, "Merged"})
# Names' shingles and summaries' sentences remembered (pure functions; a few MB at most).
_CACHED = 1 << 10


@dataclass(frozen=True)
class Match:
    """Where an extracted entity went: `batch` (index of an earlier one), an existing uuid, or new."""

    how: str  # "batch" | "exact" | "key" | "fuzzy" | "embedding" | "ambiguous" | "new"
    uuid: str | None = None
    batch: int | None = None
    score: float = 1.0


@lru_cache(maxsize=_CACHED)
def _shingles(name: str) -> frozenset[str]:
    text = f" {' '.join(normalize_name(name).split())} "
    return frozenset(text[i : i + 3] for i in range(max(1, len(text) - 2)))


@lru_cache(maxsize=_CACHED)
def _sentences(text: str) -> tuple[str, ...]:
    """`sentences(text)`, remembered: an entity's summary is split again whenever it is merged."""
    return tuple(sentences(text))


def _sentence_key(sentence: str) -> str:
    return " ".join(sentence.casefold().split())


def jaccard(a: str, b: str) -> float:
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa | sb) if sa and sb else 0.0


def type_of(labels: Sequence[str]) -> str | None:
    specific = [label for label in labels if label not in _GENERIC]
    return specific[-1] if specific else None


def _compatible(a: Sequence[str], b: Sequence[str]) -> bool:
    ta, tb = type_of(a), type_of(b)
    return ta is None or tb is None or ta in b or tb in a


def entity_labels(ontology: Ontology, type_name: str) -> tuple[tuple[str, ...], str | None]:
    """Labels for an extracted type, and the original type when strict mode re-labelled it."""
    raw = type_name.strip()
    if not raw or normalize_entity_type(raw) in ("", "Entity"):
        return ("Entity",), None
    known = ontology.canonical_entity_type(raw)
    if known is None and ontology.mode == "strict" and ontology.present:
        return ("Entity", UNCLASSIFIED_ENTITY), raw
    return normalize_labels(list(ontology.ancestors(known or normalize_entity_type(raw)))), None


def relation_type_for(
    ontology: Ontology, predicate: str, relation_type: str | None
) -> tuple[str, str | None]:
    """(relation type, original when strict mode re-labelled it UNCLASSIFIED)."""
    given = relation_type or predicate
    known = ontology.canonical_relation_type(given) or (
        ontology.canonical_relation_type(predicate) if relation_type else None
    )
    if known is not None:
        return known, None
    if ontology.mode == "strict" and ontology.present:
        return UNCLASSIFIED_RELATION, given
    return normalize_relation_type(given) or predicate, None


def _similar(
    index: GroupIndex,
    e: CleanEntity,
    labels: tuple[str, ...],
    sims: Vectors | None,
    threshold: float,
) -> Match | None:
    if sims is None or not len(sims):
        return None
    assert index.names is not None
    ids = index.names.ids
    if len(sims) > _TOP_CANDIDATES:
        top = np.argpartition(-sims, _TOP_CANDIDATES)[:_TOP_CANDIDATES]
        order = top[np.argsort(-sims[top])]
    else:
        order = np.argsort(-sims)
    best_ambiguous: Match | None = None
    digits, length, acronym_like = numbers(e.name), len(canon(e.name)), is_acronym_like(e.name)
    for row in order:
        uuid = ids[int(row)]
        other = index.entities.get(uuid)
        if other is None or numbers(other.name) != digits:
            continue
        if not _compatible(labels, other.labels):
            continue
        score = float(sims[row])
        long_enough = min(length, len(canon(other.name))) >= _MIN_FUZZY_LEN
        short = acronym_like or is_acronym_like(other.name)
        if long_enough and not short and jaccard(e.name, other.name) >= FUZZY_JACCARD:
            return Match("fuzzy", uuid, score=score)
        if short:
            continue
        if score >= threshold:
            return Match("embedding", uuid, score=score)
        if score >= threshold - AMBIGUOUS_MARGIN and best_ambiguous is None:
            best_ambiguous = Match("ambiguous", uuid, score=score)
    return best_ambiguous


@dataclass(frozen=True)
class _Keys:
    """An extracted entity's name keys, computed once per episode."""

    keys: frozenset[str]
    canon: str
    acronym: str | None
    acronym_like: bool

    @classmethod
    def of(cls, e: CleanEntity) -> _Keys:
        return cls(
            frozenset({canon(e.name), *map(canon, e.aliases)}),
            canon(e.name),
            acronym(e.name),
            is_acronym_like(e.name),
        )


def _batch_match(done: Sequence[_Keys], k: _Keys) -> int | None:
    for i, other in enumerate(done):
        if k.keys & other.keys:
            return i
        if k.acronym_like and other.acronym == k.canon:
            return i
        if k.acronym and other.acronym_like and k.acronym == other.canon:
            return i
    return None


def _similarities(matrix: Vectors, vectors: Vectors) -> Vectors:
    """Cosines of some extracted names (rows) against every entity name of the group.

    numpy's own loop (einsum) below `_BLAS_ROWS` entities: OpenBLAS's threaded product measured
    10-20x slower there on a busy machine; above it, BLAS wins (40 vs 200 ms for 20 names
    against 100,000).
    """
    if len(matrix) >= _BLAS_ROWS:
        return vectors @ matrix.T
    out: Vectors = np.einsum("ij,kj->ki", matrix, vectors)
    return out


def match_entities(
    index: GroupIndex,
    extracted: Sequence[CleanEntity],
    labels: Sequence[tuple[str, ...]],
    vectors: Vectors | None,
    threshold: float,
) -> list[Match]:
    """Phase one: a `Match` per extracted entity (no writes, no model calls)."""
    assert index.names is not None
    matrix = index.names.view()
    keys = [_Keys.of(e) for e in extracted]
    out: list[Match | None] = []
    for i, e in enumerate(extracted):
        batch = _batch_match(keys[:i], keys[i])
        if batch is not None:
            out.append(Match("batch", batch=batch))
        elif (uuid := index.lookup_norm(e.name)) is not None:
            out.append(Match("exact", uuid))
        elif (uuid := index.lookup_keys(e.name, e.aliases)) is not None:
            out.append(Match("key", uuid))
        else:
            out.append(None)
    rest = [i for i, m in enumerate(out) if m is None]
    if rest and vectors is not None and len(matrix):
        sims = _similarities(matrix, vectors[rest])
        for row, i in enumerate(rest):
            out[i] = _similar(index, extracted[i], labels[i], sims[row], threshold)
    return [m or Match("new") for m in out]


def merge_summary(old: str, new: str, cap: int) -> str:
    """Newest sentences first, each once (case-insensitively), cut at `cap` characters."""
    parts: list[str] = []
    seen: set[str] = set()
    for sentence in (*_sentences(new), *_sentences(old)):
        key = _sentence_key(sentence)
        if key and key not in seen:
            seen.add(key)
            parts.append(sentence)
    out = ""
    for sentence in parts:
        candidate = f"{out} {sentence}".strip()
        if len(candidate) > cap:
            break
        out = candidate
    return out or (parts[0][:cap] if parts else "")


def _grown_summary(old: str, new: str, cap: int) -> str:
    """The merged summary while it still holds every old sentence; else the old one unchanged.

    A full summary is not rewritten by every new mention (hub entities are mentioned by most
    episodes): it stops growing at the cap instead of churning.
    """
    merged = merge_summary(old, new, cap)
    kept = {_sentence_key(x) for x in _sentences(merged)}
    if all(_sentence_key(x) in kept for x in _sentences(old)):
        return merged
    return old


def _merged_attributes(old: str, new: dict[str, Any], aliases: Sequence[str]) -> str:
    current: dict[str, Any] = json.loads(old or "{}")
    merged = {**current, **new}
    if aliases:
        known = current.get("aliases")
        listed = json.loads(known) if isinstance(known, str) and known.startswith("[") else []
        merged["aliases"] = list(dict.fromkeys([*listed, *aliases]))
    return canonical_attributes(merged)


@dataclass
class EntityPlan:
    """Phase two's output: rows to write, the uuid of every extracted name, counts."""

    rows: dict[str, Entity] = field(default_factory=dict)
    uuid_of: dict[str, str] = field(default_factory=dict)  # canon(name or alias) -> uuid
    names: list[tuple[str, str]] = field(default_factory=list)  # (name or alias, uuid)
    mentions: list[str] = field(default_factory=list)
    minted: set[str] = field(default_factory=set)  # uuids of the entities created here
    created: int = 0
    merged: int = 0
    reclassified: int = 0


def plan_entities(
    index: GroupIndex,
    extracted: Sequence[CleanEntity],
    labels: Sequence[tuple[tuple[str, ...], str | None]],
    matches: Sequence[Match],
    *,
    group_id: str,
    reference_time: datetime,
    summary_cap: int,
) -> EntityPlan:
    """Phase two: turn matches into entity rows (new or updated) — deterministic merges."""
    plan = EntityPlan()
    uuids: list[str] = []
    for e, (label_set, original), m in zip(extracted, labels, matches, strict=True):
        if original is not None:
            plan.reclassified += 1
        if m.how == "batch":
            assert m.batch is not None
            target = uuids[m.batch]
        elif m.uuid is not None and m.how != "ambiguous":
            target = m.uuid
        else:
            target = ""
        attrs = dict(e.attributes)
        if original is not None:
            attrs["original_entity_type"] = original
        if not target:
            target = str(uuidlib.uuid4())
            plan.minted.add(target)
            row = Entity(
                uuid=target,
                group_id=group_id,
                name=e.name,
                labels=label_set,
                summary=merge_summary("", e.summary, summary_cap),
                attributes=_merged_attributes("{}", attrs, e.aliases),
                created_at=reference_time,
            )
            plan.created += 1
        else:
            current = plan.rows.get(target) or index.entities[target]
            aliases = list(e.aliases)
            if normalize_name(e.name) != normalize_name(current.name):
                aliases.append(e.name)
            row = replace(
                current,
                labels=normalize_labels([*current.labels, *label_set]),
                summary=_grown_summary(current.summary, e.summary, summary_cap),
                attributes=_merged_attributes(current.attributes, attrs, aliases),
            )
            if m.how != "batch":
                plan.merged += 1
        if row != index.entities.get(target):
            plan.rows[target] = row
        uuids.append(target)
        for name in (e.name, *e.aliases):
            plan.uuid_of.setdefault(canon(name), target)
            plan.names.append((name, target))
        if target not in plan.mentions:
            plan.mentions.append(target)
    return plan


@dataclass(frozen=True)
class ResolvedFact:
    """An extracted fact with both endpoints resolved (or the reason it was dropped)."""

    fact: CleanFact
    source_uuid: str | None
    target_uuid: str | None

    @property
    def unresolved(self) -> str | None:
        if self.source_uuid and self.target_uuid:
            return None
        if not self.source_uuid and not self.target_uuid:
            return "both"
        return "source" if not self.source_uuid else "target"


def _loose(plan: EntityPlan, name: str) -> str | None:
    """A fact endpoint the model wrote differently from the entity list, matched in the episode
    only and only when unambiguous: an acronym of a listed name (or the reverse), a fuzzily
    equal name with the same digits, or one word naming exactly one listed entity by its first
    or last word ("Armstrong" for "Neil Armstrong")."""
    key, acr, short = canon(name), acronym(name), is_acronym_like(name)
    words = name.split()
    single = len(words) == 1 and len(key) >= 4 and not numbers(name)
    found: set[str] = set()
    for listed, uuid in plan.names:
        if (acr and is_acronym_like(listed) and canon(listed) == acr) or (
            short and acronym(listed) == key
        ):
            return uuid
        if numbers(listed) == numbers(name) and jaccard(listed, name) >= FUZZY_JACCARD:
            return uuid
        parts = listed.split()
        if single and len(parts) > 1 and key in (canon(parts[0]), canon(parts[-1])):
            found.add(uuid)
    return found.pop() if len(found) == 1 else None


def _endpoint(index: GroupIndex, plan: EntityPlan, name: str) -> str | None:
    """An entity uuid of the group as given (caller-written facts), else the episode's entities
    (exact keys), then the group's, then loose episode matches."""
    return (
        (name if name in index.entities else None)
        or plan.uuid_of.get(canon(name))
        or index.lookup_norm(name)
        or index.lookup_keys(name)
        or _loose(plan, name)
    )


def resolve_facts(
    index: GroupIndex, plan: EntityPlan, facts: Sequence[CleanFact]
) -> list[ResolvedFact]:
    """Endpoints against the episode's entities first, then the group's."""
    return [
        ResolvedFact(f, _endpoint(index, plan, f.source), _endpoint(index, plan, f.target))
        for f in facts
    ]
