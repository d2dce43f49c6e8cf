"""Parameter models of the time-aware reads and of the temporal and context methods.

`as_of`/`known_at` accept RFC 3339 or the DB read format `YYYY-MM-DD HH:MM:SS` (UTC), like every
timestamp input (API.md §1.12). On the reference's reads (`knowledge_get_edges_by_group`,
`knowledge_list_relationships`, `knowledge_get_entity_neighbors`) the time parameters are
optional extensions: with none of them given, those reads keep the reference's rule and return
every edge, invalidated or not (API.md §1.12); giving any of them filters (docs/temporal.md).
lcg's own methods default to current facts only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

from lcg.errors import InvalidRequestError
from lcg.models import DEFAULT_GROUP_ID
from lcg.service.params import (
    GroupsOptional,
    GroupsParams,
    ListRelationshipsParams,
    NeighborsParams,
    Params,
    ReadGroup,
    timestamp,
)
from lcg.temporal.filter import TimeFilter

__all__ = [
    "MAX_HOPS",
    "MIN_TOKEN_BUDGET",
    "ChangesParams",
    "ContextParams",
    "EdgesByGroupParams",
    "TemporalListRelationshipsParams",
    "TemporalNeighborsParams",
    "TimelineParams",
]

MIN_TOKEN_BUDGET = 256
MAX_HOPS = 3


def _timestamp_schema(description: str) -> Any:
    """Advertised as a plain string: the DB read format is accepted too, not only date-time."""
    return WithJsonSchema(
        {
            "type": "string",
            "description": f"{description} (RFC 3339, 'YYYY-MM-DD HH:MM:SS' UTC, or a date "
            "YYYY-MM-DD: its midnight UTC).",
        }
    )


def _non_empty(name: str) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} is required and must be a non-empty string")
        return value

    return BeforeValidator(check)


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


def _collapse(value: list[str] | None) -> list[str] | None:
    return value or None


# `group_ids` variant B (API.md §1.11): omitted or `[]` means all groups.
CollapsingGroups = Annotated[GroupsOptional, AfterValidator(_collapse)]

AsOf = Annotated[
    datetime,
    timestamp("as_of"),
    _timestamp_schema("Valid time: only facts true in the world at this instant"),
]
KnownAt = Annotated[
    datetime,
    timestamp("known_at"),
    _timestamp_schema("System time: read the graph as it was at this instant"),
]
Since = Annotated[datetime, timestamp("since"), _timestamp_schema("Start of the window, inclusive")]
Until = Annotated[
    datetime, timestamp("until"), _timestamp_schema("End of the window, exclusive (default: now)")
]


class _TimeFields(Params):
    """`as_of`, `known_at`, `include_invalidated`: see lcg.temporal.filter.TimeFilter."""

    as_of: AsOf | None = None
    known_at: KnownAt | None = None
    include_invalidated: bool | None = Field(
        default=None,
        description="false: only facts current at known_at (or now); true: superseded and "
        "ended facts too.",
    )

    def time_filter(self) -> TimeFilter:
        """The filter asked for; an absent `include_invalidated` means false."""
        return TimeFilter(self.as_of, self.known_at, bool(self.include_invalidated))

    def optional_time_filter(self) -> TimeFilter | None:
        """None when no time parameter was given: the reference's unfiltered reads."""
        if self.as_of is None and self.known_at is None and self.include_invalidated is None:
            return None
        return self.time_filter()


# The reference's fields first (pydantic orders fields from the last base to the first).
class EdgesByGroupParams(_TimeFields, GroupsParams):
    """knowledge_get_edges_by_group: `group_ids` variant A plus the time parameters."""


class TemporalListRelationshipsParams(_TimeFields, ListRelationshipsParams):
    """knowledge_list_relationships plus the time parameters."""


class TemporalNeighborsParams(_TimeFields, NeighborsParams):
    """knowledge_get_entity_neighbors plus the time parameters."""


class ChangesParams(Params):
    """knowledge_get_changes: the window is half-open, `[since, until)`."""

    since: Since
    until: Until | None = None
    group_ids: CollapsingGroups = None
    entity_uuid: Annotated[str, _non_empty("entity_uuid")] | None = Field(
        default=None, description="Only facts with this entity as source or target."
    )
    num_results: Annotated[int, _bounded_int("num_results", 1)] = 1000

    def model_post_init(self, context: Any) -> None:
        if self.until is not None and self.until <= self.since:
            raise InvalidRequestError("until must be later than since", field="until")


class TimelineParams(Params):
    """knowledge_get_entity_timeline: `entity_uuid`, or `name` resolved in `group_id`."""

    entity_uuid: Annotated[str, _non_empty("entity_uuid")] | None = None
    name: Annotated[str, _non_empty("name")] | None = Field(
        default=None, description="Entity name (exact, case-insensitive), instead of entity_uuid."
    )
    group_id: ReadGroup = DEFAULT_GROUP_ID

    def model_post_init(self, context: Any) -> None:
        if self.entity_uuid is None and self.name is None:
            raise InvalidRequestError("entity_uuid or name is required", field="entity_uuid")


class ContextParams(Params):
    """knowledge_get_context: a cited block of graph context for `query`, under a token budget."""

    query: Annotated[str, _non_empty("query")] = Field(
        description="The question or topic to gather context for."
    )
    group_ids: CollapsingGroups = None
    token_budget: Annotated[
        int,
        _bounded_int("token_budget", MIN_TOKEN_BUDGET),
        _int_schema(
            "Size limit of the returned text, in tokens estimated as UTF-8 bytes / 4.",
            MIN_TOKEN_BUDGET,
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
