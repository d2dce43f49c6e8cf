"""Parameter models of the embedding-maintenance methods (lcg's own; not in spec/API.md)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from lcg.service.params import GroupsOptional, _CollapsingGroups

__all__ = ["BACKFILL_MAX_BATCH", "BackfillEmbeddingsParams"]

BACKFILL_MAX_BATCH = 4096


def _batch_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("batch_size must be an integer")
    if not 1 <= value <= BACKFILL_MAX_BATCH:
        raise ValueError(f"batch_size must be between 1 and {BACKFILL_MAX_BATCH}, got {value}")
    return value


class BackfillEmbeddingsParams(_CollapsingGroups):
    """`group_ids` omitted or `[]`: every group that holds data."""

    group_ids: GroupsOptional = None
    batch_size: Annotated[int, BeforeValidator(_batch_size)] = 256
    dry_run: bool = False
