"""Parameter models of the curation and cross-group methods (API.md §2.25-2.27, §2.32-2.33)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from lcg.curation.pointers import Endpoint
from lcg.models import DEFAULT_GROUP_ID
from lcg.service.params import (
    GroupsOptional,
    Params,
    WriteGroup,
    _required_text,
    _string_list,
    timestamp,
)

__all__ = [
    "ApplyCorrectionsParams",
    "CrossGroupEdgeParams",
    "ExportParams",
    "ImportParams",
    "MergeEntitiesParams",
    "RebindParams",
]

_ENDPOINT_SHAPE = (
    "endpoint must have either 'uuid' alone, or both 'source_group_id' and 'endpoint_name' "
    "alone — not a mix, and not a partial foreign pair"
)


def _endpoint(value: Any) -> Endpoint:
    if not isinstance(value, dict):
        raise ValueError(_ENDPOINT_SHAPE)
    keys = {k for k, v in value.items() if v is not None}
    if keys == {"uuid"} and isinstance(value["uuid"], str):
        return Endpoint(uuid=value["uuid"])
    if (
        keys == {"source_group_id", "endpoint_name"}
        and isinstance(value["source_group_id"], str)
        and isinstance(value["endpoint_name"], str)
    ):
        return Endpoint(
            source_group_id=value["source_group_id"], endpoint_name=value["endpoint_name"]
        )
    raise ValueError(_ENDPOINT_SHAPE)


def _merge_group(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("group_id must be a string")
    return value or DEFAULT_GROUP_ID


def _source_group(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("source_group_id is required")
    return value


EndpointParam = Annotated[Endpoint, BeforeValidator(_endpoint)]


class MergeEntitiesParams(Params):
    canonical_uuid: str | None = None
    canonical_name: str | None = None
    alias_uuids: Annotated[list[str], _string_list("alias_uuids")] = Field(default_factory=list)
    alias_names: Annotated[list[str], _string_list("alias_names")] = Field(default_factory=list)
    merge_all_by_name: bool = False
    group_id: Annotated[str, BeforeValidator(_merge_group)] = DEFAULT_GROUP_ID
    dry_run: bool = False


class ApplyCorrectionsParams(Params):
    dry_run: bool = False


class CrossGroupEdgeParams(Params):
    name: str = ""
    # Absent is validated too, so it gets the shape message (API.md §2.32).
    source: EndpointParam = Field(default=None, validate_default=True)
    target: EndpointParam = Field(default=None, validate_default=True)
    group_id: WriteGroup = DEFAULT_GROUP_ID
    fact: str = ""
    valid_at: Annotated[datetime, timestamp("valid_at")] | None = None
    relation_type: str | None = None


class RebindParams(Params):
    source_group_id: Annotated[str, BeforeValidator(_source_group)] = Field(
        default=None, validate_default=True
    )


class ExportParams(Params):
    """`knowledge_export_graph`: the file to write (inside the workspace or LCG_EXPORT_DIR,
    lcg.service.paths), some groups, and whether an existing file may be replaced."""

    path: Annotated[str, _required_text("path")]
    group_ids: GroupsOptional = None
    overwrite: bool = False


class ImportParams(Params):
    """`knowledge_import_graph`: the portable file to read (inside the workspace or
    LCG_EXPORT_DIR, lcg.service.paths)."""

    path: Annotated[str, _required_text("path")]
