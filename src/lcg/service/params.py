"""Parameter models for the registered methods: validation at the wire edge, before any write.

Names, defaults and the four `group_ids` behaviours follow spec/API.md §1.11 and §2. Where the
reference silently treats a wrongly typed value as absent, lcg rejects it with an error naming
the field (README, "Differences from the reference"): a typo in a destructive call should fail,
not fall back to a default. `null` still means "absent" everywhere.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from lcg.admin.recover import STRATEGIES
from lcg.errors import InvalidRequestError
from lcg.models import DEFAULT_GROUP_ID
from lcg.timeutil import parse_wire_timestamp
from lcg.wal.layout import encode_group

__all__ = ["Params", "parse_params", "timestamp"]


class Params(BaseModel):
    """Base of every params model: unknown members (e.g. `_progress_token`) are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


def parse_params(model: type[Params], raw: Any) -> Params:
    """Validate raw JSON params into `model`.

    A non-object `params` reads as an empty object (API.md §1.2).

    Raises:
        InvalidRequestError: naming the first offending field.
    """
    data = raw if isinstance(raw, dict) else {}
    data = {k: v for k, v in data.items() if v is not None}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) if err["loc"] else None
        msg = str(err["msg"])
        if msg.startswith("Value error, "):
            text = msg.removeprefix("Value error, ")
        elif err["type"] == "missing" and field == "group_ids":
            text = "group_ids is required and must be a non-empty array of non-empty strings"
        elif err["type"] == "missing":
            text = f"{field} is required"
        else:
            text = f"{field}: {msg}"
        top = str(err["loc"][0]) if err["loc"] else None
        raise InvalidRequestError(text, field=top) from None


# -- reusable field types ------------------------------------------------------------------------


def timestamp(name: str) -> Any:
    """The one validator of every timestamp accepted over the wire: RFC 3339, the DB read
    format, or a bare date (its midnight, UTC); the error message is API.md's."""

    def check(value: Any) -> datetime:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
        try:
            return parse_wire_timestamp(value)
        except ValueError:
            raise ValueError(
                f"{name} '{value}' is not a valid RFC-3339 or 'YYYY-MM-DD HH:MM:SS' timestamp"
            ) from None

    return BeforeValidator(check)


def _required_text(name: str) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} is required and must be a non-empty string")
        return value

    return BeforeValidator(check)


