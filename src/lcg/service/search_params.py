"""Parameter models of the search methods (API.md §2.8-2.10) and their lcg extensions.

The reference's parameters keep their names, defaults and `group_ids` behaviours (variant A for
`knowledge_find_entities` / `knowledge_find_relationships`: `[]` finds nothing; variant B for
`knowledge_search_passages`: `[]` means every group). The extensions are optional and absent
from the reference: `search_strategy` (a name of lcg.search.strategy.STRATEGIES),
`center_node_uuid`, `labels`, `relation_types`, `predicates`, and on
`knowledge_find_relationships` the time parameters `as_of`, `known_at`, `include_invalidated`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from lcg.search.strategy import STRATEGIES, Strategy
from lcg.service.params import GroupsOptional, Params, timestamp
from lcg.temporal.filter import TimeFilter

__all__ = ["FindEntitiesParams", "FindRelationshipsParams", "SearchPassagesParams"]


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("num_results must be an integer")
    if value < 0:
        raise ValueError(f"num_results must be non-negative, got {value}")
    return value


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


Count = Annotated[int, BeforeValidator(_count)]
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
    `min_score` to [0, 1] (API.md §2.10). Vector-only unless `search_strategy` says otherwise."""

    query: str = Field("", validate_default=True)
    num_results: Count = 10
    min_score: float = 0.5
    group_ids: GroupsOptional = None
    search_strategy: StrategyName = "vector"

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError("query is required and must be non-empty")
        return value

    @field_validator("min_score", mode="before")
    @classmethod
    def _min_score(cls, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("min_score must be a number")
        return min(1.0, max(0.0, float(value)))

    @field_validator("num_results", mode="after")
    @classmethod
    def _clamp(cls, value: int) -> int:
        return min(100, max(1, value))

    @field_validator("group_ids", mode="after")
    @classmethod
    def _collapse(cls, value: list[str] | None) -> list[str] | None:
        return value or None

    @property
    def strategy(self) -> Strategy:
        return STRATEGIES[self.search_strategy]
