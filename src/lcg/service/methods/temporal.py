"""Temporal and context methods: knowledge_get_changes, knowledge_get_entity_timeline,
knowledge_get_context (docs/temporal.md). All are MCP `read` tools."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from lcg.engine import Engine
from lcg.errors import InvalidRequestError
from lcg.graph.reads import group_of_name
from lcg.service.declare import Context, Declarations
from lcg.service.params import (
    AsOf,
    CollapsingGroups,
    Params,
    ReadGroup,
    count_field,
    required_text,
    timestamp,
    timestamp_schema,
)
from lcg.temporal import context, timeline

MIN_TOKEN_BUDGET = 256
MAX_TOKEN_BUDGET = 1_000_000  # about 4 MB of text


MAX_HOPS = 3


def _bounded_int(name: str, low: int, high: int | None = None) -> Any:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer")
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
        if high is not None and value > high:
            raise ValueError(f"{name} must be <= {high}, got {value}")
        return value

    return BeforeValidator(check)


def _int_schema(description: str, low: int, high: int | None = None) -> Any:
    schema: dict[str, Any] = {"minimum": low, "description": description}
    if high is not None:
        schema["maximum"] = high
    return Field(json_schema_extra=schema)


Since = Annotated[datetime, timestamp("since"), timestamp_schema("Start of the window, inclusive")]


Until = Annotated[
    datetime, timestamp("until"), timestamp_schema("End of the window, exclusive (default: now)")
]


class ChangesParams(Params):
    """knowledge_get_changes: the window is half-open, `[since, until)`."""

    since: Since
    until: Until | None = None
    group_ids: CollapsingGroups = None
    entity_uuid: Annotated[str, required_text("entity_uuid")] | None = Field(
        default=None, description="Only facts with this entity as source or target."
    )
    num_results: Annotated[int, count_field("num_results", positive=True)] = 1000

    def model_post_init(self, context: Any) -> None:
        if self.until is not None and self.until <= self.since:
            raise InvalidRequestError("until must be later than since", field="until")


class TimelineParams(Params):
    """knowledge_get_entity_timeline: `entity_uuid`, or `name` resolved in `group_id`."""

    entity_uuid: Annotated[str, required_text("entity_uuid")] | None = None
    name: Annotated[str, required_text("name")] | None = Field(
        default=None, description="Entity name (exact, case-insensitive), instead of entity_uuid."
    )
    group_id: ReadGroup | None = Field(
        default=None,
        description="The group of `name` (default: the only group with an entity of that "
        "name; required when several have one).",
    )

    def model_post_init(self, context: Any) -> None:
        if self.entity_uuid is None and self.name is None:
            raise InvalidRequestError("entity_uuid or name is required", field="entity_uuid")


class ContextParams(Params):
    """knowledge_get_context: a cited block of graph context for `query`, under a token budget."""

    query: Annotated[str, required_text("query")] = Field(
        description="The question or topic to gather context for."
    )
    group_ids: CollapsingGroups = None
    token_budget: Annotated[
        int,
        _bounded_int("token_budget", MIN_TOKEN_BUDGET, MAX_TOKEN_BUDGET),
        _int_schema(
            "Size limit of the returned text, in tokens estimated as UTF-8 bytes / 4.",
            MIN_TOKEN_BUDGET,
            MAX_TOKEN_BUDGET,
        ),
    ] = 2000
    hops: Annotated[
        int,
        _bounded_int("hops", 0, MAX_HOPS),
        _int_schema("Expansion steps through facts from the search hits.", 0, MAX_HOPS),
    ] = 1
    as_of: AsOf | None = None
    num_seeds: Annotated[
        int,
        _bounded_int("num_seeds", 1, 50),
        _int_schema("Entities and facts taken from hybrid search.", 1, 50),
    ] = 8


declare = Declarations()


@declare(
    "knowledge_get_changes",
    "read",
    ChangesParams,
    "What changed in a time window [since, until): facts that became valid (started), stopped "
    "being valid (ended), were learned or were retired, each entry tagged with its kind, in time "
    "order. Filter by group_ids and by entity_uuid (facts touching that entity).",
)
async def _changes(engine: Engine, a: ChangesParams, ctx: Context) -> dict[str, Any]:
    return await timeline.fact_changes(
        engine, a.since, a.until, a.group_ids, a.entity_uuid, a.num_results
    )


@declare(
    "knowledge_get_entity_timeline",
    "read",
    TimelineParams,
    "Every fact about one entity (by entity_uuid, or by name within group_id), current and "
    "superseded, ordered by when it became true, each with its status and the facts it "
    "superseded / was superseded by.",
)
async def _timeline(engine: Engine, a: TimelineParams, ctx: Context) -> dict[str, Any]:
    group = a.group_id
    if a.entity_uuid is None and group is None:
        group = await group_of_name(engine, a.name or "")
    return await timeline.entity_timeline(engine, a.entity_uuid, a.name, group or "")


@declare(
    "knowledge_get_context",
    "read",
    ContextParams,
    "Graph context for a question, ready to paste into a prompt: entities and facts found by "
    "hybrid search, expanded `hops` steps through the graph, packed into a cited text block of "
    "at most token_budget tokens (estimated as UTF-8 bytes / 4). Currently valid facts come "
    "first; superseded ones are marked with their validity window. Reports what it omitted.",
)
async def _context(engine: Engine, a: ContextParams, ctx: Context) -> dict[str, Any]:
    return await context.get_context(
        engine,
        a.query,
        group_ids=a.group_ids,
        token_budget=a.token_budget,
        hops=a.hops,
        as_of=a.as_of,
        num_seeds=a.num_seeds,
    )
