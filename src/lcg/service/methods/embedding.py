"""Embedding maintenance methods: knowledge_backfill_summary_embeddings."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from lcg.admin.reembed import backfill_embeddings
from lcg.engine import Engine
from lcg.service.declare import Context, Declarations
from lcg.service.params import CollapsingGroupsParams

__all__: list[str] = []


BACKFILL_MAX_BATCH = 4096


def _batch_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("batch_size must be an integer")
    if not 1 <= value <= BACKFILL_MAX_BATCH:
        raise ValueError(f"batch_size must be between 1 and {BACKFILL_MAX_BATCH}, got {value}")
    return value


class BackfillEmbeddingsParams(CollapsingGroupsParams):
    """`group_ids` omitted or `[]`: every group that holds data."""

    batch_size: Annotated[int, BeforeValidator(_batch_size)] = 256
    dry_run: bool = False


# Scope `write`, like knowledge_backfill_relation_types: it rewrites derived data of the graph
# (vector rows), appends nothing to the WAL, and administers neither the database nor the log.
declare = Declarations()


@declare(
    "knowledge_backfill_summary_embeddings",
    "write",
    BackfillEmbeddingsParams,
    "Embed every entity name and summary, fact and episode whose vector is missing or was made "
    "by another embedding model than the one in use (e.g. after changing LCG_EMBEDDER), group "
    "by group, in batches of batch_size; dry_run only counts. Returns scanned, embedded, "
    "already_current, missing, stale and removed counts, overall and per group. A second run "
    "embeds nothing. knowledge_status.embedding_model_status shows whether it is needed.",
    long_running=True,
)
async def _backfill(engine: Engine, a: BackfillEmbeddingsParams, ctx: Context) -> dict[str, Any]:
    return await backfill_embeddings(
        engine, a.group_ids, a.batch_size, a.dry_run, progress=ctx.progress
    )