def _write_group(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("group_id must be a string")
    if not value:
        raise ValueError('group_id must be non-empty: writes to group "" cannot be logged')
    try:
        encode_group(value)
    except InvalidRequestError as exc:
        raise ValueError(exc.message) from None
    return value


def _read_group(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("group_id must be a string")
    return value


def _groups_optional(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("group_ids must be an array of strings (or one string)")
    return list(dict.fromkeys(value))


def _groups_required(value: Any) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError("group_ids is required and must be a non-empty array of non-empty strings")
    return list(dict.fromkeys(value))


def _count(name: str, positive: bool = False) -> Any:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer")
        if positive and value <= 0:
            raise ValueError(f"{name} must be > 0")
        if value < 0:
            raise ValueError(f"{name} must be non-negative, got {value}")
        return value

    return BeforeValidator(check)


def _seq(name: str) -> Any:
    def check(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(f"{name} must be a non-negative integer, not a boolean")
        if isinstance(value, int):
            if value < 0:
                raise ValueError(f"{name} must be non-negative, got {value}")
            return value
        raise ValueError(f"{name} must be a non-negative integer")

    return BeforeValidator(check)


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("attributes must be a JSON object")
    return value


def _string_list(name: str) -> Any:
    def check(value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{name} must be an array of strings")
        return value

    return BeforeValidator(check)


WriteGroup = Annotated[str, BeforeValidator(_write_group)]
ReadGroup = Annotated[str, BeforeValidator(_read_group)]
GroupsOptional = Annotated[list[str] | None, BeforeValidator(_groups_optional)]
GroupsRequired = Annotated[list[str], BeforeValidator(_groups_required)]
Attributes = Annotated[dict[str, Any], BeforeValidator(_object)]


class Empty(Params):
    """No parameters."""


class AssertEntityParams(Params):
    name: Annotated[str, _required_text("name")]
    entity_uuid: Annotated[str, _required_text("entity_uuid")] | None = None
    group_id: WriteGroup = DEFAULT_GROUP_ID
    labels: Annotated[list[str], _string_list("labels")] | None = None
    summary: str = ""
    attributes: Attributes = Field(default_factory=dict)


class AssertRelationshipParams(Params):
    source_name: Annotated[str, _required_text("source_name")]
    target_name: Annotated[str, _required_text("target_name")]
    predicate: Annotated[str, _required_text("predicate")]
    group_id: WriteGroup = DEFAULT_GROUP_ID
    fact: str | None = None
    attributes: Attributes = Field(default_factory=dict)
    valid_at: Annotated[datetime, timestamp("valid_at")] | None = None
    relation_type: str | None = None
    # lcg extension: uuids of current facts this one replaces.
    supersedes: list[str] = Field(default_factory=list)

    @field_validator("supersedes", mode="before")
    @classmethod
    def _check_supersedes(cls, value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
            raise ValueError("supersedes must be an array of fact uuid strings")
        return list(dict.fromkeys(x.strip() for x in value))


class GetEpisodesParams(Params):
    group_id: ReadGroup = DEFAULT_GROUP_ID
    last_n: Annotated[int, _count("last_n")] = 50


class GroupsParams(Params):
    """`group_ids` variant A: omitted means all groups, `[]` means none."""

    group_ids: GroupsOptional = None


class EdgesByUuidsParams(Params):
    uuids: Annotated[list[str], _string_list("uuids")] = Field(default_factory=list)


class _CollapsingGroups(Params):
    """`group_ids` variant B: omitted or `[]` means all groups."""

    group_ids: GroupsOptional = None

    @field_validator("group_ids", mode="after")
    @classmethod
    def _collapse(cls, value: list[str] | None) -> list[str] | None:
        return value or None


class ListEntitiesParams(_CollapsingGroups):
    num_results: Annotated[int, _count("num_results", positive=True)] = 500


class ListRelationshipsParams(_CollapsingGroups):
    num_results: Annotated[int, _count("num_results", positive=True)] = 1000


class NeighborsParams(_CollapsingGroups):
    entity_uuid: Annotated[str, _required_text("entity_uuid")]
    num_results: Annotated[int, _count("num_results")] = 50


class BySourceParams(_CollapsingGroups):
    source: Annotated[str, _required_text("source")]
    num_results: Annotated[int, _count("num_results")] = 100


class DeleteEpisodeParams(Params):
    episode_uuid: Annotated[str, _required_text("episode_uuid")]


class DeleteBySourceParams(Params):
    source_file: Annotated[str, _required_text("source_file")]
    group_ids: GroupsRequired


class DeleteChunkParams(Params):
    chunk_id: Annotated[str, _required_text("chunk_id")]
    group_ids: GroupsRequired


class DeleteByGroupParams(Params):
    group_ids: GroupsRequired
    dry_run: bool = False
    confirm: bool = False


class ClearAllParams(Params):
    confirm: bool = False
    # lcg keeps the WAL unless told otherwise (API.md §2.24 defaults to false).
    preserve_wal: bool = True


class QueryCypherParams(Params):
    query: Annotated[str, _required_text("query")]


def _job_id(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        raise ValueError("job_id is required and must be non-empty")
    return value


class RebuildStatusParams(Params):
    # Validated even when absent: a missing job_id gets the same message as an empty one.
    job_id: Annotated[str, BeforeValidator(_job_id)] = Field(default="", validate_default=True)


class RebuildParams(Params):
    # Fields validate in declaration order: the seqs before the group (API.md §2.34 steps 1-4).
    from_seq: Annotated[int, _seq("from_seq")] = 0
    to_seq: Annotated[int, _seq("to_seq")] | None = None
    group_id: str = DEFAULT_GROUP_ID
    dry_run: bool = False
    force_clear: bool = False

    @field_validator("group_id", mode="before")
    @classmethod
    def _default_group(cls, value: Any) -> str:
        if value == "":
            return DEFAULT_GROUP_ID
        return _write_group(value)

    def model_post_init(self, context: Any) -> None:
        if self.to_seq is not None and self.to_seq < self.from_seq:
            raise InvalidRequestError(
                f"knowledge_rebuild_from_wal: to_seq ({self.to_seq}) must not be less than from_seq "
                f"({self.from_seq}) — bounded replay requires from_seq <= to_seq.",
                field="to_seq",
            )


def _strategy(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("strategy is required")
    if value not in STRATEGIES:
        raise ValueError(f"Unknown strategy: {value}")
    return value


class RecoverParams(Params):
    strategy: Annotated[str, BeforeValidator(_strategy)]
