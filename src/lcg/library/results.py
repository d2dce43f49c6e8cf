"""The typed results of the library front (`lcg.open`): TypedDicts of the wire shapes.

A result is the same dict the method returns over JSON-RPC; these TypedDicts only name its
keys and value types for a type checker. They are written by hand from the builders in
`lcg.models` (`entity_to_wire`, `fact_to_wire`), `lcg.temporal` and `lcg.service.methods`,
and `tests/integration/cli/test_library.py` checks each one against a real call's answer (every
declared key present, no undeclared key). Methods whose result has no TypedDict here return
`dict[str, Any]` (the generated `lcg.library.methods` says which, and docs/api.md describes
every shape).
"""

# No `from __future__ import annotations`: TypedDict reads NotRequired from evaluated annotations.
from typing import Any, NotRequired, TypedDict

__all__ = [
    "RESULTS",
    "AddEpisodeResult",
    "AddFactsResult",
    "AssertEntityResult",
    "AssertRelationshipResult",
    "BySourceResult",
    "ChangeEntry",
    "ChangesResult",
    "Citation",
    "ContextResult",
    "EdgesResult",
    "EntityRecord",
    "EpisodeRecord",
    "EpisodesResult",
    "FactRecord",
    "FactsResult",
    "HealthResult",
    "HistoricalFact",
    "IngestExtras",
    "IngestSuperseded",
    "NeighborsResult",
    "NodesResult",
    "Passage",
    "ProcessChunkResult",
    "SearchPassagesResult",
    "SupersededFact",
    "TimelineFact",
    "TimelineResult",
]


# -- records --------------------------------------------------------------------------------------


class EntityRecord(TypedDict):
    """An entity as every read returns it (timestamps in the DB read format)."""

    uuid: str
    name: str
    group_id: str
    labels: list[str]
    created_at: str
    summary: str
    attributes: str  # a JSON object, encoded as a string (the reference's shape)
    episode_uuids: list[str]
    source_descriptions: list[str]


class Citation(TypedDict):
    """One episode a fact came from (lcg.temporal.provenance): `valid_at` is the episode's
    reference time, null when unknown."""

    uuid: str
    source_description: str
    valid_at: str | None


class FactRecord(TypedDict):
    """A fact (an edge) as the graph reads and searches return it: `created_at` is always ""
    there (the reference's shape); `valid_at`/`invalid_at` are null when unknown; `provenance`
    cites the episodes it came from."""

    uuid: str
    name: str
    source_node_uuid: str
    target_node_uuid: str
    group_id: str
    fact: str
    created_at: str
    valid_at: str | None
    invalid_at: str | None
    attributes: str  # a JSON object, encoded as a string (the reference's shape)
    relation_type: str | None
    episode_uuids: list[str]
    source_descriptions: list[str]
    provenance: list[Citation]


class HistoricalFact(FactRecord):
    """A fact as the temporal methods return it: with when the graph learned it (`created_at`
    filled in) and retired it (`expired_at`, null while current)."""

    expired_at: str | None


class TimelineFact(HistoricalFact):
    direction: str  # outgoing | incoming
    status: str  # current | ended | superseded | retracted
    supersedes: list[str]
    superseded_by: list[str]


class ChangeEntry(TypedDict):
    kind: str  # started | ended | learned | retired
    at: str | None
    fact: HistoricalFact


class EpisodeRecord(TypedDict):
    uuid: str
    name: str
    group_id: str
    created_at: str
    source: str
    source_description: str
    content: str
    valid_at: str
    entity_edges: list[str]


class SupersededFact(TypedDict):
    """A current fact a write retired: when it ended, why (`caller`, `ontology`, `builtin`) and
    the fact that replaced it."""

    uuid: str
    fact: str
    invalid_at: str | None
    reason: str
    superseded_by: str


class IngestSuperseded(SupersededFact):
    source_name: str
    target_name: str
    same_episode: NotRequired[bool]  # both facts came with this episode


class Passage(TypedDict):
    uuid: str
    name: str
    content: str
    source_description: str
    group_id: str
    created_at: str
    valid_at: str | None
    score: float


# -- results --------------------------------------------------------------------------------------


