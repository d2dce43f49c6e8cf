"""Administration methods: raw Cypher, indexes, rebuild from the WAL, WAL administration and
recovery (docs/api.md §admin; lcg.admin)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from lcg.admin import cypher, indices, rebuild, recover, waladmin
from lcg.admin.recover import STRATEGIES
from lcg.engine import Engine
from lcg.errors import InvalidRequestError
from lcg.models import DEFAULT_GROUP_ID
from lcg.service import params as p
from lcg.service import paths
from lcg.service.declare import Context, Declarations
from lcg.service.params import (
    GroupOrDefault,
    Params,
    WriteGroup,
    required_text,
    seq_field,
    write_group,
)


class QueryCypherParams(Params):
    query: Annotated[str, required_text("query")]


def _job_id(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        raise ValueError("job_id is required and must be non-empty")
    return value


class RebuildStatusParams(Params):
    # Validated even when absent: a missing job_id gets the same message as an empty one.
    job_id: Annotated[str, BeforeValidator(_job_id)] = Field(default="", validate_default=True)


class RebuildParams(Params):
    # Fields validate in declaration order: the seqs before the group
    # (docs/api.md §knowledge_rebuild_from_wal, the order of its checks).
    from_seq: Annotated[int, seq_field("from_seq")] = 0
    to_seq: Annotated[int, seq_field("to_seq")] | None = None
    group_id: str = DEFAULT_GROUP_ID
    dry_run: bool = False
    force_clear: bool = False

    @field_validator("group_id", mode="before")
    @classmethod
    def _default_group(cls, value: Any) -> str:
        if value == "":
            return DEFAULT_GROUP_ID
        return write_group(value)

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


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("name is required and must be a non-empty string")
    return value


def _target_dir(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("target_dir must be a non-empty string")
    return value


class MarkGroupParams(Params):
    """`knowledge_wal_mark_list`: one group (`""` means the default group)."""

    group_id: GroupOrDefault = DEFAULT_GROUP_ID


class MarkNameParams(Params):
    """`knowledge_wal_mark_create` / `_delete`: a name and one group."""

    # Absent is validated too, so it gets the same message as ""
    # (docs/api.md §knowledge_wal_mark_create).
    name: Annotated[str, BeforeValidator(_name)] = Field(default=None, validate_default=True)
    group_id: GroupOrDefault = DEFAULT_GROUP_ID


class DumpWalParams(Params):
    """`knowledge_dump_wal`: one group (absent: every group) and the target directory."""

    group_id: WriteGroup | None = None
    target_dir: Annotated[str, BeforeValidator(_target_dir)] | None = None


declare = Declarations()


# -- admin ---------------------------------------------------------------------------------------


@declare(
    "knowledge_query_cypher",
    "cypher",
    QueryCypherParams,
    "Run one Cypher statement against the graph (tables Episode, Entity, Fact; relationships "
    "MENTIONS and RELATES_TO). Every cell comes back as a string. Mutations are logged and "
    "replayed verbatim but bypass lcg's invariants; prefer the typed methods.",
    required=("query",),
)
async def _cypher(engine: Engine, a: QueryCypherParams, ctx: Context) -> dict[str, Any]:
    return await cypher.query_cypher(engine, a.query)


@declare(
    "knowledge_build_indices",
    "admin",
    p.Empty,
    "Drop and reload the in-process search index (text and vectors) of every group; writes wait "
    "meanwhile. Searches never need it first (the index loads itself). Safe to repeat.",
)
async def _build_indices(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    return await indices.build_indices(engine)


@declare(
    "knowledge_rebuild_from_wal",
    "admin",
    RebuildParams,
    "Replay a group's write-ahead log into the graph: from_seq 0 re-derives the whole group "
    "(force_clear: true purges it first if it holds data), a later from_seq replays a tail; "
    "dry_run counts without writing. Without a progress token a real run starts a background "
    "job and returns its job_id at once: poll it with knowledge_rebuild_status.",
    long_running=True,
)
async def _rebuild(engine: Engine, a: RebuildParams, ctx: Context) -> dict[str, Any]:
    # A streaming call (progress wanted) and a dry run answer synchronously; any other call
    # starts a background job, polled with knowledge_rebuild_status
    # (docs/api.md §knowledge_rebuild_from_wal, the background job).
    if ctx.progress is None and not a.dry_run:
        return await rebuild.start_rebuild(engine, a.group_id, a.from_seq, a.to_seq, a.force_clear)
    return await rebuild.rebuild_from_wal(
        engine, a.group_id, a.from_seq, a.to_seq, a.dry_run, a.force_clear, progress=ctx.progress
    )


@declare(
    "knowledge_rebuild_status",
    "read",
    RebuildStatusParams,
    "Poll a background WAL rebuild started by knowledge_rebuild_from_wal (without a progress "
    "token): its status (running, completed, failed or not_found), progress counters and, once "
    "completed, the replay statistics. Jobs are kept in memory only and are lost on restart.",
    required=("job_id",),
)
async def _rebuild_status(engine: Engine, a: RebuildStatusParams, ctx: Context) -> dict[str, Any]:
    return rebuild.rebuild_status(engine, str(a.job_id))


# -- WAL administration (lcg.admin.waladmin) -----------------------------------------------------


@declare(
    "knowledge_dump_wal",
    "admin",
    DumpWalParams,
    "Write the current graph as a fresh, compacted write-ahead log (lcg's own line format) into "
    "target_dir (default .lcg/wal-compacted, which must not exist or be empty; relative to the "
    "export directory, and inside it or the workspace): one group's stream with group_id, else "
    "one stream directory per group. The live graph and WAL are not changed.",
)
async def _dump_wal(engine: Engine, a: DumpWalParams, ctx: Context) -> dict[str, Any]:
    target = a.target_dir
    if target is not None:
        method, field = "knowledge_dump_wal", "target_dir"
        target = str(paths.writable_path(engine.settings, target, method=method, field=field))
    return await waladmin.dump_wal(engine, a.group_id, target)


@declare(
    "knowledge_prepare_checkpoint",
    "admin",
    p.Empty,
    "Before copying .lcg/ for a backup: end every open write-ahead-log file and fold the "
    "database journal into the database file. Unrelated to the knowledge_wal_mark_* methods.",
)
async def _prepare_checkpoint(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    return await waladmin.prepare_checkpoint(engine)


@declare(
    "knowledge_wal_mark_create",
    "admin",
    MarkNameParams,
    "Record a named position ('known good here') in one group's write-ahead log. To return the "
    "group to it later: knowledge_rebuild_from_wal with from_seq 0, to_seq = the mark's seq and "
    "force_clear true (a null seq means the group was empty: use knowledge_delete_by_group).",
    required=("name",),
)
async def _mark_create(engine: Engine, a: MarkNameParams, ctx: Context) -> dict[str, Any]:
    return await waladmin.mark_create(engine, a.name, a.group_id)


@declare(
    "knowledge_wal_mark_list",
    "admin",
    MarkGroupParams,
    "List one group's named write-ahead-log positions, sorted by name, each with whether the "
    "log on disk can still reproduce it (reachable).",
    degraded_ok=True,
)
async def _mark_list(engine: Engine, a: MarkGroupParams, ctx: Context) -> dict[str, Any]:
    return await waladmin.mark_list(engine, a.group_id)


@declare(
    "knowledge_wal_mark_delete",
    "admin",
    MarkNameParams,
    "Delete a named write-ahead-log position, freeing its name for reuse. The log is unchanged.",
    degraded_ok=True,
    required=("name",),
)
async def _mark_delete(engine: Engine, a: MarkNameParams, ctx: Context) -> dict[str, Any]:
    return await waladmin.mark_delete(engine, a.name, a.group_id)


# -- recovery (lcg.admin.recover) ----------------------------------------------------------------


@declare(
    "knowledge_recover",
    "admin",
    RecoverParams,
    "Recover an unavailable or damaged graph database with one strategy: "
    "rebuild_from_workspace_wal (move the database aside and re-derive it from the "
    "write-ahead log; the usual choice), drop_lbug_wal (set the database's own journal aside "
    "and reopen at its last checkpoint, then catch up from the log) or restore_from_backup "
    "(copy the newest *.pre-*-backup over the database, then catch up). Works on a healthy "
    "service too: the open database is replaced.",
    degraded_ok=True,
    required=("strategy",),
)
async def _recover(engine: Engine, a: RecoverParams, ctx: Context) -> dict[str, Any]:
    return await recover.recover(engine, a.strategy)


@declare(
    "knowledge_recover_full",
    "admin",
    p.Empty,
    "One-call recovery: a no-op when the database is open; otherwise reopen it at its last "
    "checkpoint and catch up from the write-ahead log, falling back to a full rebuild from "
    "the log.",
    degraded_ok=True,
)
async def _recover_full(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    return await recover.recover_full(engine)
