"""`knowledge_rebuild_from_wal` and `knowledge_rebuild_status`
(docs/api.md §knowledge_rebuild_from_wal, §knowledge_rebuild_status): re-deriving a group from its
WAL, in the foreground or as a background job.

The replay is the kernel's catch-up machinery (`lcg.engine.catchup`, reached through
`lcg.engine.exclusive`) run under the write lock: checks (steps 4-8), the purge of a full
rebuild, the replay, and what it leaves behind (positions, WAL problems, names, search, the
embedder stamp, cross-group hops). A full rebuild also owes the other groups something: their
cross-group pointers into the re-derived group are re-resolved by name, ignoring the staleness
gate (after a reset or a bounded restore positions are not comparable).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import anyio.to_thread

from lcg.curation.pointers import rebind_locked
from lcg.embedding.vectors import embed_plan, plan_for_rows
from lcg.engine import Engine, exclusive
from lcg.engine.jobs import RebuildJob
from lcg.engine.replay import ReplayReport, write_position
from lcg.errors import ConflictError, InvalidRequestError, WalGenerationError
from lcg.ontology import record_ingested_ontology
from lcg.storage.backend import GraphReader, GroupMovedError
from lcg.wal.fold import fold
from lcg.wal.layout import ordered_files
from lcg.wal.reader import ReadStats, iter_records
from lcg.wal.records import WalRecord

__all__ = ["rebuild_from_wal", "rebuild_groups", "rebuild_status", "start_rebuild"]

P = ParamSpec("P")
T = TypeVar("T")
Progress = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class _RebuildPlan:
    """What a rebuild will do once its checks passed (docs/api.md §knowledge_rebuild_from_wal, the
    generation and data checks)."""

    from_seq: int
    to_seq: int | None
    has_data: bool
    reset: bool
    previous: str | None
    generation: str | None


async def _run(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


def _rebind(engine: Engine, group_id: str) -> dict[str, int]:
    # Called by the rebuild with the write lock held: entering the writer again only re-enters it.
    with engine.writer() as w:
        return rebind_locked(engine, w, group_id, force=True)


async def rebuild_from_wal(
    engine: Engine,
    group_id: str,
    from_seq: int = 0,
    to_seq: int | None = None,
    dry_run: bool = False,
    force_clear: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Replay a group's WAL into the graph now (docs/api.md §knowledge_rebuild_from_wal, synchronous
    form)."""
    return await _run(_rebuild, engine, group_id, from_seq, to_seq, dry_run, force_clear, progress)


