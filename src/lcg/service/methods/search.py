"""Hybrid search methods: knowledge_find_entities, knowledge_find_relationships,
knowledge_search_passages (docs/api.md §search).

Served by the in-process index of lcg.search (BM25 + exact vectors, fused by reciprocal rank);
Kuzu holds no full-text index. The index loads lazily if it is not loaded yet, so
`knowledge_build_indices` (which reloads it eagerly) is never needed before a search. Results
come in rank order (the reference's order is unspecified) with the reference's record shapes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import anyio.to_thread
from pydantic import BeforeValidator, Field, field_validator

from lcg.engine import Engine
from lcg.graph.hybrid import episode_hits, search_entities, search_facts
from lcg.models import Episode, entity_to_wire, fact_to_wire
from lcg.search.passages import passage_scores
from lcg.search.strategy import STRATEGIES, Strategy
from lcg.service.declare import Context, Declarations
from lcg.service.params import CollapsingGroups, GroupsOptional, Params, count_field, timestamp
from lcg.temporal import provenance
from lcg.timefilter import TimeFilter
from lcg.timeutil import to_read_format


def _strategy(value: Any) -> str:
    if not isinstance(value, str) or value not in STRATEGIES:
        raise ValueError(f"search_strategy must be one of: {', '.join(STRATEGIES)}")
    return value


def _strings(name: str) -> Any:
    def check(value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValueError(f"{name} must be an array of non-empty strings")
        return value

    return BeforeValidator(check)


def _uuid(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("center_node_uuid must be a non-empty string")
    return value


Count = Annotated[int, count_field("num_results")]


StrategyName = Annotated[
    str, BeforeValidator(_strategy), Field(json_schema_extra={"enum": list(STRATEGIES)})
]


CenterUuid = Annotated[str, BeforeValidator(_uuid)]


class _Search(Params):
    query: str = ""
    num_results: Count = 10
    search_strategy: StrategyName = "hybrid_rrf"

    @property
    def strategy(self) -> Strategy:
        return STRATEGIES[self.search_strategy]


class FindEntitiesParams(_Search):
    """knowledge_find_entities: `group_ids` variant A (`[]` -> no results)."""

    group_ids: GroupsOptional = None
    center_node_uuid: CenterUuid | None = None
    labels: Annotated[list[str], _strings("labels")] | None = None


class FindRelationshipsParams(_Search):
    """knowledge_find_relationships: `group_ids` variant A, plus the time parameters (default:
    current facts only)."""

    group_ids: GroupsOptional = None
    center_node_uuid: CenterUuid | None = None
    relation_types: Annotated[list[str], _strings("relation_types")] | None = None
    predicates: Annotated[list[str], _strings("predicates")] | None = None
    as_of: Annotated[datetime, timestamp("as_of")] | None = None
    known_at: Annotated[datetime, timestamp("known_at")] | None = None
    include_invalidated: bool = False

    def time_filter(self) -> TimeFilter:
        return TimeFilter(self.as_of, self.known_at, self.include_invalidated)


class SearchPassagesParams(Params):
    """knowledge_search_passages: `group_ids` variant B; `num_results` clamped to [1, 100],
    `min_score` to [0, 1] (docs/api.md §knowledge_search_passages). A `min_score` the client
    passes keeps the reference's meaning (a cosine floor); without one, lcg's default applies:
    hybrid BM25 + vector search, each list on its own evidence (docs/search.md, "Passages")."""

    query: str = Field("", validate_default=True)
    num_results: Count = 10
    min_score: float | None = Field(
        None,
        description="Cosine floor: passages scoring below it are dropped (the reference's "
        "default is 0.5). Absent: each passage on its own evidence, scored by the better of "
        "its cosine and the share of the query's weight it holds (docs/search.md).",
    )
    group_ids: CollapsingGroups = None
    search_strategy: StrategyName = "hybrid_rrf"

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError("query is required and must be non-empty")
        return value

    @field_validator("min_score", mode="before")
    @classmethod
    def _min_score(cls, value: Any) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("min_score must be a number")
        return min(1.0, max(0.0, float(value)))

    @field_validator("num_results", mode="after")
    @classmethod
    def _clamp(cls, value: int) -> int:
        return min(100, max(1, value))

    @property
    def strategy(self) -> Strategy:
        return STRATEGIES[self.search_strategy]


declare = Declarations()


@declare(
    "knowledge_find_entities",
    "read",
    FindEntitiesParams,
    "Search entities (people, places, things, ideas) by name and summary: full-text and "
    "embedding matches fused by rank. The first choice when you have a name or a topic: it "
    "finds the uuid of something before you ask about its relationships "
    "(knowledge_get_entity_neighbors). knowledge_list_entities only browses the newest "
    "entities; knowledge_get_nodes_by_group dumps whole groups.",
    required=("query",),
)
async def _find_entities(engine: Engine, a: FindEntitiesParams, ctx: Context) -> dict[str, Any]:
    found = await search_entities(
        engine,
        a.query,
        group_ids=a.group_ids,
        limit=a.num_results,
        labels=a.labels,
        center_node_uuid=a.center_node_uuid,
        strategy=a.strategy,
    )
    nodes = [entity_to_wire(e) for e, _ in found]
    return {"nodes": nodes, "count": len(nodes)}


@declare(
    "knowledge_find_relationships",
    "read",
    FindRelationshipsParams,
    "Search facts (relationships between entities) by their sentence and predicate: full-text "
    "and embedding matches fused by rank. Returns current facts unless as_of / known_at / "
    "include_invalidated ask for other instants. The first choice for a question about "
    "facts; knowledge_list_relationships only browses the newest, knowledge_get_edges_by_group "
    "dumps whole groups.",
    required=("query",),
)
async def _find_relationships(
    engine: Engine, a: FindRelationshipsParams, ctx: Context
) -> dict[str, Any]:
    found = await search_facts(
        engine,
        a.query,
        group_ids=a.group_ids,
        limit=a.num_results,
        time=a.time_filter(),
        relation_types=a.relation_types,
        predicates=a.predicates,
        center_node_uuid=a.center_node_uuid,
        strategy=a.strategy,
    )
    rows = [f for f, _ in found]
    episodes = await provenance.fact_episodes(engine, rows)
    facts = [provenance.cite(fact_to_wire(f), f, episodes, as_of=a.as_of) for f in rows]
    return {"facts": facts, "count": len(facts)}


@declare(
    "knowledge_search_passages",
    "read",
    SearchPassagesParams,
    "Search the text of ingested episodes (passages): full-text and embedding matches fused by "
    "rank, each passage with its score (its cosine similarity, or the share of the query's "
    "words it holds if higher). Pass min_score for the reference's cosine floor.",
    required=("query",),
)
async def _search_passages(engine: Engine, a: SearchPassagesParams, ctx: Context) -> dict[str, Any]:
    if a.min_score is None:
        return await anyio.to_thread.run_sync(_passages_by_evidence, engine, a)
    found = await anyio.to_thread.run_sync(
        # The client's min_score is this method's vector floor
        # (docs/api.md §knowledge_search_passages), in place of the embedder's: a passage below it
        # is dropped anyway.
        lambda: episode_hits(
            engine, a.query, a.group_ids, 3 * a.num_results, a.strategy, floor=a.min_score
        )
    )
    passages = [_passage(ep, hit.cosine) for ep, hit in found if hit.cosine >= a.min_score][
        : a.num_results
    ]
    return {"passages": passages, "count": len(passages)}


def _passage(ep: Episode, score: float) -> dict[str, Any]:
    return {
        "uuid": ep.uuid,
        "name": ep.name,
        "content": ep.content,
        "source_description": ep.source_description,
        "group_id": ep.group_id,
        "created_at": to_read_format(ep.created_at) or "",
        "valid_at": to_read_format(ep.valid_at),
        "score": score,
    }


def _passages_by_evidence(engine: Engine, a: SearchPassagesParams) -> dict[str, Any]:
    """lcg's default (no `min_score`): the fused ranking, each passage scored by
    `lcg.search.passages.passage_scores`."""
    found = episode_hits(engine, a.query, a.group_ids, a.num_results, a.strategy)
    scores = passage_scores(
        engine.parts.search,
        a.query,
        a.group_ids,
        [(hit.group_id, hit.doc, hit.cosine) for _, hit in found],
    )
    passages = [_passage(ep, score) for (ep, _), score in zip(found, scores, strict=True)]
    return {"passages": passages, "count": len(passages)}