class HealthResult(TypedDict):
    ok: bool
    healthy: bool
    state: str  # healthy | initializing | degraded
    reason: NotRequired[str]


class AssertEntityResult(TypedDict):
    entity_uuid: str
    created: bool
    embedding_warning: str | None


class AssertRelationshipResult(TypedDict):
    edge_uuid: str
    created: bool
    embedding_warning: str | None
    edges_superseded: list[SupersededFact]


class NodesResult(TypedDict):
    nodes: list[EntityRecord]
    count: int


class FactsResult(TypedDict):
    facts: list[FactRecord]
    count: int


class EdgesResult(TypedDict):
    edges: list[FactRecord]
    count: int


class EpisodesResult(TypedDict):
    episodes: list[EpisodeRecord]
    count: int


class NeighborsResult(TypedDict):
    center_uuid: str
    nodes: list[EntityRecord]
    edges: list[FactRecord]
    count: int  # = node_count
    node_count: int
    edge_count: int


class BySourceResult(TypedDict):
    source: str
    nodes: list[EntityRecord]
    count: int


class SearchPassagesResult(TypedDict):
    passages: list[Passage]
    count: int


class ContextResult(TypedDict):
    context: str
    token_estimate: int
    token_budget: int
    truncated: bool
    omitted_nodes: int
    omitted_facts: int
    included_node_ids: list[str]
    included_fact_ids: list[str]
    node_count: int
    fact_count: int
    included_episode_ids: list[str]
    omitted_passages: int
    as_of: str | None


class TimelineResult(TypedDict):
    entity: EntityRecord
    facts: list[TimelineFact]
    count: int


class ChangesResult(TypedDict):
    changes: list[ChangeEntry]
    count: int
    since: str | None
    until: str | None
    truncated: bool


class IngestExtras(TypedDict):
    """What lcg adds to every ingestion result: the extractor that ran, the cost of its model
    calls, resolution counters, the facts the episode superseded, salvage counters, timings."""

    extractor: dict[str, Any]
    cost: dict[str, Any]
    entities_created: int
    entities_merged: int
    edges_duplicate: int
    edges_dropped_self_referential: int
    edges_superseded: list[IngestSuperseded]
    salvage: dict[str, Any]
    timings: dict[str, float]


class AddEpisodeResult(IngestExtras):
    episode_uuid: str


class ProcessChunkResult(IngestExtras):
    success: bool
    chunk_id: str
    source_file: str
    episode_uuid: str
    nodes_extracted: int
    edges_extracted: int
    edges_dropped_unresolvable: int
    dropped_edges: list[dict[str, Any]]
    edges_reclassified_unclassified: int
    entities_reclassified_unclassified: int
    entities_dropped_malformed: int
    edges_dropped_malformed: int
    duration_seconds: float
    warning: NotRequired[dict[str, Any]]  # only for a chunk_text over the advisory size


class AddFactsResult(ProcessChunkResult):
    fact_uuids: list[str | None]


RESULTS: dict[str, type] = {
    "health_check": HealthResult,
    "knowledge_assert_entity": AssertEntityResult,
    "knowledge_assert_relationship": AssertRelationshipResult,
    "knowledge_get_episodes": EpisodesResult,
    "knowledge_get_nodes_by_group": NodesResult,
    "knowledge_get_edges_by_group": EdgesResult,
    "knowledge_get_edges_by_uuids": EdgesResult,
    "knowledge_list_entities": NodesResult,
    "knowledge_list_relationships": FactsResult,
    "knowledge_get_entity_neighbors": NeighborsResult,
    "knowledge_get_entities_by_source": BySourceResult,
    "knowledge_add_episode": AddEpisodeResult,
    "knowledge_process_chunk": ProcessChunkResult,
    "knowledge_add_facts": AddFactsResult,
    "knowledge_find_entities": NodesResult,
    "knowledge_find_relationships": FactsResult,
    "knowledge_search_passages": SearchPassagesResult,
    "knowledge_get_context": ContextResult,
    "knowledge_get_entity_timeline": TimelineResult,
    "knowledge_get_changes": ChangesResult,
}
"""Method name -> the TypedDict of its result; every other method returns `dict[str, Any]`."""
