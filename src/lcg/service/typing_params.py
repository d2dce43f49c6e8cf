"""Parameter models of the typing maintenance methods (API.md §2.28-2.31).

`scope` is any string here: an unknown value is a domain failure the method reports as
`{"success": false, ...}` (API.md §1.6), not a parameter error. A wrongly typed value (a number
for `scope`, a string for `dry_run`) is still rejected, naming the field.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from lcg.models import DEFAULT_GROUP_ID
from lcg.ontology.maintenance import SCOPES
from lcg.service.params import Params, WriteGroup, _write_group

__all__ = [
    "CanonicalizeRelationsParams",
    "GroupDryRunParams",
    "ReprocessTypesParams",
]


def _required_group(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("group_id is required and must be a non-empty string")
    return _write_group(value)


def _threshold(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("embedding_threshold must be a number")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"embedding_threshold must be between 0 and 1, got {value}")
    return float(value)


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


RequiredGroup = Annotated[str, BeforeValidator(_required_group)]


class ReprocessTypesParams(Params):
    """`knowledge_reprocess_entity_types` / `knowledge_reprocess_relation_types`."""

    group_id: WriteGroup = DEFAULT_GROUP_ID
    # Advertised as an enum (API.md §4.3) but any string is accepted: see the module docstring.
    scope: str = Field(
        default="untyped",
        description="Which rows to classify: untyped, off_ontology or all.",
        json_schema_extra={"enum": list(SCOPES)},
    )
    dry_run: bool = False


class GroupDryRunParams(Params):
    """`knowledge_backfill_relation_types`: a required group, and dry_run."""

    # Validated even when absent, so a missing group_id gets the same message as "". The schema
    # shows no default: there is none (never "all groups", never "liminis"; API.md §2.29).
    group_id: RequiredGroup = Field(
        default=None,
        validate_default=True,
        description="The one group to process (required; no default).",
        json_schema_extra=_no_default,
    )
    dry_run: bool = False


class CanonicalizeRelationsParams(GroupDryRunParams):
    """`knowledge_canonicalize_relations`: plus the embedding fallback's cosine threshold."""

    embedding_threshold: Annotated[float, BeforeValidator(_threshold)] = Field(
        default=0.7, description="Cosine similarity (0-1) for the embedding fallback."
    )
