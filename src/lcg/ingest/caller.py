"""Caller-written episodes (knowledge_add_facts): what an extraction model would have returned,
checked against the group and handed to the pipeline's post-extraction path.

`GivenEntity`/`GivenFact` are the validated wire items. `prepare` checks what only the group can
tell — every fact endpoint is a given entity, an entity of the group (by name) or an entity
uuid of the group; every `supersedes` uuid is a current fact of the group — and raises
`InvalidRequestError` naming the field (`facts[2].supersedes[0]`) before anything is written. It
returns the clean items the pipeline resolves, deduplicates, types and commits like extracted
ones; the superseded uuids become the candidate list that `CleanFact.supersedes` indexes into.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lcg.errors import InvalidRequestError
from lcg.extraction.extractor import Cost
from lcg.extraction.salvage import CleanEntity, CleanFact, normalize_predicate
from lcg.ingest.index import GroupIndex, canon
from lcg.ingest.resolve import entity_labels
from lcg.models import Fact, normalize_labels
from lcg.ontology import Ontology

__all__ = ["CallerExtractor", "GivenEntity", "GivenFact", "Prepared", "prepare"]


@dataclass(frozen=True)
class GivenEntity:
    """An entity as the caller names it (resolved against the group like an extracted one)."""

    name: str
    labels: tuple[str, ...] = ()
    summary: str = ""


@dataclass(frozen=True)
class GivenFact:
    """A fact as the caller states it; `source`/`target` are entity names or uuids."""

    source: str
    target: str
    relation_type: str
    fact: str
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    supersedes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prepared:
    """The pipeline's input for a caller-written episode."""

    entities: list[CleanEntity]
    labels: list[tuple[tuple[str, ...], str | None]]
    facts: list[CleanFact]
    candidates: list[Fact]


class CallerExtractor:
    """What ran for a caller-written episode: no model (`describe` -> `{"kind": "caller"}`), and
    no same-entity check for ambiguous matches (those become new entities)."""

    def describe(self) -> dict[str, Any]:
        return {"kind": "caller"}

    async def same(self, pairs: Sequence[tuple[str, str, str, str]], cost: Cost) -> set[int]:
        return set()


def _labels(ontology: Ontology, labels: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
    merged: list[str] = []
    original: str | None = None
    for label in labels:
        found, was = entity_labels(ontology, label)
        merged += found
        original = original or was
    return normalize_labels(merged), original


def _endpoint(index: GroupIndex, given: set[str], value: str, where: str) -> None:
    if value in index.entities or canon(value) in given:
        return
    if index.lookup_norm(value) or index.lookup_keys(value):
        return
    raise InvalidRequestError(
        f"{where}: '{value}' is neither one of this call's entities nor an entity (name or "
        f"uuid) of group '{index.group_id}'; add it to entities",
        field="facts",
    )


def prepare(
    index: GroupIndex,
    ontology: Ontology,
    entities: Sequence[GivenEntity],
    facts: Sequence[GivenFact],
) -> Prepared:
    """Check the caller's items against the group; the clean items the pipeline takes.

    Raises:
        InvalidRequestError: an endpoint resolves nowhere or a superseded uuid is not a current
            fact of the group (naming the field); nothing was written.
    """
    clean_entities: list[CleanEntity] = []
    labels: list[tuple[tuple[str, ...], str | None]] = []
    seen: set[str] = set()
    for e in entities:
        key = e.name.casefold()
        if key in seen:
            continue
        seen.add(key)
        clean_entities.append(CleanEntity(e.name, "Entity", e.summary, (), {}))
        labels.append(_labels(ontology, e.labels))
    given = {canon(e.name) for e in clean_entities}
    candidates: list[Fact] = []
    position: dict[str, int] = {}
    clean_facts: list[CleanFact] = []
    for i, f in enumerate(facts):
        _endpoint(index, given, f.source, f"facts[{i}].source")
        _endpoint(index, given, f.target, f"facts[{i}].target")
        flagged: list[int] = []
        for j, uuid in enumerate(f.supersedes):
            old = index.facts.get(uuid)
            if old is None or old.invalid_at is not None:
                raise InvalidRequestError(
                    f"facts[{i}].supersedes[{j}]: '{uuid}' is not a current fact of group "
                    f"'{index.group_id}' (look facts up with knowledge_get_context or "
                    "knowledge_find_relationships first)",
                    field="facts",
                )
            if uuid not in position:
                position[uuid] = len(candidates)
                candidates.append(old)
            flagged.append(position[uuid])
        clean_facts.append(
            CleanFact(
                f.source,
                f.target,
                normalize_predicate(f.relation_type),
                f.fact,
                f.relation_type,
                f.valid_at,
                f.invalid_at,
                tuple(flagged),
            )
        )
    return Prepared(clean_entities, labels, clean_facts, candidates)