async def rebuild_groups(
    engine: Engine,
    group_ids: Sequence[str],
    *,
    force_clear: bool = True,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Rebuild several groups from their WALs, under one hold of the write lock."""

    def run() -> list[dict[str, Any]]:
        with exclusive.write_lock(engine):
            if dry_run:
                return [
                    _rebuild(engine, g, 0, None, True, force_clear, progress) for g in group_ids
                ]
            results = [
                _rebuild(engine, g, 0, None, False, force_clear, progress) for g in group_ids
            ]
            exclusive.set_indices_built(engine, all(r["indices_built"] for r in results))
            return results

    return await _run(run)


async def start_rebuild(
    engine: Engine,
    group_id: str,
    from_seq: int = 0,
    to_seq: int | None = None,
    force_clear: bool = False,
) -> dict[str, Any]:
    """Start a real rebuild as a background job (docs/api.md §knowledge_rebuild_from_wal, the
    background job, non-streaming form).

    Every refusal of steps 4-8 is raised here, before a job exists (the checks read a
    snapshot; the job repeats them under the write lock, and fails if the state changed in
    between). If a job is already running (any group), that job is returned instead.
    """
    return await _run(_start_rebuild, engine, group_id, from_seq, to_seq, force_clear)


def _start_rebuild(
    engine: Engine,
    group_id: str,
    from_seq: int,
    to_seq: int | None,
    force_clear: bool,
) -> dict[str, Any]:
    if exclusive.store(engine).keeps_wal:
        _stream_checks(engine, group_id, from_seq, to_seq, False, force_clear)
        total = 1
    else:
        directory = _rebuild_directory(engine, group_id)
        with engine.reader() as conn:
            _rebuild_plan(engine, conn, directory, group_id, from_seq, to_seq, False, force_clear)
        total = len(ordered_files(directory))

    def work(job: RebuildJob) -> dict[str, Any]:
        result = _rebuild(engine, group_id, from_seq, to_seq, False, force_clear, job.progress)
        result.pop("success", None)
        return result

    job, _ = exclusive.jobs(engine).start(group_id, total, work)
    return {"success": True, "job_id": job.job_id, "status": "running"}


def rebuild_status(engine: Engine, job_id: str) -> dict[str, Any]:
    """`knowledge_rebuild_status` (docs/api.md §knowledge_rebuild_status): a background job's state,
    from memory."""
    job = exclusive.jobs(engine).get(job_id)
    if job is None:
        return {"status": "not_found"}
    return job.to_wire()


def _rebuild_directory(engine: Engine, group_id: str) -> Path:
    """The group's WAL directory, if it holds any WAL file (docs/api.md §knowledge_rebuild_from_wal,
    the WAL directory check)."""
    directory = engine.parts.wal.directory(group_id)
    if not directory.is_dir() or not any(directory.glob("*.jsonl")):
        raise InvalidRequestError(f"No WAL files found at {directory}", field="group_id")
    return directory


def _rebuild_plan(
    engine: Engine,
    conn: GraphReader,
    directory: Path,
    group_id: str,
    from_seq: int,
    to_seq: int | None,
    dry_run: bool,
    force_clear: bool,
) -> _RebuildPlan | dict[str, Any]:
    """docs/api.md §knowledge_rebuild_from_wal, the generation and data checks (checks only): the
    effective plan, or a dry run's reset answer.

    Raises:
        WalGenerationError, ConflictError: the rebuild is refused.
    """
    position = exclusive.catchup(engine).position(conn, group_id)
    has_data = exclusive.catchup(engine).group_has_data(conn, group_id)
    applied, previous = position if position else (None, None)
    generation = engine.parts.wal.generation(group_id)
    if applied is not None and generation is None:
        raise WalGenerationError(
            f'group "{group_id}": {directory}/.wal-generation.json is absent or unreadable — '
            "republish the full WAL directory including its dot-files, or create the file by "
            'hand with {"generation": "<any unique string>"}'
        )
    reset = applied is not None and generation != previous
    if reset and dry_run:
        return {
            "success": True,
            "group_id": group_id,
            "dry_run": True,
            "reset_detected": True,
            "previous_generation": previous,
            "generation": generation,
            "message": "the WAL stream's generation changed since it was applied; a real "
            "rebuild will purge the group and replay the whole stream",
        }
    if reset:
        from_seq, to_seq, force_clear = 0, None, True
    if from_seq == 0 and has_data:
        prefix = (
            f'knowledge_rebuild_from_wal: group "{group_id}" already contains data and '
            "from_seq: 0 is a full rebuild."
        )
        if dry_run:
            raise ConflictError(
                f"{prefix} A dry run cannot preview this cleanly — purge the "
                "group first or pass a from_seq > 0."
            )
        if not force_clear:
            raise ConflictError(
                f"{prefix} Pass force_clear: true to purge the group and replay "
                "it, or a from_seq > 0 to replay a tail."
            )
    return _RebuildPlan(from_seq, to_seq, has_data, reset, previous, generation)


def _rebuild(
    engine: Engine,
    group_id: str,
    from_seq: int,
    to_seq: int | None,
    dry_run: bool,
    force_clear: bool,
    progress: Callable[[dict[str, Any]], None] | None,
) -> dict[str, Any]:
    if exclusive.store(engine).keeps_wal:
        return _rebuild_from_stream(engine, group_id, from_seq, to_seq, dry_run, force_clear)
    directory = _rebuild_directory(engine, group_id)
    with exclusive.write_lock(engine):
        db, cu = exclusive.store(engine), exclusive.catchup(engine)
        with db.read_for_write() as conn:
            plan = _rebuild_plan(
                engine, conn, directory, group_id, from_seq, to_seq, dry_run, force_clear
            )
        if isinstance(plan, dict):
            return plan
        from_seq, to_seq, has_data = plan.from_seq, plan.to_seq, plan.has_data
        reset, previous, generation = plan.reset, plan.previous, plan.generation
        if dry_run:
            return _dry_run(engine, directory, group_id, from_seq, to_seq, previous, generation)
        exclusive.set_indices_built(engine, False)
        engine.parts.search.invalidate([group_id])
        engine.parts.wal.drop_stream(group_id)
        if from_seq == 0 and has_data:
            with db.transaction() as tx:
                tx.purge_group(group_id)
                write_position(tx, group_id, None, generation)
        prebuilt = cu.prebuilt_search()
        report = cu.replay(
            db,
            directory,
            group_id,
            engine.parts.embedder,
            generation=generation,
            from_seq=from_seq,
            to_seq=to_seq,
            bulk_load=from_seq == 0,
            batch_size=engine.settings.replay_batch_size,
            progress=progress,
            loaded=prebuilt,
        )
        cu.stamp_replayed(group_id, full=from_seq == 0)
        problems = exclusive.wal_problems(engine)
        problems.record_losses(report, full=from_seq == 0)
        problems.check_database_ahead([group_id])  # its stream was dropped: floor it again
        max_seq = engine.parts.wal.bounds(group_id).max_seq
        if (
            to_seq is not None
            and max_seq is not None
            and report.last_committed_seq is not None
            and to_seq < max_seq
        ):
            # A bounded restore: keep the later lines from being replayed at the next open.
            with db.transaction() as tx:
                write_position(tx, group_id, report.last_committed_seq, generation, max_seq)
        cu.reload_names()
        engine.parts.search.invalidate([group_id])
        prebuilt.install(group_id)
        cu.rewire_cross_group()
        # Pointers into a re-derived group are re-resolved by name, ignoring the staleness
        # gate: after a reset or a bounded restore, positions are not comparable.
        rebound = _rebind(engine, group_id) if from_seq == 0 else None
        # The group's texts were just embedded by the replay: loading it hits the cache.
        exclusive.set_indices_built(engine, cu.warm_search([group_id]))
        cu.emit_replay(report)
        record_ingested_ontology(engine.settings)  # the graph now reflects the current ontology
        return _result(
            engine,
            report,
            dry_run=False,
            reset=reset,
            previous=previous,
            generation=generation,
            rebind=rebound if reset else None,
        )


def _stream_checks(
    engine: Engine,
    group_id: str,
    from_seq: int,
    to_seq: int | None,
    dry_run: bool,
    force_clear: bool,
) -> list[WalRecord]:
    """The checks of a rebuild from a server's stream (those of `_rebuild_plan` that apply):
    the group's records (from `from_seq` on).

    Raises:
        InvalidRequestError: a bounded rebuild (`to_seq`), or no stream; ConflictError: the
            group holds data and a full rebuild may not purge it.
    """
    db = exclusive.store(engine)
    if to_seq is not None:
        raise InvalidRequestError(
            f"on LCG_STORAGE={db.backend} to_seq is refused: a group's graph always holds its "
            "whole stream (the position every process's commit is checked against), so it "
            "cannot be restored to an earlier seq without cutting acknowledged lines from the "
            "stream; a bounded restore replays the embedded store's WAL files",
            field="to_seq",
        )
    records = db.stream_records(group_id, from_seq)
    if not records and not (db.stream_bounds(group_id) or {}).get("entries"):
        raise InvalidRequestError(
            f"No WAL stream found for group '{group_id}' on the server", field="group_id"
        )
    if from_seq > 0:  # a tail: the lines applied again on top of the group's rows
        return records  # none when from_seq is past the stream's end, as on Kuzu
    with db.read_for_write() as r:
        has_data = any(r.group_counts(group_id).values())
    if has_data:
        prefix = (
            f'knowledge_rebuild_from_wal: group "{group_id}" already contains data and '
            "from_seq: 0 is a full rebuild."
        )
        if dry_run:
            raise ConflictError(
                f"{prefix} A dry run cannot preview this cleanly — purge the group first."
            )
        if not force_clear:
            raise ConflictError(
                f"{prefix} Pass force_clear: true to purge the group and replay it."
            )
    return records


def _rebuild_from_stream(
    engine: Engine,
    group_id: str,
    from_seq: int,
    to_seq: int | None,
    dry_run: bool,
    force_clear: bool,
) -> dict[str, Any]:
    """A rebuild of a group from the WAL stream a server store keeps. Full (`from_seq` 0):
    fold every line, then purge the group and bulk-load the fold in one commit of the group
    (all or nothing). A tail (`from_seq` > 0): the lines from `from_seq` on applied again to
    the group's rows, in order, in one unit guarded at the group's position
    (`GraphBackend.replay_tail`: a commit of another process meanwhile applies nothing).

    Raises:
        InvalidRequestError: a bounded rebuild (`to_seq`), which this store does not offer,
            or no stream; ConflictError: as a full rebuild on Kuzu, or another process
            committed to the group during a tail (send it again).
    """
    db = exclusive.store(engine)
    with exclusive.write_lock(engine):
        cu = exclusive.catchup(engine)
        records = _stream_checks(engine, group_id, from_seq, to_seq, dry_run, force_clear)
        mode = "dry_run" if dry_run else ("bulk" if from_seq == 0 else "incremental")
        report = ReplayReport(group_id, from_seq, None, mode=mode)
        if dry_run:
            report.mutations_replayed = len(records)
        elif from_seq > 0:
            try:
                report.mutations_replayed = db.replay_tail(group_id, from_seq)
            except GroupMovedError as exc:
                raise ConflictError(
                    f"group '{group_id}' moved during the tail rebuild (another process "
                    "committed to it): nothing was applied, send it again"
                ) from exc
            report.transactions_committed = 1
            report.last_committed_seq = records[-1].seq if records else None
            cu.reload_names()
            engine.parts.search.invalidate([group_id])
            exclusive.set_indices_built(engine, cu.warm_search([group_id]))
            cu.emit_replay(report)
        else:
            folded = fold(group_id, records)
            if folded.needs_statement_replay:
                raise InvalidRequestError(
                    f"group {group_id!r}: its stream holds raw Cypher operations, which do not "
                    f"run on LCG_STORAGE={db.backend}",
                    field="group_id",
                )
            report.unrecognised_lines = folded.unrecognised
            report.noop_lines = folded.noops
            report.failed_lines = len(folded.failures)
            plan = plan_for_rows(
                folded.entities.values(), folded.facts.values(), folded.episodes.values()
            )
            vectors = embed_plan(plan, engine.parts.embedder)
            exclusive.set_indices_built(engine, False)
            engine.parts.search.invalidate([group_id])
            with db.transaction() as tx:
                tx.purge_group(group_id)
                tx.load_folded(folded, vectors)
            report.transactions_committed = 1
            report.mutations_replayed = folded.applied
            report.last_committed_seq = folded.last_seq
            cu.stamp_replayed(group_id, full=True)
            cu.reload_names()
            exclusive.set_indices_built(engine, cu.warm_search([group_id]))
            cu.emit_replay(report)
            record_ingested_ontology(engine.settings)
        return _result(engine, report, dry_run=dry_run)


def _dry_run(
    engine: Engine,
    directory: Any,
    group_id: str,
    from_seq: int,
    to_seq: int | None,
    previous: str | None,
    generation: str | None,
) -> dict[str, Any]:
    stats = ReadStats()
    report = ReplayReport(group_id, from_seq, to_seq, mode="dry_run")
    report.mutations_replayed = sum(1 for _ in iter_records(directory, from_seq, to_seq, stats))
    report.unparseable_lines = stats.unparseable
    report.unrecognised_lines = stats.unrecognised
    report.torn_tail_lines = stats.torn_tail
    report.incomplete_batch_lines = stats.incomplete_batch_lines
    report.corrupt_batch_lines = stats.corrupt_batch_lines
    report.lost = stats.lost
    report.wal_files_processed = stats.files_processed
    return _result(
        engine, report, dry_run=True, previous=previous, generation=generation, indices=False
    )


def _result(
    engine: Engine,
    report: ReplayReport,
    *,
    dry_run: bool,
    reset: bool = False,
    previous: str | None = None,
    generation: str | None = None,
    rebind: dict[str, int] | None = None,
    indices: bool = True,
) -> dict[str, Any]:
    """The wire result of a rebuild: the report, then what the pass did (`indices`: whether
    to report `indices_built`; a dry run of the WAL files builds none)."""
    result = report.to_wire(
        engine.settings.replay_failure_samples, engine.settings.replay_fidelity_threshold
    )
    result["success"] = True
    result["dry_run"] = dry_run
    if indices:
        result["indices_built"] = engine.state.indices_built
    result.update(
        {
            "reset_detected": reset,
            "previous_generation": previous,
            "generation": generation,
            "cross_group_rebind": rebind,
        }
    )
    return result
